"""Glyphs-36: the characters 0-9 and A-Z rendered from the TrueType faces bundled with matplotlib.

Every image is drawn from a seeded generator, so the set is the same on every machine and
nothing downloads. Fonts are split into training faces (the unlabeled pre-training pool) and
held-out faces (the probe's test set): a probe that reads the class off unseen fonts measures
features of the character, not of one rendering of it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from companion.validation import as_positive_int, as_probability

__all__ = ["CHARS", "TRAIN_FONTS", "TEST_FONTS", "list_bundled_fonts", "render_glyphs"]

CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
TEST_FONTS = ("DejaVuSans-BoldOblique", "DejaVuSansMono-Bold", "DejaVuSerif-Italic",
              "STIXGeneralBolIta", "cmss10", "cmtt10")
TRAIN_FONTS = ("DejaVuSans", "DejaVuSans-Bold", "DejaVuSans-Oblique", "DejaVuSansMono",
               "DejaVuSansMono-Oblique", "DejaVuSansMono-BoldOblique", "DejaVuSerif",
               "DejaVuSerif-Bold", "DejaVuSerif-BoldItalic", "STIXGeneral", "STIXGeneralBol",
               "STIXGeneralItalic", "cmr10", "cmb10", "cmmi10")
_CANVAS = 40


def list_bundled_fonts() -> dict[str, Path]:
    """The TrueType faces of Glyphs-36 by name (file stem), from matplotlib's data folder."""
    import matplotlib

    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    fonts = {name: folder / f"{name}.ttf" for name in TRAIN_FONTS + TEST_FONTS}
    missing = [name for name, path in fonts.items() if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"matplotlib's bundled fonts {missing} not found in {folder}")
    return fonts


def _render_one(char: str, font_path: Path, rng: np.random.Generator, size: int,
                clutter_p: float) -> np.ndarray:
    canvas = Image.new("L", (_CANVAS, _CANVAS), 0)
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.truetype(str(font_path), int(rng.integers(26, 34)))
    left, top, right, bottom = draw.textbbox((0, 0), char, font=font)
    draw.text(((_CANVAS - (right - left)) / 2 - left, (_CANVAS - (bottom - top)) / 2 - top),
              char, fill=255, font=font)
    if rng.random() < 0.3:
        canvas = canvas.filter(ImageFilter.MaxFilter(3))
    canvas = canvas.rotate(float(rng.uniform(-12, 12)), resample=Image.BILINEAR,
                           translate=tuple(int(t) for t in rng.integers(-4, 5, size=2)))
    if rng.random() < clutter_p:
        ImageDraw.Draw(canvas).line([tuple(rng.uniform(0, _CANVAS, 2)) for _ in range(2)],
                                    fill=128, width=1)
    canvas = canvas.filter(ImageFilter.GaussianBlur(float(rng.uniform(0, 1))))
    img = np.asarray(canvas.resize((size, size), Image.BOX), dtype=np.float32) / 255.0
    return np.clip(img + rng.normal(0, 0.03, img.shape), 0, 1).astype(np.float32)


def render_glyphs(chars: str = CHARS, fonts=TRAIN_FONTS, n_variants: int = 4, size: int = 16,
                  seed: int = 0, clutter_p: float = 0.5):
    """Render every character in every font ``n_variants`` times.

    Each image: a glyph of random size (26-33 pt) centred on a 40x40 canvas, thickened with
    probability 0.3, rotated by U(-12, 12) degrees and shifted by up to 4 px, crossed by a grey
    line with probability ``clutter_p``, blurred, box-downsampled to ``size`` x ``size`` and
    noised (sigma 0.03). The generator of image (char, font, variant) is seeded by ``seed`` and
    the three indices, so any subset renders the same images as the whole.

    Returns ``(x, y, font_id)``: ``x`` float32 ``[N, 1, size, size]`` in [0, 1], ``y`` int64
    class indices into ``chars``, ``font_id`` int64 indices into ``fonts``.
    """
    if not isinstance(chars, str) or not chars:
        raise ValueError(f"chars: expected a non-empty string, got {chars!r}")
    if len(set(chars)) != len(chars):
        raise ValueError(f"chars: expected distinct characters, got {chars!r}")
    fonts = list(fonts)
    bundled = list_bundled_fonts()
    unknown = [f for f in fonts if f not in bundled]
    if not fonts or unknown:
        raise ValueError(f"fonts: expected a non-empty list of {sorted(bundled)}, got {fonts}")
    n_variants = as_positive_int(n_variants, "n_variants")
    size = as_positive_int(size, "size", minimum=4)
    clutter_p = as_probability(clutter_p, "clutter_p", low_open=False, high_open=False)
    images, labels, font_ids = [], [], []
    for c, char in enumerate(chars):
        for f, name in enumerate(fonts):
            for v in range(n_variants):
                rng = np.random.default_rng([seed, ord(char), sorted(bundled).index(name), v])
                images.append(_render_one(char, bundled[name], rng, size, clutter_p))
                labels.append(c)
                font_ids.append(f)
    x = torch.from_numpy(np.stack(images)[:, None])
    return x, torch.tensor(labels), torch.tensor(font_ids)
