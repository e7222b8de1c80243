"""The book's one plotting style: call :func:`use_book_style` once per chapter.

Colours are given by *role*, so that across chapters the paper's claimed value, the exact
truth, the method and the baselines always look the same.

Text inside a PNG is not in the page, so a browser cannot measure it: every figure the
notebook shows is drawn once more by :func:`figure_text`, which records the smallest font it
drew and whether a legend lies over text or data, and the PNG carries that record in its
metadata (:data:`PNG_KEYS`). ``tools/browser.py`` reads it back and scales it to the size the
figure is displayed at.
"""

from __future__ import annotations

import json

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.collections import Collection, PathCollection
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import Bbox

__all__ = ["COLORS", "PNG_KEYS", "figure_text", "png_metadata", "use_book_style"]

_PALETTE = sns.color_palette("colorblind")

COLORS = {
    "exact": _PALETTE[0],      # the truth: an exact computation or the reference model
    "method": _PALETTE[4],     # the paper's method or estimator
    "optimum": _PALETTE[2],    # an oracle or optimum
    "claimed": _PALETTE[3],    # what the literature or the paper claims
    "baseline": _PALETTE[7],   # baselines
    "sample": _PALETTE[9],     # Monte-Carlo or measured samples
}

#: The PNG text chunks a figure carries (what ``tools/browser.py`` reads).
PNG_KEYS = {
    "min_font_pt": "book:min-font-pt",      # the smallest font drawn, in points
    "min_font_px": "book:min-font-px",      # the same, in pixels of the PNG at its natural size
    "min_font_text": "book:min-font-text",  # the text drawn at that size
    "dpi": "book:dpi",
    "legend_overlap": "book:legend-overlap",  # JSON list: what a legend lies over
}


def _overlaps(a: Bbox, b: Bbox, slack: float = 1.0) -> bool:
    """Whether ``a`` and ``b`` share more than ``slack`` pixels each way."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > slack) and (min(a.y1, b.y1) - max(a.y0, b.y0) > slack)


def _visible_ink(artist) -> tuple[bool, bool]:
    """(face, edge): whether the artist paints its area, and its outline, visibly."""
    def alpha(colors) -> float:
        colors = np.atleast_2d(np.asarray(colors, dtype=float)) if np.size(colors) else np.zeros((0, 4))
        return float(colors[:, 3].max()) if colors.shape[1:] == (4,) and len(colors) else 0.0

    widths = np.atleast_1d(artist.get_linewidth()) if hasattr(artist, "get_linewidth") else [0.0]
    face = alpha(artist.get_facecolor()) * (artist.get_alpha() or 1.0) >= 0.25 if hasattr(
        artist, "get_facecolor") else False
    if isinstance(artist, Patch) and not artist.get_fill():
        face = False
    edge = alpha(artist.get_edgecolor()) > 0 and float(np.max(widths)) > 0 if hasattr(
        artist, "get_edgecolor") else False
    return face, edge


def _data_under(box: Bbox, artist, renderer) -> bool:
    """Whether ``artist`` (a line, collection, patch or image of an axes) draws inside ``box``."""
    if isinstance(artist, Line2D):
        points = artist.get_transform().transform_path(artist.get_path())
        if artist.get_linestyle() not in ("None", "none", "", " ") and artist.get_linewidth() > 0:
            if points.intersects_bbox(box, filled=False):
                return True
        if artist.get_marker() not in (None, "None", "none", "", " "):
            xy = points.vertices
            return bool(np.any((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1)
                               & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)))
        return False
    if isinstance(artist, AxesImage):
        return _overlaps(box, artist.get_window_extent(renderer))
    face, edge = _visible_ink(artist)
    if isinstance(artist, PathCollection) and len(artist.get_offsets()):
        xy = artist.get_offset_transform().transform(artist.get_offsets())
        return bool(np.any((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)))
    if isinstance(artist, Collection):
        transform = artist.get_transform()
        return any(transform.transform_path(p).intersects_bbox(box, filled=face) for p in artist.get_paths()
                   if (face or edge) and len(p.vertices))
    if isinstance(artist, Patch) and (face or edge):
        path = artist.get_transform().transform_path(artist.get_path())
        return path.intersects_bbox(box, filled=face)
    return False


def _short(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def figure_text(fig: Figure) -> dict:
    """Draw ``fig`` and measure what a reader of its PNG meets.

    Returns ``{"min_font_pt", "min_font_px", "min_font_text", "dpi", "legend_overlap"}``: the
    smallest font drawn (points, and pixels at the figure's dpi), its text, and what each legend
    lies over: drawn text that is not its own (tick and axis labels, titles, annotations), or
    data of an axes it meets (lines, markers, bars, filled areas, images), as short phrases.
    """
    if not isinstance(fig, Figure):
        raise ValueError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    renderer = fig.canvas.get_renderer()
    drawn = []

    def recording(draw):
        def draw_text(gc, x, y, s, prop, angle, ismath=False, mtext=None):
            if str(s).strip():
                drawn.append((prop.get_size_in_points(), str(s), mtext))
            return draw(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
        return draw_text

    renderer.draw_text = recording(type(renderer).draw_text.__get__(renderer))
    try:
        fig.draw(renderer)
    finally:
        del renderer.draw_text
    out = {"min_font_pt": None, "min_font_px": None, "min_font_text": "", "dpi": float(fig.dpi),
           "legend_overlap": []}
    if drawn:
        size, text, _ = min(drawn, key=lambda d: d[0])
        out.update(min_font_pt=round(float(size), 2), min_font_px=round(float(size) * fig.dpi / 72, 2),
                   min_font_text=_short(text))
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for i, legend in enumerate(legend for legend in legends if legend.get_visible()):
        box = legend.get_window_extent(renderer)
        own = set(legend.get_texts()) | {legend.get_title()}
        name = f"legend {i + 1}" if len(legends) > 1 else "the legend"
        texts = []
        for _, text, mtext in drawn:
            if mtext is None or mtext in own or any(mtext in set(other.get_texts()) | {other.get_title()}
                                                    for other in legends):
                continue
            if _overlaps(box, mtext.get_window_extent(renderer)) and _short(text, 24) not in texts:
                texts.append(_short(text, 24))
        if texts:
            out["legend_overlap"].append(f"{name} over text {', '.join(repr(t) for t in texts[:4])}")
        for k, ax in enumerate(fig.axes):
            inside = Bbox.intersection(box, ax.bbox)
            if inside is None or inside.width <= 2 or inside.height <= 2:
                continue
            inside = Bbox.from_extents(inside.x0 + 1, inside.y0 + 1, inside.x1 - 1, inside.y1 - 1)
            artists = [a for a in [*ax.lines, *ax.collections, *ax.patches, *ax.images] if a.get_visible()]
            under = [a for a in artists if _data_under(inside, a, renderer)]
            if under:
                labels = [a.get_label() for a in under if not str(a.get_label()).startswith("_")]
                what = f" ({', '.join(repr(_short(t, 20)) for t in labels[:3])})" if labels else ""
                where = f" of panel {k + 1}" if len(fig.axes) > 1 else ""
                out["legend_overlap"].append(f"{name} over {len(under)} data artist(s){where}{what}")
    return out


def png_metadata(measured: dict) -> dict[str, str]:
    """The PNG text chunks (:data:`PNG_KEYS`) for what :func:`figure_text` measured."""
    if not isinstance(measured, dict) or set(measured) != set(PNG_KEYS):
        raise ValueError(f"measured must be the dict figure_text returns (keys {sorted(PNG_KEYS)})")
    out = {}
    for key, chunk in PNG_KEYS.items():
        value = measured[key]
        if value is None:
            continue
        out[chunk] = json.dumps(value) if isinstance(value, list) else (
            json.dumps(value)[1:-1] if isinstance(value, str) else f"{value:g}")
    return out


def _png(fig: Figure):
    """The notebook's PNG of ``fig``, carrying :func:`figure_text`'s measurements."""
    from IPython.core.pylabtools import print_figure

    if not fig.axes and not fig.lines:
        return None
    metadata = png_metadata(figure_text(fig))
    return print_figure(fig, "png", bbox_inches="tight", base64=True, metadata=metadata)


def use_book_style() -> None:
    """Seaborn's white grid with the colour-blind palette, compact figures, no top/right spines;
    in a notebook, figures are shown as PNGs that carry their measured text size."""
    # Resolve the backend now: the notebook's inline backend, configured on first use, would
    # otherwise reset the figure formatter (and its own rc) after this function has run.
    plt.switch_backend(matplotlib.get_backend())
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    plt.rcParams.update({
        "figure.figsize": (6.4, 3.8),
        "figure.dpi": 110,
        "savefig.bbox": "tight",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.frameon": False,
        "axes.titlesize": "medium",
    })
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the notebook stack
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "display_formatter"):
        shell.display_formatter.formatters["image/png"].for_type(Figure, _png)
