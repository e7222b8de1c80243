"""The book's one plotting style: call :func:`use_book_style` once per chapter.

Colours are given by *role*, so that across chapters the paper's claimed value, the exact
truth, the method and the baselines always look the same.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import seaborn as sns

__all__ = ["COLORS", "use_book_style"]

_PALETTE = sns.color_palette("colorblind")

COLORS = {
    "exact": _PALETTE[0],      # the truth: an exact computation or the reference model
    "method": _PALETTE[4],     # the paper's method or estimator
    "optimum": _PALETTE[2],    # an oracle or optimum
    "claimed": _PALETTE[3],    # what the literature or the paper claims
    "baseline": _PALETTE[7],   # baselines
    "sample": _PALETTE[9],     # Monte-Carlo or measured samples
}


def use_book_style() -> None:
    """Seaborn's white grid with the colour-blind palette, compact figures, no top/right spines."""
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

