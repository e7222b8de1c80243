"""The book's Sphinx extension: package listings read as the page does."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))

from book_html import readable_listing  # noqa: E402


def test_equation_labels_become_the_page_numbers_and_markup_plain_text():
    text = ('"""Check ``kl_hat(eps, n)``, eq. (bon-estimator); see :func:`~companion.best_of_n.kl_formula`,\n'
            'eqs. (bon-pmf), (elsewhere-label) and :math:numref:`bon-kl`, eq. ``bon-kl``."""\n'
            'return f(x)  # (a - b) and (x) stay')
    got = readable_listing(text, {"bon-estimator": 6, "bon-pmf": 2, "bon-kl": 4})
    assert got == ('"""Check kl_hat(eps, n), eq. (6); see kl_formula,\n'
                   'eqs. (2), (elsewhere-label) and (4), eq. (4)."""\n'
                   'return f(x)  # (a - b) and (x) stay')


def test_a_listing_without_labels_or_markup_is_unchanged():
    code = "def f(x):\n    return (x - 1) * 2  # a comment (with-dash)\n"
    assert readable_listing(code, {"other": 1}) == code
