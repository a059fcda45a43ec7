"""The error family: every exception the pipeline defines is an OperatorError in
pipeline/errors.py, and the tree in that module's docstring names each one."""

from __future__ import annotations

import ast
import inspect

from pipeline import errors
from tests.paths import REPO_ROOT


def _exception_classes_outside_errors() -> list[str]:
    found = []
    for path in sorted((REPO_ROOT / "pipeline").rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "pipeline":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {ast.unparse(b) for b in node.bases}
                if any(b.endswith(("Exception", "Error")) for b in bases):
                    found.append(f"{path.relative_to(REPO_ROOT)}: {node.name}")
    return found


def test_every_pipeline_exception_lives_in_errors() -> None:
    assert _exception_classes_outside_errors() == []


def test_the_docstring_tree_names_every_error() -> None:
    # OperatorError itself lives in edge/errors.py (the dashboard's bundle imports it without pipeline/)
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if c.__module__ in (errors.__name__, "edge.errors")]
    assert {c.__name__ for c in classes} >= {"OperatorError", "InputError", "PublishError"}
    for cls in classes:
        assert issubclass(cls, errors.OperatorError)
        assert cls.__name__ in (errors.__doc__ or ""), cls.__name__
        parent = cls.__mro__[1]
        if cls is not errors.OperatorError:  # drawn under its parent in the tree
            doc = errors.__doc__ or ""
            assert doc.index(parent.__name__) < doc.index(cls.__name__), cls.__name__


def test_problems_travel_with_the_error() -> None:
    err = errors.PointerConflict("lost the race", ["a", "b"])
    assert isinstance(err, errors.PublishError) and str(err) == "lost the race" and err.problems == ["a", "b"]
    assert errors.InputError("x.csv", "bad value", row=3).problems == []
    assert str(errors.InputError("x.csv", "bad value", row=3)) == "x.csv, row 3: bad value"
