"""The fault campaign (issue 18, part 7): real faults on real processes, and nothing lost.

1. kill -9 of `amsrag index add|delete` (and `index sync` where this checkout has it) at random points;
2. disk full during an add: ENOSPC injected past a byte budget, and a real full tmpfs where mounting works;
3. a crash (os._exit) before every step of a write's publish sequence;
4. 4 writer and 8 reader processes on one index for CONCURRENCY_S seconds;
5. `amsrag serve` under SOAK_CLIENTS loopback clients for SOAK_S seconds.

The machinery is in tests/faults.py (benchmarks/reliability.py runs the same campaign and writes
docs/benchmarks/reliability.md). Seeds are fixed and appear in the test ids: `test_kill_9[add-1803]`
reruns exactly that kill point (the delay is that seed's fraction of the measured run time).
"""

from __future__ import annotations

import json

import pytest

import faults as F

pytestmark = pytest.mark.slow

KILL_POINTS = 20  # kill -9 of `index add` at this many random points
KILL_SEED = 1800  # seeds KILL_SEED .. KILL_SEED + KILL_POINTS - 1 (delete: + 100, sync: + 200)
SYNC_KILL_POINTS = 10  # a sync run is ~3x an add's: 10 here, 20 in benchmarks/reliability.py
DELETE_KILL_POINTS = 4
BASE_PASSAGES = 30  # the index every kill starts from (the slice's first 30 passages)
ENOSPC_FRACTIONS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.995)  # of the bytes an uninterrupted add writes
TMPFS_FREE_KB = (0, 16, 64)
CRASH_BATCH = 4
CONCURRENCY_S = 60.0
WRITERS, READERS = 4, 8
SOAK_S = 60.0
SOAK_CLIENTS = 32

KILL_CASES = ([("add", KILL_SEED + i) for i in range(KILL_POINTS)]
              + [("delete", KILL_SEED + 100 + i) for i in range(DELETE_KILL_POINTS)]
              + ([("sync", KILL_SEED + 200 + i) for i in range(SYNC_KILL_POINTS)] if "sync" in F.index_commands()
                 else []))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def records():
    return F.slice_records()


@pytest.fixture(scope="module")
def vectors(slice_vectors, slice_passages, records):
    assert [p.id for p in slice_passages] == [r["id"] for r in records]
    return slice_vectors


@pytest.fixture(scope="module")
def base(work, records, vectors):
    return F.build_index(work / "base", records[:BASE_PASSAGES], vectors[:BASE_PASSAGES])


@pytest.fixture(scope="module")
def bases(work, base, records):
    """The index each command's kills start from (sync: one synced from a folder, committing in batches)."""
    cache: dict[str, object] = {"add": base, "delete": base}

    def base_of(command: str):
        if command not in cache:
            cache[command] = F.build_sync_base(work / "sync-base", work, records)
        return cache[command]

    return base_of


@pytest.fixture(scope="module")
def windows(work, bases):
    """Wall time of one uninterrupted run per command (measured once): the span kills are drawn from."""
    cache: dict[str, float] = {}

    def window(command: str) -> float:
        if command not in cache:
            cache[command] = F.calibrate(command, bases(command), work)
        return cache[command]

    return window


def _explain(case) -> str:
    return json.dumps(F.as_dict(case), indent=1, default=str)


# ---------------------------------------------------------------------------- 1. kill -9
@pytest.mark.parametrize(("command", "seed"), KILL_CASES, ids=[f"{c}-{s}" for c, s in KILL_CASES])
def test_kill_9(command, seed, bases, work, windows) -> None:
    """SIGKILL at U(0, 1.1) x the run time: a committed state (all or nothing per transaction; sync: each
    document old or new), the index opens and `amsrag index check` passes, a rerun ends exactly right."""
    case = F.kill_once(command, seed, bases(command), work, windows(command))
    assert not case.problems, _explain(case)
    assert case.after_rerun == case.target
    if "check" in F.index_commands():
        assert case.index_check == 0, _explain(case)


def test_kill_points_cover_the_run() -> None:
    """The seeded delays spread over the whole run: startup, reading, embedding, the write, past the end."""
    fractions = sorted(F.kill_fraction(s) for c, s in KILL_CASES if c == "add")
    assert len(fractions) == KILL_POINTS
    assert fractions[0] < 0.15 and fractions[-1] > 0.9, fractions
    assert max(b - a for a, b in zip([0.0, *fractions], [*fractions, 1.1], strict=True)) < 0.3, fractions


# ---------------------------------------------------------------------------- 2. disk full
ENOSPC_LABELS = [f"injected-{f:g}" for f in ENOSPC_FRACTIONS] + [f"tmpfs-{k}k" for k in TMPFS_FREE_KB]


@pytest.fixture(scope="module")
def disk_full(base, work, records):
    batch = records[BASE_PASSAGES:BASE_PASSAGES + CRASH_BATCH]
    total, _ = F.bytes_written_by_add(base, work, batch)
    cases = {}
    for f in ENOSPC_FRACTIONS:
        cases[f"injected-{f:g}"] = F.disk_full_injected(base, work, int(total * f), f"injected-{f:g}", batch)
    if F.can_mount_tmpfs():
        for kb in TMPFS_FREE_KB:
            cases[f"tmpfs-{kb}k"] = F.disk_full_tmpfs(base, work, kb, batch)
    return cases


def _disk_case(disk_full, label):
    if label not in disk_full:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN) here; the injected ENOSPC cases ran instead")
    return disk_full[label]


@pytest.mark.parametrize("label", ENOSPC_LABELS)
def test_disk_full_keeps_the_committed_state(disk_full, label) -> None:
    """ENOSPC at every file of the write: the add fails, the index holds the state before (or, past the
    SQLite commit, after: all or nothing), opens, answers, and the same add succeeds once there is room."""
    case = _disk_case(disk_full, label)
    assert case.returncode != 0 and case.intact and case.later_add_ok and not case.problems, _explain(case)


@pytest.mark.parametrize("label", ENOSPC_LABELS)
def test_disk_full_is_a_clear_error(disk_full, label) -> None:
    """The CLI says what happened in one line (`error: ... no space left ...`), exit status 2, no traceback."""
    case = _disk_case(disk_full, label)
    assert case.returncode == 2 and not case.traceback_shown and case.names_the_problem, _explain(case)


@pytest.mark.parametrize("label", ENOSPC_LABELS)
def test_disk_full_leaves_no_temp_files(disk_full, label) -> None:
    """No half-written generation directory or temporary file stays behind after the failed add."""
    case = _disk_case(disk_full, label)
    assert not case.leftovers, _explain(case)
    assert not case.leftovers_after_later_add, _explain(case)


# ---------------------------------------------------------------------------- 3. power cut of the publish
@pytest.fixture(scope="module")
def crashes(base, work, records, vectors):
    import numpy as np

    before = {r["id"] for r in records[:BASE_PASSAGES]}
    batch = records[BASE_PASSAGES:BASE_PASSAGES + CRASH_BATCH]
    add_file = F.write_jsonl(work / "crash-add.jsonl", batch)
    np.save(work / "crash-add.npy", vectors[BASE_PASSAGES:BASE_PASSAGES + CRASH_BATCH])
    gone = records[:CRASH_BATCH]
    del_file = F.write_jsonl(work / "crash-delete.jsonl", gone)
    return {
        "add": F.crash_campaign("add", base, work, add_file, work / "crash-add.npy", before,
                                before | {r["id"] for r in batch}),
        # the staging steps of a delete are those of an add: from the commit on
        "delete": F.crash_campaign("delete", base, work, del_file, None, before,
                                   before - {r["id"] for r in gone}, first="sqlite COMMIT"),
    }


@pytest.mark.parametrize("op", ["add", "delete"])
def test_power_cut_between_every_step_is_repaired(crashes, op) -> None:
    """A crash before each step (derived dirs written, COMMIT, manifest tmp written, fsync, rename, dir
    fsync, old dirs removed): on disk the state before or after, and reopening gives exactly that state."""
    cases = crashes[op]
    assert len(cases) >= (25 if op == "add" else 10)
    assert {c.state_on_disk for c in cases} >= {"committed, manifest behind", "committed and published"}
    bad = [F.as_dict(c) for c in cases if c.problems or c.count_after != c.expected]
    assert not bad, json.dumps(bad, indent=1)


@pytest.mark.parametrize("op", ["add", "delete"])
def test_power_cut_leaves_nothing_behind_after_the_next_write(crashes, op) -> None:
    """Whatever a crash left (generation dirs, a manifest temporary file) is gone once a write has run."""
    bad = [(c.n, c.event, c.leftovers_after_next_write) for c in crashes[op] if c.leftovers_after_next_write]
    assert not bad, bad


# ---------------------------------------------------------------------------- 4. concurrent writers and readers
def test_concurrent_writers_and_readers(work, records, vectors) -> None:
    """4 writer processes add and delete disjoint passage sets while 8 readers search (half reopening the
    index for every query as `amsrag search` does, half refreshing one handle as the service does):
    no error anywhere, and the final ids are exactly the union of what the writers committed."""
    base_n = 10
    rest = list(range(base_n, len(records)))
    parts = [rest[w::WRITERS] for w in range(WRITERS)]
    result = F.concurrency_run(records[:base_n], vectors[:base_n], [[records[i] for i in p] for p in parts],
                               [vectors[p] for p in parts], work, CONCURRENCY_S, readers=READERS)
    summary = json.dumps({k: v for k, v in F.as_dict(result).items() if k != "errors"})
    assert not result.timed_out, summary
    assert not result.errors, "\n\n".join(result.errors[:5]) + f"\n({len(result.errors)} errors) {summary}"
    assert result.lost == 0 and result.extra == 0, summary
    assert result.commits >= 4 * WRITERS and result.searches >= READERS, summary


# ---------------------------------------------------------------------------- 5. service soak
def test_service_soak(work, built_index) -> None:
    """`amsrag serve` for SOAK_S s at SOAK_CLIENTS clients (retrieve, ask, documents add/get/delete):
    no 5xx, no dropped connection, every answer as expected (429 allowed and counted), p99 under the
    request timeout, the passage count back where it started, and the index consistent afterwards."""
    index = F.copy_index(built_index.path, work / "soak" / "index")
    result = F.soak_run(index, SOAK_S, SOAK_CLIENTS)
    summary = json.dumps({k: v for k, v in F.as_dict(result).items() if k != "unexpected"})
    assert result.status_5xx == 0 and result.transport_errors == 0, summary + "\n" + "\n".join(result.unexpected[:10])
    assert not result.unexpected, "\n".join(result.unexpected[:10]) + "\n" + summary
    assert result.requests >= 200, summary
    assert result.p99_ms < result.request_timeout_s * 1000, summary
    assert result.passages_after == result.passages_before, summary
    F.check_index(index, {p.id for p in built_index.iter_passages()})
