"""Output parity of the store renovation (issue 41): `amsrag retrieve --json` and `amsrag ask --json` on demo
questions (multi-hop, one-hop, table and theme questions) over the demo index and its PostgreSQL copy, timings
dropped, one normalised JSON line per run. Run before and after a change and compare the files byte for byte.

    AMSRAG_HOME=.parity/home python benchmarks/store_parity.py --index .parity/home/demo-index --out before.jsonl
    ... --postgres  (also export the index to a throwaway PostgreSQL and run the same there)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from amsrag.cli.demo import demo_data_dir
from amsrag.cli.main import app

THEME_QUESTIONS = ("What are the main themes of this collection?", "Give an overview of the topics covered.")
SYSTEMS = ("full", "fixed", "bm25", "dense", "graph", "A4")
TIMING = {"ms", "timings_ms"}


def questions() -> list[str]:
    demo = demo_data_dir()
    text = [json.loads(line)["question"] for line in (demo / "questions.jsonl").read_text("utf-8").splitlines()
            if line.strip()]
    tables = [json.loads(line)["question"] for line in
              (demo / "table_questions.jsonl").read_text("utf-8").splitlines() if line.strip()]
    return text[:11] + tables[:3] + list(THEME_QUESTIONS)


def drop_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_timings(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [drop_timings(v) for v in value]
    return value


def run(index: str, out: Path) -> int:
    runner = CliRunner()
    lines: list[str] = []
    for q in questions():
        calls = [["retrieve", "--index", index, "--system", s, "--json", q] for s in SYSTEMS]
        calls.append(["ask", "--index", index, "--local", "--no-log", "--json", q])
        calls.append(["ask", "--index", index, "--local", "--no-log", "--system", "A4", "--json", q])
        for argv in calls:
            result = runner.invoke(app, argv, catch_exceptions=False)
            if result.exit_code != 0:
                raise SystemExit(f"{argv}: exit {result.exit_code}\n{result.output}")
            for line in result.stdout.splitlines():
                if line.strip():
                    record = drop_timings(json.loads(line))
                    lines.append(json.dumps({"argv": argv[:1] + argv[3:], "out": record}, ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n", "utf-8")
    return len(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--index", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--postgres", action="store_true", help="also run over a PostgreSQL copy (OUT.pg.jsonl)")
    args = ap.parse_args()
    print(f"{run(args.index, args.out)} outputs -> {args.out}")
    if args.postgres:
        from amsrag.store.embedded import EmbeddedIndex
        from amsrag.store.open import export_index
        from amsrag.store.postgres.server import LocalPostgres

        server = LocalPostgres()
        server.start()
        try:
            import psycopg

            with psycopg.connect(server.dsn, autocommit=True) as conn:
                conn.execute("CREATE DATABASE parity")
            url = server.dsn.rsplit("/", 1)[0] + "/parity"
            with EmbeddedIndex.open(args.index) as source:
                export_index(source, url)
            pg_out = args.out.with_suffix(".pg.jsonl")
            n = run(url, pg_out)
            text = pg_out.read_text("utf-8").replace(url, "PG")
            pg_out.write_text(text, "utf-8")
            print(f"{n} outputs -> {pg_out}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
