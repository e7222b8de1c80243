"""companion.plotting: the record a figure's PNG carries for the browser test."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from companion import plotting  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_the_smallest_drawn_font_is_recorded_in_points_and_pixels():
    plotting.use_book_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_title("a title", fontsize=14)
    ax.text(0.5, 0.5, "a note", fontsize=7.5)
    ax.text(0.5, 0.2, "   ", fontsize=2)  # blank text draws nothing a reader could read
    got = plotting.figure_text(fig)
    assert got["min_font_pt"] == 7.5 and got["min_font_text"] == "a note"
    assert got["min_font_px"] == pytest.approx(7.5 * fig.dpi / 72, abs=0.01)
    assert got["legend_overlap"] == []


def test_a_legend_over_lines_or_tick_labels_is_named_and_one_beside_the_axes_is_not():
    plotting.use_book_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 1, 2], label="rising")
    ax.legend(loc="center")
    assert any("over 1 data artist" in o and "'rising'" in o for o in plotting.figure_text(fig)["legend_overlap"])
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 1, 2], label="rising")
    fig.legend(loc="lower center")  # no layout engine: drawn over the x tick labels
    assert any("over text" in o for o in plotting.figure_text(fig)["legend_overlap"])
    fig, ax = plt.subplots(layout="constrained")
    ax.plot([0, 1, 2], [0, 1, 2], label="rising")
    ax.bar([0.2], [0.3], width=0.1, label="a bar")
    fig.legend(loc="outside lower center", ncols=2)
    assert plotting.figure_text(fig)["legend_overlap"] == []


def test_a_faint_band_under_a_legend_is_not_data_over_which_it_lies_but_a_solid_one_is():
    plotting.use_book_style()
    for alpha, expected in ((0.1, []), (0.8, ["over 1 data artist"])):
        fig, ax = plt.subplots()
        ax.fill_between([0, 1], [0, 0], [1, 1], alpha=alpha, linewidth=0, label="band")
        ax.set_xlim(0, 1), ax.set_ylim(0, 1)
        ax.legend(loc="center")
        got = plotting.figure_text(fig)["legend_overlap"]
        assert [e for e in expected if not any(e in o for o in got)] == [] and len(got) == len(expected), got


def test_the_png_carries_the_record_as_text_chunks():
    plotting.use_book_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="é ≤ line")
    ax.legend(loc="center")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata=plotting.png_metadata(plotting.figure_text(fig)))
    text = Image.open(io.BytesIO(buffer.getvalue())).text
    assert float(text[plotting.PNG_KEYS["min_font_px"]]) > 0
    assert "data artist" in text[plotting.PNG_KEYS["legend_overlap"]]


@pytest.mark.parametrize("call, match", [
    (lambda: plotting.figure_text("not a figure"), "fig"),
    (lambda: plotting.figure_text(None), "fig"),
    (lambda: plotting.png_metadata({"min_font_pt": 1}), "measured"),
    (lambda: plotting.png_metadata([1, 2]), "measured"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
