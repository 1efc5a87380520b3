"""The store's shape for the renovation-2 parity page (issue 41): `PassageIndex`'s members, the store's largest
files, and what the store imports from `retrieve`, `structured`, `themes` and `ingest` (statements and names,
type-only and function-level imports included).

    python benchmarks/store_metrics.py [ROOT]   (ROOT: a checkout, default the current directory)
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

UPPER = re.compile(r"amsrag\.(retrieve|structured|themes|ingest)\b")


def main(root: Path) -> None:
    base = ast.parse((root / "src/amsrag/store/base.py").read_text("utf-8"))
    for node in base.body:
        if isinstance(node, ast.ClassDef) and node.name == "PassageIndex":
            members = {m.name for m in node.body if isinstance(m, ast.FunctionDef)} | {
                m.target.id for m in node.body if isinstance(m, ast.AnnAssign) and isinstance(m.target, ast.Name)}
            print(f"PassageIndex members: {len(members)}: {', '.join(sorted(members))}")
    files = sorted((root / "src/amsrag/store").rglob("*.py"))
    sizes = sorted(((len(f.read_text("utf-8").splitlines()), f.relative_to(root)) for f in files), reverse=True)
    print("largest store files:", ", ".join(f"{p} {n}" for n, p in sizes[:4]))
    statements: dict[str, int] = {}
    names: dict[str, set[str]] = {}
    for f in files:
        for node in ast.walk(ast.parse(f.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                    m := UPPER.match(node.module)):
                statements[m.group(1)] = statements.get(m.group(1), 0) + 1
                names.setdefault(m.group(1), set()).update(f"{node.module}.{a.name}" for a in node.names)
    print("import statements:", statements, "total", sum(statements.values()))
    print("distinct names:", {k: len(v) for k, v in names.items()})


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd())
