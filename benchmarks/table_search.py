"""Table retrieval on WikiTableQuestions: top-1 / top-5 accuracy and search latency of
`TableStore.search`, and value-lookup latency on a synthetic 100k-row table.

    PYTHONPATH=src python benchmarks/table_search.py --n 300 --n 0 --out docs/benchmarks/table-search.json

reads ../shared/data/wikitablequestions (training.tsv, tables.tar.gz), loads the first N tables
(sorted by path; 0: all 1,679) that training questions refer to into a fresh TableStore through
`ingest.tables.read_csv`, asks every training question whose table is loaded, and reports the share
whose table is ranked first / in the top 5, with the p50 / p95 of one search.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from amsrag.ingest.tables import read_csv
from amsrag.store.embedded.tables import TableStore
from amsrag.tables.table import Table

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitablequestions"


def load_questions(data: Path) -> list[tuple[str, str]]:
    with (data / "training.tsv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [(r[1], r[2]) for r in rows[1:]]


def extract(data: Path, into: Path) -> Path:
    with tarfile.open(data / "tables.tar.gz") as tar:
        tar.extractall(into, filter="data")
    return into


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_search(tables_dir: Path, questions: list[tuple[str, str]], n: int, work: Path) -> dict[str, object]:
    paths = sorted({ctx for _, ctx in questions})
    if n:
        paths = paths[:n]
    loaded = set(paths)
    tables = [read_csv(tables_dir / p, table_id=p, wtq=True, title="") for p in paths]
    store = TableStore.open(work / f"tables-{n or 'all'}.sqlite", create=True)
    t0 = time.perf_counter()
    store.add(tables)
    add_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    store.search("warm up", 1)
    build_s = time.perf_counter() - t0
    asked = [(q, ctx) for q, ctx in questions if ctx in loaded]
    top1 = top5 = 0
    times = []
    for q, ctx in asked:
        t0 = time.perf_counter()
        hits = store.search(q, 5)
        times.append(time.perf_counter() - t0)
        ids = [h.table_id for h in hits]
        top1 += bool(ids) and ids[0] == ctx
        top5 += ctx in ids
    store.close()
    return {"tables": len(paths), "rows": sum(len(t.rows) for t in tables), "questions": len(asked),
            "top1": round(top1 / len(asked), 4), "top5": round(top5 / len(asked), 4),
            "search_p50_ms": round(1000 * statistics.median(times), 3),
            "search_p95_ms": round(1000 * pct(times, 0.95), 3),
            "add_s": round(add_s, 2), "index_build_s": round(build_s, 3)}


def run_lookup(work: Path, n_rows: int = 100_000, trials: int = 200) -> dict[str, object]:
    rng = random.Random(7)
    names = [f"player {i:06d}" for i in range(n_rows)]
    rows = tuple((names[i], rng.choice(["Norway", "France", "Peru", "Chile"]), str(rng.randint(1, 10**6)),
                  f"{rng.randint(1950, 2020)}-01-01") for i in range(n_rows))
    table = Table("synthetic/players.csv", ("Player", "Country", "Points", "Born"), rows, "players")
    store = TableStore.open(work / "lookup.sqlite", create=True)
    t0 = time.perf_counter()
    store.add([table])
    add_s = time.perf_counter() - t0
    name = store.profiles()[0].sql_name
    runner = store.runner()
    out: dict[str, object] = {"rows": n_rows, "add_s": round(add_s, 2)}
    forms = {
        "lower(c0) = lower(?) [indexed]": (f"SELECT row_id, c2 FROM {name} WHERE lower(c0) = lower(?)", 1),
        "lower(c0) IN (lower(?), ...) [indexed]": (
            f"SELECT row_id, c2 FROM {name} WHERE lower(c0) IN (lower(?), lower(?), lower(?))", 3),
        "c0 = ? COLLATE NOCASE [scan]": (f"SELECT row_id, c2 FROM {name} WHERE c0 = ? COLLATE NOCASE", 1),
        "c2_num > ? (count) [scan]": (f"SELECT COUNT(*) FROM {name} WHERE c2_num > ?", 0),
    }
    for label, (sql, k) in forms.items():
        times = []
        for _ in range(trials):
            if k == 0:
                params: list[object] = [rng.randint(1, 10**6)]
            else:
                params = [names[rng.randrange(n_rows)].upper() for _ in range(k)]
            t0 = time.perf_counter()
            got = runner.run(sql, params)
            times.append(time.perf_counter() - t0)
            assert got.rows, (label, params)
        out[label] = {"p50_ms": round(1000 * statistics.median(times), 3),
                      "p95_ms": round(1000 * pct(times, 0.95), 3)}
    runner.close()  # type: ignore[attr-defined]
    store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--n", type=int, action="append", help="tables to load (0: all); repeatable")
    ap.add_argument("--no-lookup", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    sizes = args.n or [300, 0]
    questions = load_questions(args.data)
    result: dict[str, object] = {"command": "PYTHONPATH=src python benchmarks/table_search.py "
                                 + " ".join(sys.argv[1:]), "search": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tables_dir = extract(args.data, work / "wtq")
        for n in sizes:
            r = run_search(tables_dir, questions, n, work)
            print(json.dumps(r), flush=True)
            result["search"].append(r)  # type: ignore[attr-defined]
        if not args.no_lookup:
            result["lookup"] = run_lookup(work)
            print(json.dumps(result["lookup"]), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
