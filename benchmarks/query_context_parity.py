"""`retrieve --json`, `ask --json` and the service's `/v1/retrieve` and `/v1/ask` on the demo index, recorded in one
process and compared as JSON text with the timings dropped and the keys in their order: the proof that the typed
query context and the typed trace parts (issue 41) changed no output.

    PYTHONPATH=src python benchmarks/query_context_parity.py --index $AMSRAG_HOME/demo-index --out before.jsonl
    PYTHONPATH=src python benchmarks/query_context_parity.py --index $AMSRAG_HOME/demo-index --out after.jsonl \
        --against before.jsonl

The questions: every demo question (one-hop, multi-hop bridge and comparison), the demo's table questions (the
table route), two corpus-wide ones (the themes) and a two-part one (answered part by part); `retrieve` on every
system for a few of them; the service for a few of each kind. Unlike `cli_parity.py` the keys are not sorted:
the order of the JSON keys is part of what must not change.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "src" / "amsrag" / "data" / "demo"
EXTRA = ["What topics do these documents cover?", "Summarize the main themes of the corpus.",
         "Who is the creator of American Idol, and what is the name of manchester united stadium?"]
SYSTEMS = ["fixed", "A0", "A1", "A2", "A3", "A4", "bm25", "dense", "graph", "adaptive-rag", "full-plain", "full-3",
           "fixed-learned", "learned", "experts"]


def questions() -> list[str]:
    found: list[str] = []
    for name in ("questions.jsonl", "table_questions.jsonl"):
        found += [json.loads(line)["question"] for line in (DEMO / name).read_text("utf-8").splitlines() if line]
    return found + EXTRA


def untimed(value: Any) -> Any:
    """`value` without its timings (keys `ms`, `*_ms`): the only fields allowed to differ."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k != "ms" and not k.endswith("_ms")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def cli_outputs(index: str) -> Iterator[tuple[str, str]]:
    from amsrag.cli.main import app

    runner = CliRunner()
    qs = questions()
    sampled = qs[:2] + qs[12:14] + qs[28:30]  # multi-hop, one-hop, table
    jobs = [["retrieve", q, "--json"] for q in qs] + [["ask", q, "--json", "--no-log", "--local"] for q in qs]
    jobs += [["retrieve", q, "--json", "--system", s] for s in SYSTEMS for q in sampled]
    jobs += [["ask", q, "--json", "--no-log", "--local", "--system", s] for s in ("fixed", "adaptive-rag", "A4")
             for q in sampled[:4]]
    jobs += [["retrieve", qs[0], "--json", "-k", "3"], ["retrieve", qs[12], "--json", "--explain", "0"]]
    for job in jobs:
        res = runner.invoke(app, [*job[:2], "--index", index, *job[2:]])
        out = res.stdout.strip() if res.exit_code == 0 else f"exit {res.exit_code}: {res.output.strip()[-300:]}"
        yield " ".join(job), out


def service_outputs(index: str) -> Iterator[tuple[str, str]]:
    from starlette.testclient import TestClient

    from amsrag.config import ServeConfig
    from amsrag.pipeline import Engine
    from amsrag.serve import Service, create_app

    qs = questions()
    with tempfile.TemporaryDirectory() as tmp:  # the service logs its answers: a copy keeps the index as it was
        copy = Path(tmp) / "index"
        shutil.copytree(index, copy)
        service = Service(Engine.open(copy), ServeConfig())
        try:
            client = TestClient(create_app(service, warm=False), base_url="http://localhost")
            for q in qs[:3] + qs[12:15] + qs[28:31] + qs[-1:]:
                for path, body in (("/v1/retrieve", {"query": q}), ("/v1/ask", {"question": q, "explain": True})):
                    r = client.post(path, json=body)
                    yield f"{path} {q}", f"{r.status_code} {r.text}"
        finally:
            service.close()


def normalised(text: str) -> str:
    """The output with its timings dropped, keys in their order (a non-JSON output as is)."""
    head, _, rest = text.partition(" ")
    for candidate, prefix in ((text, ""), (rest, head + " ")):
        try:
            return prefix + json.dumps(untimed(json.loads(candidate)), ensure_ascii=False)
        except ValueError:
            continue
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--against", type=Path, help="an earlier --out to compare with")
    args = ap.parse_args()
    rows: dict[str, str] = {}
    with args.out.open("w", encoding="utf-8") as f:
        for outputs in (cli_outputs(args.index), service_outputs(args.index)):
            for key, text in outputs:
                rows[key] = normalised(text)
                f.write(json.dumps({"key": key, "output": rows[key]}, ensure_ascii=False) + "\n")
                print(key[:90], file=sys.stderr, flush=True)
    if args.against:
        before = {r["key"]: r["output"] for r in map(json.loads, args.against.read_text("utf-8").splitlines())}
        differ = [key for key in rows if before.get(key) != rows[key]]
        missing = [key for key in before if key not in rows]
        print(f"{len(rows)} outputs, {len(differ)} differ from {args.against}, {len(missing)} missing")
        for key in differ + missing:
            print(f"  differs: {key}")
        sys.exit(1 if differ or missing else 0)


if __name__ == "__main__":
    main()
