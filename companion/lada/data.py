"""Offline data of the LADA chapter: glyphs rendered from matplotlib's fonts, and the stream.

* :func:`render_glyphs` draws characters with the TrueType faces that ship inside matplotlib
  (random size, rotation, shift, weight and blur, then a box downsample to 16x16);
* :func:`handwritten_digits` reads scikit-learn's bundled 8x8 digits and upsamples them;
* :func:`pretraining_set` is the encoder's data: the 26 capital letters, all 21 faces;
* :func:`build_stream` is the continual stream: handwritten digits, then five tasks of
  lowercase letters whose test images use faces never seen in training (§ the stream).

Images are float32 tensors ``(N, 1, 16, 16)`` in ``[0, 1]`` (ink is bright).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import matplotlib
import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from companion.validation import as_choice, as_positive_int

__all__ = ["FONTS", "TRAIN_FONTS", "TEST_FONTS", "TASK_CLASSES", "Task", "render_glyphs",
           "handwritten_digits", "pretraining_set", "build_stream", "class_names"]

#: the 21 text faces bundled with matplotlib (symbol-only faces such as cmex10 are left out)
FONTS = (
    "DejaVuSans", "DejaVuSans-Bold", "DejaVuSans-Oblique", "DejaVuSans-BoldOblique",
    "DejaVuSansMono", "DejaVuSansMono-Bold", "DejaVuSansMono-Oblique", "DejaVuSansMono-BoldOblique",
    "DejaVuSerif", "DejaVuSerif-Bold", "DejaVuSerif-Italic", "DejaVuSerif-BoldItalic",
    "STIXGeneral", "STIXGeneralBol", "STIXGeneralItalic", "STIXGeneralBolIta",
    "cmr10", "cmss10", "cmtt10", "cmb10", "cmmi10",
)
#: stream letters: 15 faces for training, 6 held out for testing (one of each family at least)
TEST_FONTS = ("DejaVuSans-Oblique", "DejaVuSansMono-Bold", "DejaVuSerif-Italic", "STIXGeneralBol",
              "cmss10", "cmmi10")
TRAIN_FONTS = tuple(f for f in FONTS if f not in TEST_FONTS)
#: the six tasks of the stream, in order I: digits, then a-e, f-j, k-o, p-t, u-z
TASK_CLASSES = ("0123456789", "abcde", "fghij", "klmno", "pqrst", "uvwxyz")
_CANVAS, SIZE = 40, 16
_SCALES = {"quick": dict(train_letters=3, test_letters=4, train_digits=40, test_digits=50, pretrain=8),
           "full": dict(train_letters=13, test_letters=8, train_digits=100, test_digits=70, pretrain=16)}


@dataclass
class Task:
    """One task of the stream: images (or, after caching, features) and global class ids."""

    name: str
    classes: list[int]
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor


def class_names() -> list[str]:
    """The 36 stream classes in global-id order (digits 0-9, then a-z)."""
    return [c for chars in TASK_CLASSES for c in chars]


@cache
def _font(name: str, size: int) -> ImageFont.FreeTypeFont:
    path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / f"{name}.ttf"
    return ImageFont.truetype(str(path), size)


def _draw(char: str, font: str, rng: np.random.Generator) -> np.ndarray:
    """One glyph: size U{20..28} px, centred on a 40x40 canvas, rotated by U(-12, 12) degrees,
    shifted by up to 4 px, sometimes emboldened or blurred, box-downsampled to 16x16, noised."""
    canvas = Image.new("L", (_CANVAS, _CANVAS), 0)
    face = _font(font, int(rng.integers(20, 29)))
    stroke = int(rng.random() < 0.25)
    draw = ImageDraw.Draw(canvas)
    left, top, right, bottom = draw.textbbox((0, 0), char, font=face, stroke_width=stroke)
    x = (_CANVAS - (right - left)) / 2 - left
    y = (_CANVAS - (bottom - top)) / 2 - top
    draw.text((x, y), char, fill=255, font=face, stroke_width=stroke, stroke_fill=255)
    dx, dy = rng.integers(-4, 5, size=2)
    canvas = canvas.rotate(float(rng.uniform(-12, 12)), resample=Image.BILINEAR,
                           translate=(int(dx), int(dy)))
    if rng.random() < 0.25:
        canvas = canvas.filter(ImageFilter.GaussianBlur(0.8))
    small = np.asarray(canvas.resize((SIZE, SIZE), Image.BOX), dtype=np.float32) / 255.0
    return np.clip(small + rng.normal(0.0, 0.03, small.shape), 0.0, 1.0).astype(np.float32)


def render_glyphs(chars: str, fonts, n_variants: int, seed: int = 0):
    """Render every character of ``chars`` in every face of ``fonts``, ``n_variants`` times.

    Returns ``(x, y)``: images ``(N, 1, 16, 16)`` and the index of each image's character in
    ``chars`` (int64), with ``N = len(chars) * len(fonts) * n_variants``.
    """
    if not isinstance(chars, str) or not chars or len(set(chars)) != len(chars):
        raise ValueError(f"chars: expected a non-empty string of distinct characters, got {chars!r}")
    fonts = tuple(fonts)
    unknown = [f for f in fonts if f not in FONTS]
    if not fonts or unknown:
        raise ValueError(f"fonts: expected a non-empty list of names from FONTS, got unknown {unknown}")
    n_variants = as_positive_int(n_variants, "n_variants")
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for label, char in enumerate(chars):
        for font in fonts:
            for _ in range(n_variants):
                images.append(_draw(char, font, rng))
                labels.append(label)
    return torch.from_numpy(np.stack(images)[:, None]), torch.tensor(labels, dtype=torch.int64)


def handwritten_digits():
    """scikit-learn's 1,797 handwritten digits, 8x8 upsampled bilinearly to 16x16, in [0, 1]."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images / 16.0, dtype=torch.float32)[:, None]
    x = torch.nn.functional.interpolate(x, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    return x.clamp(0, 1), torch.tensor(d.target, dtype=torch.int64)


def pretraining_set(scale: str = "quick", seed: int = 0):
    """The encoder's held-out classes: capital A-Z in all 21 faces (8 variants at quick scale)."""
    cfg = _SCALES[as_choice(scale, "scale", tuple(_SCALES))]
    return render_glyphs(string.ascii_uppercase, FONTS, cfg["pretrain"], seed=seed)


def _task_order(order) -> list[int]:
    if isinstance(order, str):
        if order == "I":
            return list(range(len(TASK_CLASSES)))
        if order == "II":  # one fixed shuffle, the analogue of the paper's second order
            return [int(i) for i in np.random.default_rng(2025).permutation(len(TASK_CLASSES))]
        raise ValueError(f"order: expected 'I', 'II' or a permutation of 0..5, got {order!r}")
    order = [int(i) for i in order]
    if sorted(order) != list(range(len(TASK_CLASSES))):
        raise ValueError(f"order: expected a permutation of 0..{len(TASK_CLASSES) - 1}, got {order}")
    return order


def build_stream(seed: int = 0, scale: str = "quick", order="I") -> list[Task]:
    """The six tasks of the stream as images, classes numbered globally in the order they arrive.

    Digits: ``train_digits`` / ``test_digits`` images per class drawn (seeded) from scikit-learn's
    set. Letters: ``TRAIN_FONTS`` x ``train_letters`` variants for training, the held-out
    ``TEST_FONTS`` x ``test_letters`` variants for testing.
    """
    cfg = _SCALES[as_choice(scale, "scale", tuple(_SCALES))]
    rng = np.random.default_rng(as_positive_int(seed, "seed", minimum=0))
    digits_x, digits_y = handwritten_digits()
    tasks, first_id = [], 0
    for k in _task_order(order):
        chars = TASK_CLASSES[k]
        ids = list(range(first_id, first_id + len(chars)))
        if k == 0:
            tr, te = [], []
            for c in range(10):
                idx = rng.permutation(np.flatnonzero(digits_y.numpy() == c))
                tr.append(idx[: cfg["train_digits"]])
                te.append(idx[cfg["train_digits"]: cfg["train_digits"] + cfg["test_digits"]])
            tr, te = np.concatenate(tr), np.concatenate(te)
            task = Task("digits", ids, digits_x[tr], digits_y[tr] + first_id, digits_x[te],
                        digits_y[te] + first_id)
        else:
            sub = int(rng.integers(1 << 31))
            xtr, ytr = render_glyphs(chars, TRAIN_FONTS, cfg["train_letters"], seed=sub)
            xte, yte = render_glyphs(chars, TEST_FONTS, cfg["test_letters"], seed=sub + 1)
            task = Task(f"{chars[0]}-{chars[-1]}", ids, xtr, ytr + first_id, xte, yte + first_id)
        tasks.append(task)
        first_id += len(chars)
    return tasks
