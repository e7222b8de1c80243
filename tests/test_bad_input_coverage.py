"""Every public function and class of every chapter's package has a bad-input test.

"Has a test" means: its name is called inside a ``pytest.raises(ValueError, ...)`` block, or
appears in a table of bad inputs (a module-level list whose name contains ``BAD``, or the
``parametrize`` cases of a test that expects a ``ValueError``), in one of the test modules.
Public means: in a module's ``__all__`` (or, in a module without one, a function or class it
defines under a name without a leading underscore), for the package and each of its modules
except private ones and the training entry point.

``EXEMPT`` names, with a reason, the few that take no input a caller could get wrong (result
types, argument-free loaders, a predicate). A new public function without a bad-input test fails.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from functools import cache
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PACKAGES = ["best_of_n", "facttest", "icl_latents", "svg", "catekv", "hyperimts", "orte", "flair", "pieclam", "core",
            "species_range", "toping", "dsda", "metta_class", "ocl", "lada", "gmail", "ngs", "wormi", "kernels"]


# Public names that take no input a caller could get wrong, each with the reason.
EXEMPT = {
    "best_of_n": {"Reference": "a NamedTuple the reference families return (their inputs are checked)",
                  "MarkovLM": "a NamedTuple markov_lm returns (its inputs are checked)"},
    "gmail": {"caption_strings": "takes no argument",
              "Split": "a NamedTuple load_digits_splits returns (its inputs are checked)",
              "Splits": "a NamedTuple load_digits_splits returns (its inputs are checked)"},
    "kernels": {"BlockSparsePlan": "built by prepare_block_sparse_attention, which checks its inputs",
                "SparseDecodePlan": "built by prepare_sparse_decode_attention, which checks its inputs",
                "TunedPlan": "a base class of the two plans",
                "needs_grad": "a predicate: any argument gives True or False"},
    "flair": {"Method": "the base protocol of the stream methods", "EngineEstimate": "takes no argument",
              "flights_path": "takes no argument", "load_flights": "takes no argument"},
    "hyperimts": {"Hypergraph": "a dataclass build_hypergraph returns (its inputs are checked)",
                  "PeakMemory": "takes no argument (a context manager that measures)"},
    "lada": {"StreamResult": "a dataclass run_stream returns", "Task": "a dataclass build_stream fills",
             "class_names": "takes no argument", "handwritten_digits": "takes no argument"},
    "species_range": {"SyntheticGlobe": "a dataclass make_globe fills (its inputs are checked)"},
    "ocl": {"History": "a dataclass the training loop returns", "list_bundled_fonts": "takes no argument"},
    "ngs": {"Rollout": "a NamedTuple the policy's decoder returns", "SearchResult": "a dataclass ngs_search returns"},
    "pieclam": {"ClamResult": "a dataclass fit_clam returns (its inputs are checked)"},
    "catekv": {"RecallBatch": "a dataclass the recall generators fill (their inputs are checked)"},
    "core": {"CityData": "a dataclass make_city_pair fills (its inputs are checked)"},
    "toping": {"Graph": "a dataclass the graph generators fill (their inputs are checked)",
               "Batch": "a dataclass collate fills from Graphs",
               "Diagram": "a dataclass the persistence functions return",
               "History": "a dataclass the training loop returns"},
}


def _public(module) -> dict[str, object]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, obj in vars(module).items() if not n.startswith("_")
                 and (inspect.isfunction(obj) or inspect.isclass(obj))
                 and getattr(obj, "__module__", "") == module.__name__]
    return {n: getattr(module, n) for n in names}


def exports(package: str) -> set[str]:
    """The public functions and classes of ``companion.<package>`` defined in it (not re-exported
    from numpy, torch or another package)."""
    root = importlib.import_module(f"companion.{package}")
    modules = [root]
    if hasattr(root, "__path__"):
        modules += [importlib.import_module(f"companion.{package}.{m.name}")
                    for m in pkgutil.iter_modules(root.__path__) if m.name != "train" and not m.name.startswith("_")]
    found = set()
    for module in modules:
        for name, obj in _public(module).items():
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and \
                    getattr(obj, "__module__", "").startswith(f"companion.{package}"):
                found.add(name)
    return found


def _names(node) -> set[str]:
    return {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
            if isinstance(n, (ast.Attribute, ast.Name))}


def _raises_value_error(item) -> bool:
    call = item.context_expr
    return (isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "raises" and bool(call.args)
            and getattr(call.args[0], "id", "") == "ValueError")


@cache
def _tested() -> frozenset[str]:
    """Every name used inside a ``pytest.raises(ValueError)`` block or a table of bad inputs."""
    names: set[str] = set()
    for path in TESTS.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and "BAD" in t.id.upper()
                                                    for t in node.targets):
                names |= _names(node.value)
            elif isinstance(node, ast.With) and any(_raises_value_error(i) for i in node.items):
                names |= _names(node)
            elif isinstance(node, ast.FunctionDef) and any(
                    isinstance(w, ast.With) and any(_raises_value_error(i) for i in w.items) for w in ast.walk(node)):
                names |= set().union(*(_names(d) for d in node.decorator_list if "parametrize" in ast.unparse(d)))
    return frozenset(names)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_function_has_a_bad_input_test(package):
    missing = sorted(exports(package) - _tested() - set(EXEMPT.get(package, {})))
    assert not missing, (f"companion.{package}: public names without a bad-input test (a ValueError naming the "
                         f"argument): {missing}")


def test_the_exempt_list_names_real_exports_with_reasons():
    for package, reasons in EXEMPT.items():
        assert package in PACKAGES
        assert set(reasons) <= exports(package) and all(reasons.values()), package
