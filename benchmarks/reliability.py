"""The fault campaign of tests/test_faults.py, run once and written up: docs/benchmarks/reliability.md (+ .json).

    OMP_NUM_THREADS=1 python benchmarks/reliability.py [--out docs/benchmarks] [--kill-points 20]
        [--seconds 60] [--soak-seconds 60] [--clients 32] [--only kill,disk,crash,concurrency,soak]

Same machinery (tests/faults.py), same seeds and sizes (the constants of tests/test_faults.py), so a
failing test id and a line of the report name the same fault. What it records per case: the fault
injected, where it landed, the state on disk afterwards, whether reopening/rerunning gave exactly the
committed state, and anything left behind; and for the soak, requests, status codes, latency.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import faults as F  # noqa: E402
import test_faults as T  # noqa: E402


def _kill(base: Path, work: Path, points: int, records: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    commands = ["add", "delete"] + (["sync"] if "sync" in F.index_commands() else [])
    for command in commands:
        if command == "sync":
            base = F.build_sync_base(work / "sync-base", work, records)
        window = F.calibrate(command, base, work)
        n = points if command != "delete" else min(points, T.DELETE_KILL_POINTS)
        seed0 = {"add": T.KILL_SEED, "delete": T.KILL_SEED + 100}.get(command, T.KILL_SEED + 200)
        cases = []
        for seed in range(seed0, seed0 + n):
            case = F.kill_once(command, seed, base, work, window)
            print(f"kill {command} seed {seed}: {case.outcome} at {case.delay_s:.2f} s, {case.before} -> "
                  f"{case.after_kill} -> {case.after_rerun} {case.problems or ''}", flush=True)
            cases.append(F.as_dict(case))
        out[command] = {"window_s": round(window, 3), "cases": cases,
                        "base_passages": cases[0]["before"] if cases else 0}
    return out


def _disk(base: Path, work: Path, records: list[dict[str, Any]]) -> dict[str, Any]:
    batch = records[T.BASE_PASSAGES:T.BASE_PASSAGES + T.CRASH_BATCH]
    total, _ = F.bytes_written_by_add(base, work, batch)
    cases = [F.disk_full_injected(base, work, int(total * f), f"injected-{f:g}", batch) for f in T.ENOSPC_FRACTIONS]
    tmpfs = F.can_mount_tmpfs()
    if tmpfs:
        cases += [F.disk_full_tmpfs(base, work, kb, batch) for kb in T.TMPFS_FREE_KB]
    for c in cases:
        print(f"disk full {c.label}: rc {c.returncode} at {c.failed_at or '-'}; intact {c.intact}; "
              f"traceback {c.traceback_shown}; leftovers {c.leftovers}", flush=True)
    return {"bytes_written_by_the_add": total, "tmpfs": tmpfs, "cases": [F.as_dict(c) for c in cases]}


def _crash(base: Path, work: Path, records: list[dict[str, Any]], vectors: Any) -> dict[str, Any]:
    import numpy as np

    b, n = T.BASE_PASSAGES, T.CRASH_BATCH
    before = {r["id"] for r in records[:b]}
    add_file = F.write_jsonl(work / "crash-add.jsonl", records[b:b + n])
    np.save(work / "crash-add.npy", vectors[b:b + n])
    del_file = F.write_jsonl(work / "crash-delete.jsonl", records[:n])
    out = {"add": F.crash_campaign("add", base, work, add_file, work / "crash-add.npy", before,
                                   before | {r["id"] for r in records[b:b + n]}),
           "delete": F.crash_campaign("delete", base, work, del_file, None, before,
                                      before - {r["id"] for r in records[:n]}, first="sqlite COMMIT")}
    for op, cases in out.items():
        for c in cases:
            print(f"crash {op} before #{c.n} {c.event}: {c.state_on_disk}, {c.count_after}/{c.expected} "
                  f"{c.problems or ''} left {c.leftovers_after_next_write}", flush=True)
    return {op: [F.as_dict(c) for c in cases] for op, cases in out.items()}


def _concurrency(work: Path, records: list[dict[str, Any]], vectors: Any, seconds: float) -> dict[str, Any]:
    rest = list(range(10, len(records)))
    parts = [rest[w::T.WRITERS] for w in range(T.WRITERS)]
    r = F.concurrency_run(records[:10], vectors[:10], [[records[i] for i in p] for p in parts],
                          [vectors[p] for p in parts], work, seconds, readers=T.READERS)
    print(f"concurrency: {r.commits} commits, {r.searches} searches, {len(r.errors)} errors, lost {r.lost}",
          flush=True)
    return F.as_dict(r)


def _soak(work: Path, records: list[dict[str, Any]], vectors: Any, seconds: float, clients: int) -> dict[str, Any]:
    index = F.build_index(work / "soak" / "index", records, vectors)
    r = F.soak_run(index, seconds, clients)
    F.check_index(index, {x["id"] for x in records})
    print(f"soak: {r.requests} requests, 5xx {r.status_5xx}, 429 {r.status_429}, p50/p95/p99 "
          f"{r.p50_ms}/{r.p95_ms}/{r.p99_ms} ms", flush=True)
    return F.as_dict(r)


# ---------------------------------------------------------------------------- the report
def summarise(res: dict[str, Any]) -> dict[str, Any]:
    """Cases, faults that landed, and what went wrong by kind. *Data lost*: a committed passage missing
    or an uncommitted one present after recovery, or a rerun not ending exactly right."""
    cases = faults = lost = unopenable = unclear = left = 0
    problems: list[str] = []
    for command, k in res.get("kill", {}).items():
        for c in k["cases"]:
            cases += 1
            faults += not c["finished"]
            lost += any("not a committed state" in p or "after the rerun:" in p for p in c["problems"])
            unopenable += any("does not open" in p for p in c["problems"])
            problems += [f"kill {command} seed {c['seed']}: {p}" for p in c["problems"]]
    for c in res.get("disk", {}).get("cases", []):
        cases += 1
        faults += c["returncode"] != 0
        lost += any("neither before nor after" in p for p in c["problems"]) or not c["later_add_ok"]
        unopenable += not c["intact"]
        unclear += c["traceback_shown"] or not c["names_the_problem"] or c["returncode"] != 2
        left += bool(c["leftovers"])
        problems += [f"disk full {c['label']}: {p}" for p in c["problems"]]
        if c["traceback_shown"] or not c["names_the_problem"]:
            problems.append(f"disk full {c['label']}: unclear CLI error (exit {c['returncode']}, traceback "
                            f"{c['traceback_shown']}): {c['message'].splitlines()[-1] if c['message'] else ''}")
        if c["leftovers"]:
            problems.append(f"disk full {c['label']}: left behind after the failed add: {', '.join(c['leftovers'])}")
    for op, cs in res.get("crash", {}).items():
        for c in cs:
            cases += 1
            faults += not any("did not land" in p for p in c["problems"])
            lost += any(p.startswith(("on disk after the crash", "after rerunning", "after one more"))
                        for p in c["problems"])
            unopenable += any(p.startswith("reopening after the crash") for p in c["problems"])
            left += bool(c["leftovers_after_next_write"])
            problems += [f"crash {op} before #{c['n']} ({c['event']}): {p}" for p in c["problems"]]
            if c["leftovers_after_next_write"]:
                problems.append(f"crash {op} before #{c['n']} ({c['event']}): still there after the next write: "
                                f"{', '.join(c['leftovers_after_next_write'])}")
    if "concurrency" in res:
        cases += 1
        c = res["concurrency"]
        lost += c["lost"] + c["extra"]
        problems += [f"concurrency: {e.splitlines()[0]}" for e in c["errors"]]
    if "soak" in res:
        cases += 1
        k = res["soak"]
        lost += k["passages_after"] != k["passages_before"]
        problems += [f"soak: {u}" for u in k["unexpected"]]
    return {"cases": cases, "faults_injected": faults, "data_lost": lost, "failed_to_open": unopenable,
            "unclear_errors": unclear, "cases_leaving_files_behind": left, "problems": problems}


def _error_kind(error: str) -> str:
    first = re.sub(r"^reader\d+", "reader", error.splitlines()[0])
    first = re.sub(r"\.g\d{6}", ".gNNNNNN", first)
    return re.sub(r"/\S*/(concurrent|index)(/|:)", r"DIR\2", first)[:300]


def _md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *["| " + " | ".join(str(x) for x in r) + " |" for r in rows], ""]


def markdown(res: dict[str, Any]) -> str:
    s = res["summary"]
    lines = ["# Reliability: the fault campaign", "",
             "Command (the same campaign as `pytest tests/test_faults.py`, marked slow, run in CI):", "",
             "```", res["command"], "```", "",
             f"Run {res['started']} – {res['finished']} ({res['seconds']:.0f} s) on {res['machine']}; "
             f"index commands available: {', '.join(sorted(res['index_commands']))}.", "",
             "| cases tried | faults injected | data lost | index failed to open | unclear CLI errors | "
             "cases leaving files behind |", "|---:|---:|---:|---:|---:|---:|",
             f"| {s['cases']} | {s['faults_injected']} | **{s['data_lost']}** | {s['failed_to_open']} | "
             f"{s['unclear_errors']} | {s['cases_leaving_files_behind']} |", "",
             "*Data lost* counts cases where a committed passage was missing after recovery, an uncommitted one "
             "appeared, or the rerun did not end with exactly the expected passages. *Faults injected*: kills that "
             "landed before the command ended, ENOSPC errors raised, crashes that landed on their step. The "
             "concurrency case counts as one case (its reader errors are listed under Problems).", ""]
    if "kill" in res:
        lines += ["## 1. kill -9 at random points", "",
                  "Each case copies the command's starting index (add, delete: the slice's first 30 passages; "
                  "sync: 12 Markdown files of one slice passage each, synced with `[ingest] batch_passages = 2`; "
                  "the new folder version deletes 2 files, changes 3, adds 3), runs the command (add: 10 passages "
                  "the seed picks; delete: 10 ids the seed picks), and sends SIGKILL after the seed's "
                  "fraction (U(0, 1.1), `random.Random(seed)`) of the measured uninterrupted run time; then the "
                  "on-disk state must be a committed one — before or after, and for sync each document either its "
                  "old passages or its new ones (checked from SQLite and the manifest before "
                  "anything opens the index), the index must open and pass the consistency check (`len` = SQLite "
                  "rows = BM25/dense rows, manifest generation = SQLite generation, every retriever answers"
                  + (", `amsrag index check` exits 0" if "check" in res["index_commands"] else "")
                  + "), and rerunning the command must end with exactly the final state.", ""]
        for command, k in res["kill"].items():
            outcomes = Counter(c["outcome"] for c in k["cases"])
            seeds = [c["seed"] for c in k["cases"]]
            lines += [f"**`amsrag index {command}`** (run time {k['window_s']:.2f} s; seeds {seeds[0]}–{seeds[-1]}):"
                      f" " + "; ".join(f"{v} {o}" for o, v in outcomes.most_common()) + ".", ""]
            lines += _md_table(["seed", "kill at", "outcome", "passages before → after kill → after rerun",
                                "left behind after the rerun", "problems"],
                               [[c["seed"], f"{c['delay_s']:.2f} s", c["outcome"],
                                 f"{c['before']} → {c['after_kill']} → {c['after_rerun']} (expected {c['target']})",
                                 ", ".join(c["leftovers_after_rerun"]) or "–", "; ".join(c["problems"]) or "–"]
                                for c in k["cases"]])
    if "disk" in res:
        d = res["disk"]
        lines += ["## 2. Disk full", "",
                  f"`amsrag index add` of {T.CRASH_BATCH} passages. *injected-f*: every write under the index "
                  f"through a Python file object fails with ENOSPC once f × {d['bytes_written_by_the_add']} bytes "
                  "(what the uninterrupted add writes) are written. "
                  + ("*tmpfs-N k*: the index on a real tmpfs with N kB free (SQLite's own writes fail too)."
                     if d["tmpfs"] else "A real tmpfs was not available (mounting needs root); injected only."), ""]
        lines += _md_table(["case", "failed writing", "exit", "traceback", "message names it", "state after",
                            "left behind", "add once there is room"],
                           [[c["label"], c["failed_at"] or "(SQLite)", c["returncode"],
                             "yes" if c["traceback_shown"] else "no", "yes" if c["names_the_problem"] else "no",
                             ("committed (repaired at open)" if c["committed"] else "before") + (
                                 ", opens and answers" if c["intact"] else ", BROKEN"),
                             ", ".join(c["leftovers"]) or "–", "ok" if c["later_add_ok"] else "FAILED"]
                            for c in d["cases"]])
        lines += ["Last lines of the CLI's stderr, per case:", ""]
        lines += [f"- {c['label']}: `{c['message'].splitlines()[-1] if c['message'] else ''}`" for c in d["cases"]]
        lines += [""]
    if "crash" in res:
        lines += ["## 3. Power cut between every pair of steps of a write", "",
                  "A child process adds (or deletes) 4 passages through the index API with stored vectors and "
                  "calls `os._exit` (no cleanup, as a power cut or kill -9 would) just before step *n*; the steps "
                  "are the OS calls under the index directory and the SQLite COMMIT, traced from an uninterrupted "
                  "run. Then: the state on disk, reopening (which repairs a commit the manifest does not know "
                  "yet), the same write again, one more write, and what is still left behind.", ""]
        for op, cs in res["crash"].items():
            lines += [f"**{op}** ({len(cs)} crash points):", ""]
            lines += _md_table(["#", "crash before", "on disk", "passages after reopen", "left after the next write",
                                "problems"],
                               [[c["n"], f"`{c['event']}`", c["state_on_disk"], f"{c['count_after']} / {c['expected']}",
                                 ", ".join(c["leftovers_after_next_write"]) or "–", "; ".join(c["problems"]) or "–"]
                                for c in cs])
    if "concurrency" in res:
        c = res["concurrency"]
        lines += ["## 4. Concurrent writers and readers", "",
                  f"{c['writers']} writer processes add and delete disjoint passage sets (1–4 passages per "
                  f"transaction, stored vectors) while {c['readers']} reader processes search all three retrievers "
                  "(half reopen the index per query like `amsrag search`, half refresh one handle like the "
                  f"service), {c['seconds']:.0f} s, every process bounded by a timeout.", ""]
        lines += _md_table(["commits (add / delete)", "searches", "reader p50 / p99", "errors",
                            "expected passages", "stored", "lost", "extra"],
                           [[f"{c['commits']} ({c['adds']} / {c['deletes']})", c["searches"],
                             f"{c['reader_ms_p50']} / {c['reader_ms_p99']} ms", len(c["errors"]), c["expected"],
                             c["stored"], c["lost"], c["extra"]]])
        if c["errors"]:
            kinds = Counter(_error_kind(e) for e in c["errors"])
            lines += ["Errors by kind (generation numbers masked):", "",
                      *[f"- {n} × `{kind}`" for kind, n in kinds.most_common()], "", "The first in full:", "",
                      "```", c["errors"][0][:2500], "```", ""]
    if "soak" in res:
        k = res["soak"]
        lines += ["## 5. Service soak", "",
                  f"`amsrag serve` (default limits: request timeout {k['request_timeout_s']:g} s) on a loopback "
                  f"port, {k['clients']} closed-loop httpx clients for {k['seconds']:.0f} s: 50 % `POST "
                  "/v1/retrieve`, 20 % `POST /v1/ask`, 30 % a document's life (POST /v1/documents, GET it, DELETE "
                  "it, GET → 404).", ""]
        lines += _md_table(["requests", "5xx", "429", "other unexpected", "p50", "p95", "p99", "max",
                            "passages before / after"],
                           [[k["requests"], f"**{k['status_5xx']}**", k["status_429"], len(k["unexpected"]),
                             f"{k['p50_ms']} ms", f"{k['p95_ms']} ms", f"{k['p99_ms']} ms", f"{k['max_ms']} ms",
                             f"{k['passages_before']} / {k['passages_after']}"]])
        lines += _md_table(["endpoint", "requests", "p50", "p99"],
                           [[e, v["n"], f"{v['p50_ms']} ms", f"{v['p99_ms']} ms"] for e, v in k["by_endpoint"].items()])
        lines += [f"Status codes: {json.dumps(k['by_status'])}.", ""]
    if s["problems"]:
        shown = Counter(_error_kind(p.split(": ", 1)[1]) if p.startswith("concurrency") else p[:400]
                        for p in s["problems"])
        lines += ["## Problems found", "",
                  *[f"- {p}" + (f" (× {n})" if n > 1 else "") for p, n in shown.items()], ""]
    return "\n".join(lines)


LATER_SECTIONS = "\n## 6. "  # sections written by other benchmarks (kill_loss.py) or by hand: kept


def write_markdown(path: Path, text: str) -> None:
    """The campaign's sections 1-5, with the sections after them that the file already holds kept."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    kept = old[old.index(LATER_SECTIONS):] if LATER_SECTIONS in old else ""
    path.write_text(text.rstrip("\n") + "\n" + kept if kept else text + "\n", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    ap.add_argument("--kill-points", type=int, default=T.KILL_POINTS)
    ap.add_argument("--seconds", type=float, default=T.CONCURRENCY_S, help="concurrency case")
    ap.add_argument("--soak-seconds", type=float, default=T.SOAK_S)
    ap.add_argument("--clients", type=int, default=T.SOAK_CLIENTS)
    ap.add_argument("--only", default="kill,disk,crash,concurrency,soak")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--from-json", type=Path, help="only rewrite the .md from a report .json written before")
    a = ap.parse_args()
    if a.from_json:  # the summary is recomputed (its rules may have changed since)
        res = json.loads(a.from_json.read_text())
        res["summary"] = summarise(res)
        (a.out / "reliability.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
        write_markdown(a.out / "reliability.md", markdown(res))
        return
    only = set(a.only.split(","))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    started = datetime.now(UTC)
    t = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=a.work) as tmp:
        work = Path(tmp)
        records = F.slice_records()
        vectors = F.embed_records(records)
        base = F.build_index(work / "base", records[:T.BASE_PASSAGES], vectors[:T.BASE_PASSAGES])
        res: dict[str, Any] = {}
        if "kill" in only:
            res["kill"] = _kill(base, work, a.kill_points, records)
        if "disk" in only:
            res["disk"] = _disk(base, work, records)
        if "crash" in only:
            res["crash"] = _crash(base, work, records, vectors)
        if "concurrency" in only:
            res["concurrency"] = _concurrency(work, records, vectors, a.seconds)
        if "soak" in only:
            res["soak"] = _soak(work, records, vectors, a.soak_seconds, a.clients)
    res["summary"] = summarise(res)
    command = ["OMP_NUM_THREADS=1 python benchmarks/reliability.py", *map(shlex.quote, sys.argv[1:])]
    res.update(command=" ".join(command),
               started=started.isoformat(timespec="seconds"),
               finished=datetime.now(UTC).isoformat(timespec="seconds"), seconds=round(time.perf_counter() - t, 1),
               machine=f"{os.cpu_count()} cores, Python {platform.python_version()}, load average "
                       f"{os.getloadavg()[0]:.1f} at the end",
               index_commands=sorted(F.index_commands()))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "reliability.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    write_markdown(a.out / "reliability.md", markdown(res))
    print(json.dumps(res["summary"], indent=1))


if __name__ == "__main__":
    main()
