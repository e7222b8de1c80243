"""The chapter's data, all offline: scikit-learn's 8x8 digits (scaled by 1/16 into [0, 1]^64), the
2-D blobs of the paper's repository (three N(mu_k, I) clusters, so the true densities are known),
overlapping blobs for the union test, and inputs that no net of the chapter is trained on: glyphs
(digits of other fonts, letters) rendered from matplotlib's bundled fonts the way the digits were
made, random pen strokes, class interpolations and quarter-turned digits."""

from __future__ import annotations

from dataclasses import dataclass

import torch

import numpy as np

from companion.validation import as_finite_tensor, as_index_tensor, as_positive_int

__all__ = ["Dataset", "digits", "blobs", "overlapping_blobs", "shuffle_pixels", "FONTS", "render_glyphs",
           "random_strokes", "interpolate_classes", "quarter_turn"]


def _rand(shape, generator: torch.Generator | None, device) -> torch.Tensor:
    """Uniform draws made on the generator's device (a seeded CPU generator gives the same numbers
    on every machine), then moved to ``device``."""
    where = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, device=where).to(device)


@dataclass(frozen=True)
class Dataset:
    """A train/test split: float32 inputs ``(N, d)``, int64 labels ``0..K-1``; ``centers`` for blobs."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    centers: torch.Tensor | None = None

    def __post_init__(self):
        K = as_positive_int(self.n_classes, "n_classes", minimum=2)
        X_train = as_finite_tensor(self.X_train, "X_train", ndim=2, floating=True)
        as_index_tensor(self.y_train, "y_train", n=len(X_train), high=K)
        X_test = as_finite_tensor(self.X_test, "X_test", shape=(None, X_train.shape[1]), floating=True)
        as_index_tensor(self.y_test, "y_test", n=len(X_test), high=K)

    def to(self, device) -> "Dataset":
        move = (lambda t: None if t is None else t.to(device))
        return Dataset(move(self.X_train), move(self.y_train), move(self.X_test), move(self.y_test),
                       self.n_classes, move(self.centers))


def _tensors(X, y):
    return torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.int64)


def digits(seed: int = 0, test_size: float = 0.3) -> Dataset:
    """The 1,797 digits of ``sklearn.datasets.load_digits`` as x / 16, split stratified by class."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    seed = as_positive_int(seed, "seed", minimum=0)
    if not 0 < test_size < 1:
        raise ValueError(f"test_size: expected a fraction in (0, 1), got {test_size!r}")
    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X / 16.0, y, test_size=test_size, stratify=y, random_state=seed)
    return Dataset(*_tensors(X_tr, y_tr), *_tensors(X_te, y_te), n_classes=10)


def blobs(n_train: int = 6000, n_test: int = 900, random_state: int = 42) -> Dataset:
    """Three unit-variance Gaussian blobs in 2-D (``make_blobs``, as in the paper's 2-D example)."""
    from sklearn.datasets import make_blobs

    n_train, n_test = as_positive_int(n_train, "n_train", minimum=3), as_positive_int(n_test, "n_test", minimum=3)
    X, y, centers = make_blobs(n_samples=n_train + n_test, centers=3, n_features=2, cluster_std=1.0,
                               random_state=random_state, return_centers=True)
    return Dataset(*_tensors(X[:n_train], y[:n_train]), *_tensors(X[n_train:], y[n_train:]), n_classes=3,
                   centers=torch.as_tensor(centers, dtype=torch.float32))


def shuffle_pixels(X: torch.Tensor, generator: torch.Generator | None = None,
                   among: torch.Tensor | None = None) -> torch.Tensor:
    """Each row of ``X`` with its features permuted at random: the same intensities, no digit left.

    ``among``, a bool mask ``(d,)``, restricts the permutation to those features (the others stay).
    """
    X = as_finite_tensor(X, "X", ndim=2, floating=True)
    if among is None:
        among = torch.ones(X.shape[1], dtype=torch.bool, device=X.device)
    if not isinstance(among, torch.Tensor) or among.dtype != torch.bool or among.shape != (X.shape[1],):
        raise ValueError(f"among: expected a bool mask of shape ({X.shape[1]},), got {among!r:.60}")
    cols = torch.nonzero(among.to(X.device)).squeeze(1)
    keys = _rand((X.shape[0], cols.numel()), generator, X.device)
    out = X.clone()
    out[:, cols] = torch.gather(X[:, cols], 1, keys.argsort(1))
    return out


def overlapping_blobs(separation: float = 2.0, n_train: int = 6000, n_test: int = 900,
                      random_state: int = 7) -> Dataset:
    """Three unit-variance Gaussian classes in 2-D: classes 0 and 1 overlap (centres
    ``separation`` apart on the x axis), class 2 lies far from both (centre (0, 6))."""
    from sklearn.datasets import make_blobs

    if isinstance(separation, bool) or not isinstance(separation, (int, float)) or not 0 < separation < 1e6:
        raise ValueError(f"separation: expected a finite number > 0, got {separation!r}")
    n_train, n_test = as_positive_int(n_train, "n_train", minimum=3), as_positive_int(n_test, "n_test", minimum=3)
    centers = np.array([[0.0, 0.0], [float(separation), 0.0], [0.0, 6.0]])
    X, y = make_blobs(n_samples=n_train + n_test, centers=centers, cluster_std=1.0, random_state=random_state)
    return Dataset(*_tensors(X[:n_train], y[:n_train]), *_tensors(X[n_train:], y[n_train:]), n_classes=3,
                   centers=torch.as_tensor(centers, dtype=torch.float32))


# --- inputs the nets never see ---------------------------------------------------------------------
# scikit-learn's digits are 32x32 binary bitmaps counted in non-overlapping 4x4 blocks (0..16); the
# images below are made the same way, so their pixel statistics are those of the digits.

FONTS = ("DejaVuSans", "DejaVuSans-Bold", "DejaVuSans-Oblique", "DejaVuSansMono", "DejaVuSansMono-Bold",
         "DejaVuSerif", "DejaVuSerif-Bold", "DejaVuSerif-Italic", "STIXGeneral", "STIXGeneralBol",
         "STIXGeneralItalic", "cmr10", "cmb10", "cmss10", "cmtt10", "cmti10")
_BITMAP = 32


def _blocks(bitmap: np.ndarray) -> np.ndarray:
    """A 32x32 binary bitmap as the 64 block counts / 16 of the digits (values in [0, 1])."""
    return bitmap.reshape(8, 4, 8, 4).mean(axis=(1, 3)).ravel().astype(np.float32)


def _font_path(name: str):
    from pathlib import Path

    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf" / f"{name}.ttf"


def _glyph_bitmap(char: str, font, rng: np.random.Generator) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFilter

    big = Image.new("L", (160, 160), 0)
    ImageDraw.Draw(big).text((20, 10), char, fill=255, font=font)
    box = big.getbbox()
    glyph = big.crop(box)
    height = int(rng.integers(26, 32))  # the digits fill the height of their bitmap
    width = max(4, min(30, round(glyph.width * height / glyph.height)))
    glyph = glyph.resize((width, height), Image.BILINEAR)
    canvas = Image.new("L", (_BITMAP, _BITMAP), 0)
    dx, dy = (int(v) for v in rng.integers(-1, 2, size=2))
    left = min(max((_BITMAP - width) // 2 + dx, 0), _BITMAP - width)
    top = min(max((_BITMAP - height) // 2 + dy, 0), _BITMAP - height)
    canvas.paste(glyph, (left, top))
    if rng.random() < 0.5:  # handwritten strokes are thick: thicken half of the glyphs
        canvas = canvas.filter(ImageFilter.MaxFilter(3))
    return np.asarray(canvas) > 127


def render_glyphs(chars: str, fonts=FONTS, n_variants: int = 2, seed: int = 0):
    """``chars`` in every face of ``fonts`` (matplotlib's bundled TrueType faces), ``n_variants``
    times each (random height 26-31 px, shift of up to 1 px, thickened with probability 1/2),
    as 64-pixel images made like the digits. Returns ``(X, index)``: float32 ``(N, 64)`` in [0, 1]
    and int64 ``(N,)`` indices into ``chars``."""
    from PIL import ImageFont

    if not isinstance(chars, str) or not chars:
        raise ValueError(f"chars: expected a non-empty string, got {chars!r}")
    fonts = list(fonts) if not isinstance(fonts, str) else [fonts]
    missing = [f for f in fonts if not _font_path(f).is_file()]
    if not fonts or missing:
        raise ValueError(f"fonts: expected names of matplotlib's bundled fonts such as {FONTS[:2]}, "
                         f"got {missing or fonts}")
    n_variants, seed = as_positive_int(n_variants, "n_variants", minimum=1), as_positive_int(seed, "seed", minimum=0)
    images, index = [], []
    for f, name in enumerate(fonts):
        font = ImageFont.truetype(str(_font_path(name)), 100)
        for c, char in enumerate(chars):
            for v in range(n_variants):
                rng = np.random.default_rng([seed, f, ord(char), v])
                images.append(_blocks(_glyph_bitmap(char, font, rng)))
                index.append(c)
    return torch.from_numpy(np.stack(images)), torch.tensor(index)


def random_strokes(n: int, seed: int = 0) -> torch.Tensor:
    """``n`` images of two to four random pen strokes (straight segments and arcs, 4-5 px wide)
    on the digits' 32x32 bitmap, counted in 4x4 blocks like the digits: ink without a digit."""
    from PIL import Image, ImageDraw

    n, seed = as_positive_int(n, "n", minimum=1), as_positive_int(seed, "seed", minimum=0)
    rng = np.random.default_rng([seed, 7919])
    out = []
    for _ in range(n):
        canvas = Image.new("L", (_BITMAP, _BITMAP), 0)
        draw = ImageDraw.Draw(canvas)
        for _ in range(int(rng.integers(2, 5))):
            width = int(rng.integers(4, 6))
            if rng.random() < 0.5:
                draw.line([tuple(rng.uniform(2, 30, 2)) for _ in range(2)], fill=255, width=width)
            else:
                x0, y0 = rng.uniform(1, 10, 2)
                x1, y1 = x0 + rng.uniform(14, 22), y0 + rng.uniform(14, 22)
                start = float(rng.uniform(0, 360))
                draw.arc([x0, y0, x1, y1], start, start + float(rng.uniform(90, 270)), fill=255, width=width)
        out.append(_blocks(np.asarray(canvas) > 127))
    return torch.from_numpy(np.stack(out))


def interpolate_classes(X: torch.Tensor, y: torch.Tensor, n: int, generator: torch.Generator | None = None,
                        weight: float = 0.5) -> torch.Tensor:
    """``n`` images ``weight * x_a + (1 - weight) * x_b`` of two rows of ``X`` with different labels
    ``y`` (drawn at random): points between two classes, on neither."""
    X = as_finite_tensor(X, "X", ndim=2, floating=True)
    y = as_index_tensor(y, "y", n=X.shape[0])
    n = as_positive_int(n, "n", minimum=1)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < 1:
        raise ValueError(f"weight: expected a number in (0, 1), got {weight!r}")
    if int(y.unique().numel()) < 2:
        raise ValueError("y: expected at least two classes to interpolate between")
    a = (_rand((n,), generator, X.device) * X.shape[0]).long()
    b = (_rand((n,), generator, X.device) * X.shape[0]).long()
    clash = y[a] == y[b]
    while bool(clash.any()):  # redraw the partner of every same-class pair
        b[clash] = (_rand((int(clash.sum()),), generator, X.device) * X.shape[0]).long()
        clash = y[a] == y[b]
    return weight * X[a] + (1 - weight) * X[b]


def quarter_turn(X: torch.Tensor, side: int = 8, generator: torch.Generator | None = None) -> torch.Tensor:
    """Each row of ``X`` (a ``side`` x ``side`` image) turned by 90 degrees, clockwise or
    anticlockwise at random: the digit's strokes, in an orientation no digit has."""
    X = as_finite_tensor(X, "X", ndim=2, floating=True)
    side = as_positive_int(side, "side", minimum=2)
    if X.shape[1] != side * side:
        raise ValueError(f"X: expected {side * side} pixels per row ({side} x {side}), got {X.shape[1]}")
    img = X.reshape(-1, side, side)
    left, right = torch.rot90(img, 1, (1, 2)), torch.rot90(img, -1, (1, 2))
    pick = _rand((X.shape[0], 1, 1), generator, X.device) < 0.5
    return torch.where(pick, left, right).reshape(X.shape)
