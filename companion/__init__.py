"""Companion package of *ICML 2025, Reproduced*.

One module (or small package) per paper, named after the chapter's slug with
dashes turned into underscores (``best-of-n`` -> :mod:`companion.best_of_n`),
plus the book-wide pieces every chapter uses:

* :mod:`companion.ledger`     -- record each claim a chapter checks;
* :mod:`companion.plotting`   -- the book's one plotting style;
* :mod:`companion.validation` -- argument checks with errors that name the argument;
* :mod:`companion.exercises`  -- checkers for the chapters' exercises.
"""

__version__ = "0.3.0"
