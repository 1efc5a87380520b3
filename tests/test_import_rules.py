"""The house rules of docs/architecture.md, kept by reading every module's imports (issue 41):

- the packages of `amsrag` import each other without a circle, so they stack into floors and every import
  points down (function-level imports count: a lazy import is still a dependency);
- no module imports another package's private names (`_name`, or a `_module`);
- the training wing (`learn/`) and the command line (`cli/`) are imported by nothing else in the package:
  running a query never loads fitting code;
- the packages stand in at most nine floors, the front doors (`serve/`, `mcp/`) side by side on `access/`.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "amsrag"
ONLY_FROM_CLI = {"cli", "learn"}


def _owner(path: Path) -> str:
    """The top-level package (or root module) a file belongs to."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every `amsrag` import in the file, wherever it stands."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == "amsrag" or node.module.startswith("amsrag.")):
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.startswith("amsrag.")]
    return found


@cache
def _graph() -> tuple[dict[str, set[str]], list[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    private: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        owner = _owner(path)
        for module, names in _imports(path):
            parts = module.split(".")
            target = parts[1] if len(parts) > 1 else "__init__"
            if target == owner:
                continue
            edges[owner].add(target)
            if any(p.startswith("_") and not p.startswith("__") for p in parts[1:]) or any(
                    n.startswith("_") and not n.startswith("__") for n in names):
                private.append(f"{path.relative_to(PACKAGE)}: from {module} import {', '.join(names)}")
    return edges, private


def _cycle(edges: dict[str, set[str]]) -> list[str]:
    """A circle of packages, or [] (depth-first search with colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_the_packages_import_each_other_without_a_circle() -> None:
    edges, _ = _graph()
    assert len(edges) > 20  # the walk really read the package
    assert not _cycle(edges), " -> ".join(_cycle(edges))


def test_no_module_imports_another_packages_private_names() -> None:
    _, private = _graph()
    assert not private, "\n".join(private)


def test_only_the_command_line_imports_the_training_wing_and_itself() -> None:
    edges, _ = _graph()
    bad = sorted(f"{src} -> {dst}" for src, targets in edges.items() for dst in targets & ONLY_FROM_CLI
                 if src != "cli")
    assert not bad, bad


def test_the_rules_see_a_circle_and_a_private_import(tmp_path: Path) -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) == []
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from amsrag.store._x import y\n    from amsrag.text import _z\n", "utf-8")
    assert _imports(module) == [("amsrag.store._x", ["y"]), ("amsrag.text", ["_z"])]


ARCHITECTURE = PACKAGE.parents[1] / "docs" / "architecture.md"
TIER_ORDER = {"ground": 0, "1": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "wing": 7, "top": 8}


def _tiers() -> dict[str, int]:
    """Each package's (or root module's) tier, read from the layer table of docs/architecture.md."""
    tiers: dict[str, int] = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        row = re.match(r"\|\s*(ground|wing|top|\d)\s*\|([^|]*)\|", line)
        if row is not None:
            for name in re.findall(r"`([\w/.]+?)`", row.group(2)):
                tiers[name.removesuffix("/").removesuffix(".py")] = TIER_ORDER[row.group(1)]
    return tiers


def test_every_package_stands_in_the_layer_table() -> None:
    owners = {_owner(path) for path in PACKAGE.rglob("*.py")}
    missing = sorted(owners - set(_tiers()))
    assert not missing, f"not in the layer table of docs/architecture.md: {missing}"


def _upward(edges: dict[str, set[str]], tiers: dict[str, int]) -> list[str]:
    return sorted(f"{src} (tier {tiers[src]}) -> {dst} (tier {tiers[dst]})" for src, targets in edges.items()
                  for dst in targets if src in tiers and dst in tiers and tiers[dst] > tiers[src])


def test_no_import_crosses_a_tier_upward() -> None:
    """A package imports only packages of its own tier or below (the table of docs/architecture.md)."""
    edges, _ = _graph()
    up = _upward(edges, _tiers())
    assert not up, up


def test_the_tier_rule_sees_an_upward_import() -> None:
    tiers = _tiers()
    assert tiers["pipeline"] > tiers["store"] > tiers["text"] and tiers["cli"] == TIER_ORDER["top"]
    assert _upward({"store": {"pipeline", "text"}}, tiers) == [
        f"store (tier {tiers['store']}) -> pipeline (tier {tiers['pipeline']})"]


# Packages that search over the store (or build a route on it), which the store and what it persists do not import
# (issue 41): the store keeps data structures (`indexes/`, `tables/`) and builds no retriever. `indexes/` and
# `tables/` stand side by side on `config/` (what searches tables with BM25 is the store's `table_search.py`), so
# neither adds a floor under the store.
KEEPS_CLEAR_OF = {
    "store": {"retrieve", "retrievers", "structured", "themes", "ingest"},
    "indexes": {"retrieve", "retrievers", "structured", "themes", "store", "tables"},
    "tables": {"retrieve", "retrievers", "structured", "themes", "store", "indexes"},
}


def _crossings(edges: dict[str, set[str]], rules: dict[str, set[str]]) -> list[str]:
    return sorted(f"{src} -> {dst}" for src, banned in rules.items() for dst in edges.get(src, set()) & banned)


def test_the_store_and_what_it_persists_import_no_searching() -> None:
    edges, _ = _graph()
    assert {"store", "indexes", "tables"} <= set(edges)
    crossed = _crossings(edges, KEEPS_CLEAR_OF)
    assert not crossed, crossed


def test_the_clearance_rule_sees_a_crossing() -> None:
    assert _crossings({"store": {"retrieve", "indexes"}, "tables": {"indexes", "config"}}, KEEPS_CLEAR_OF) == [
        "store -> retrieve", "tables -> indexes"]


# The package graph stands in at most nine floors (issue 41): a package's floor is one above the highest it
# imports, the ground floor 0. What keeps it there: the front doors stand side by side on `access/` and `api/`
# (the MCP server imports neither the HTTP service nor the framework adapters), the monitor draws through
# `plotting.py` (not `evaluate/`), and `tables/` stands beside `indexes/` (above).
MAX_FLOOR = 8
STAND_APART = {
    "mcp": {"serve", "integrations"},
    "serve": {"mcp"},
    "monitor": {"evaluate"},
    "access": {"serve", "mcp", "cli", "monitor", "evaluate", "learn", "api", "integrations"},
}


def _floors(edges: dict[str, set[str]]) -> dict[str, int]:
    """Each package's floor over an acyclic graph (the circle test above guards that)."""
    floors: dict[str, int] = {}

    def floor(node: str) -> int:
        if node not in floors:
            floors[node] = 1 + max((floor(nxt) for nxt in edges.get(node, ())), default=-1)
        return floors[node]

    for node in sorted(edges):
        floor(node)
    return floors


def test_the_package_graph_stands_in_nine_floors() -> None:
    edges, _ = _graph()
    floors = _floors(edges)
    assert floors["cli"] <= MAX_FLOOR, sorted(floors.items(), key=lambda kv: -kv[1])[:6]
    crossed = _crossings(edges, STAND_APART)
    assert not crossed, crossed


def test_the_floor_rules_see_a_tenth_floor_and_a_crossing() -> None:
    chain = {f"p{i}": {f"p{i + 1}"} for i in range(9)}
    assert _floors(chain)["p0"] == 9 and _floors({"a": {"b", "c"}, "b": {"c"}})["a"] == 2
    assert _crossings({"mcp": {"serve", "api", "access"}, "monitor": {"pipeline"}}, STAND_APART) == ["mcp -> serve"]
