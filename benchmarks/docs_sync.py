"""Keeping a real documentation tree up to date with `amsrag index sync` (issue 18).

Copies the Markdown documentation Debian ships for Node.js (/usr/share/doc/nodejs/api) and pip
(/usr/share/doc/python3-pip/html) into a work folder, builds one index over both folders (their files
share names such as index.md: the folder names keep them apart), then edits, deletes, renames and adds
files and runs `amsrag index sync` after each change, recording what sync did, how long it took, what
`index check` says, and the answer `amsrag ask` gives to a question about the edited text before and
after. Results: docs/benchmarks/docs-sync.{md,json}.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/docs_sync.py
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks"
SOURCES = {"nodejs": Path("/usr/share/doc/nodejs/api"), "pip": Path("/usr/share/doc/python3-pip/html")}
QUESTION = "What is the default value of the highWaterMark option of a readable stream?"
MARKER = "The default highWaterMark of a readable stream in this copy of the docs is 77 kibibytes."


def amsrag(*args: str, timeout: float = 7200) -> dict[str, Any]:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "amsrag.cli", *args], capture_output=True, text=True,
                          timeout=timeout)
    seconds = round(time.perf_counter() - t, 1)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"amsrag {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.strip().startswith("{")]
    out = json.loads(lines[-1]) if lines else {}
    return {"seconds": seconds, "rc": proc.returncode, **out}


def step(name: str, index: Path, folders: list[Path], results: list[dict[str, Any]]) -> None:
    r = amsrag("index", "sync", *map(str, folders), "--index", str(index), "--json", "-q")
    check = amsrag("index", "check", "--index", str(index), "--json")
    keep = ("seconds", "batches", "documents_created", "documents_replaced", "documents_deleted",
            "documents_unchanged", "added", "removed", "kept", "embedded", "passages")
    row = {"step": name, **{k: r.get(k) for k in keep}, "check_ok": check.get("ok")}
    results.append(row)
    print(row, flush=True)


def ask(index: Path) -> dict[str, Any]:
    r = amsrag("ask", QUESTION, "--index", str(index), "--json")
    return {"answer": r.get("answer"), "citations": list(r.get("citations", []))[:3]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=ROOT / "bench-cache" / "docs-sync")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the index a previous run built: restore the original files and sync back first")
    args = ap.parse_args()
    missing = [str(p) for p in SOURCES.values() if not p.is_dir()]
    if missing:
        raise SystemExit(f"not on this machine: {', '.join(missing)} (Debian's nodejs-doc and python3-pip)")
    index = args.work / "index"
    reuse = args.reuse and (args.work / "build.json").is_file()
    if not reuse:
        shutil.rmtree(args.work, ignore_errors=True)
    folders = []
    for name, src in SOURCES.items():
        shutil.rmtree(args.work / name, ignore_errors=True)
        shutil.copytree(src, args.work / name)
        folders.append(args.work / name)
    steps: list[dict[str, Any]] = []
    if not reuse:
        built = amsrag("index", "build", *map(str, folders), "--index", str(index), "--json", "-q")
        (args.work / "build.json").write_text(json.dumps(built), encoding="utf-8")
    else:
        step("restore the original files (a previous run edited them)", index, folders, steps)
    built = json.loads((args.work / "build.json").read_text(encoding="utf-8"))
    result: dict[str, Any] = {"command": "OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python benchmarks/docs_sync.py",
                              "build": {k: built.get(k) for k in ("seconds", "files", "received", "added",
                                                                  "embedded", "batches", "passages")}}
    print("build", result["build"], flush=True)
    step("sync, nothing changed", index, folders, steps)
    result["before_edit"] = ask(index)

    stream = args.work / "nodejs" / "stream.md"
    text = stream.read_text(encoding="utf-8")
    head, sep, rest = text.partition("\n## ")
    stream.write_text(head + "\n\n" + MARKER + "\n" + sep + rest, encoding="utf-8")
    step("edit one paragraph of nodejs/stream.md", index, folders, steps)
    result["after_edit"] = ask(index)

    (args.work / "nodejs" / "punycode.md").unlink()
    step("delete nodejs/punycode.md", index, folders, steps)
    (args.work / "pip" / "getting-started.md").rename(args.work / "pip" / "first-steps.md")
    step("rename pip/getting-started.md", index, folders, steps)
    (args.work / "pip" / "notes.md").write_text("# Team notes\n\nWe pin pip with a constraints file.\n",
                                                encoding="utf-8")
    step("add pip/notes.md", index, folders, steps)
    result["steps"] = steps
    DOCS.mkdir(parents=True, exist_ok=True)
    (DOCS / "docs-sync.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (DOCS / "docs-sync.md").write_text(render(result), encoding="utf-8")


def render(r: dict[str, Any]) -> str:
    b = r["build"]
    lines = ["# Keeping a documentation tree up to date: `amsrag index sync`", "",
             f"Command: `{r['command']}` (results: `docs-sync.json`). The Markdown documentation Debian ships "
             "for Node.js and pip, copied to a work folder: "
             f"{b['files']} files, {b['passages']:,} passages, built in {b['seconds']['total']:.0f} s "
             f"({b['batches']} committed batches) on two shared cores. Both folders hold an `index.md`; "
             "their documents are `nodejs/...` and `pip/...`.", "",
             "| change, then `index sync` | s | batches | docs new / changed / deleted / unchanged | "
             "passages added / removed / kept | embedded | index | check |",
             "|---|---:|---:|---|---|---:|---:|---|"]
    for s in r["steps"]:
        lines.append(f"| {s['step']} | {s['seconds'].get('total', 0):.1f} | {s['batches']} | "
                     f"{s['documents_created']} / "
                     f"{s['documents_replaced']} / {s['documents_deleted']} / {s['documents_unchanged']} | "
                     f"{s['added']} / {s['removed']} / {s['kept']} | {s['embedded']} | {s['passages']:,} | "
                     f"{'ok' if s['check_ok'] else 'FAILED'} |")
    lines += ["", f"Question: *{QUESTION}* The edit wrote into `nodejs/stream.md`: *{MARKER}*", "",
              f"- before the edit: {r['before_edit']['answer']!r}, citing {r['before_edit']['citations']}",
              f"- after the sync: {r['after_edit']['answer']!r}, citing {r['after_edit']['citations']}", "",
              "Each sync re-reads only files whose sha256 changed, keeps their unchanged passages and embeds "
              "only new content; a renamed file's passages keep their vectors (deletions commit with the first "
              "batch of changes).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
