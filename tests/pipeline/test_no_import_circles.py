"""No import circles in pipeline/: every import counts (at the top, inside a function, or under
TYPE_CHECKING), since each one is a dependency a reader has to hold in mind and a circle makes two
modules one. Found by reading the source (ast), not by importing it."""

from __future__ import annotations

import ast
from pathlib import Path

from pipeline.settings import REPO_ROOT


def import_graph(root: Path, package: str = "pipeline") -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports."""
    mods: dict[str, Path] = {}
    for p in (root / package).rglob("*.py"):
        parts = p.relative_to(root).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other (strongly connected, more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_pipeline_has_no_import_circle():
    assert circles(import_graph(REPO_ROOT)) == []


def test_a_circle_is_found_wherever_its_imports_sit(tmp_path: Path):
    pkg = tmp_path / "pipeline"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pipeline.sub.b import B\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from pipeline import a\n")
    (pkg / "c.py").write_text("import pipeline.a\n")
    assert circles(import_graph(tmp_path)) == [["pipeline.a", "pipeline.sub.b"]]
