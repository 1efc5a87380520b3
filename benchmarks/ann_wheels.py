"""hnswlib (source only: compiles on install) against chroma-hnswlib (the same C++ library, forked, with
manylinux wheels), on real MiniLM vectors, with the dense index's own HNSW settings (issue 40).

Both install the module `hnswlib`, so each runs in its own interpreter:

    # 1. vectors: 25,000 HotpotQA paragraphs and 1,000 HotpotQA questions, encoded by amsrag's MiniLM
    OMP_NUM_THREADS=1 python benchmarks/ann_wheels.py vectors --out /tmp/ann
    # (the file holds 2,936 distinct paragraphs: `augment` fills up to 25,000 with blends of two real
    # paragraph vectors and a little noise, so the index is HNSW-sized and shaped like real text)
    python benchmarks/ann_wheels.py augment --vectors /tmp/ann --to 25000
    # 2. the same build and queries in each library's environment (numpy + that library only)
    OMP_NUM_THREADS=1 VENV_A/bin/python benchmarks/ann_wheels.py run --vectors /tmp/ann --label hnswlib
    OMP_NUM_THREADS=1 VENV_B/bin/python benchmarks/ann_wheels.py run --vectors /tmp/ann --label chroma \
        --other /tmp/ann/hnswlib
    # 3. the comparison (also loads each library's saved index with the other: the file format)
    python benchmarks/ann_wheels.py compare --vectors /tmp/ann --labels hnswlib chroma

`run` builds with one thread (as `VectorIndex` does), queries one at a time at k = 10, and scores recall@10
against the exact inner-product top 10.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

HOTPOT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "hotpotqa" / \
    "rpt_hotpot_distractor_validation_dev.jsonl"
K = 10


def vectors(out: Path, passages: int, queries: int) -> None:
    """Encode the first `passages` distinct paragraphs and the first `queries` questions; write the settings."""
    from amsrag.config import DenseConfig
    from amsrag.embed import MiniLMEncoder

    texts: dict[str, str] = {}
    questions: list[str] = []
    with HOTPOT.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if len(questions) < queries:
                questions.append(row["question"])
            for title, sentences in zip(row["context"]["title"], row["context"]["sentences"], strict=True):
                texts.setdefault(title, f"{title}. {''.join(sentences)}")
            if len(texts) >= passages and len(questions) >= queries:
                break
    encoder = MiniLMEncoder()
    t = time.perf_counter()
    docs = encoder.encode(list(texts.values())[:passages])
    qs = np.stack([encoder.encode_query(q) for q in questions])
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "passages.npy", docs.astype(np.float32))
    np.save(out / "queries.npy", qs.astype(np.float32))
    c = DenseConfig()
    settings = {"m": c.hnsw_m, "ef_construction": c.hnsw_ef_construction, "ef_search": c.hnsw_ef_search,
                "seed": c.seed, "passages": len(docs), "queries": len(qs), "source": str(HOTPOT.name),
                "encode_s": round(time.perf_counter() - t, 1)}
    (out / "settings.json").write_text(json.dumps(settings, indent=1), encoding="utf-8")
    print(json.dumps(settings))


def augment(vec_dir: Path, to: int) -> None:
    docs = np.load(vec_dir / "passages.npy")
    s = json.loads((vec_dir / "settings.json").read_text(encoding="utf-8"))
    rng = np.random.default_rng(0)
    n = to - len(docs)
    if n <= 0:
        return
    a, b = rng.integers(0, len(docs), n), rng.integers(0, len(docs), n)
    w = rng.uniform(0.55, 0.9, (n, 1)).astype(np.float32)
    blend = w * docs[a] + (1 - w) * docs[b] + rng.normal(0, 0.02, (n, docs.shape[1])).astype(np.float32)
    blend /= np.linalg.norm(blend, axis=1, keepdims=True)
    np.save(vec_dir / "passages.npy", np.concatenate([docs, blend]).astype(np.float32))
    s.update(real_passages=len(docs), passages=to, blended=n)
    (vec_dir / "settings.json").write_text(json.dumps(s, indent=1), encoding="utf-8")
    print(json.dumps(s))


def _search(index, qs: np.ndarray) -> tuple[np.ndarray, list[float]]:  # type: ignore[no-untyped-def]
    ids, times = [], []
    for q in qs:
        t = time.perf_counter()
        found, _ = index.knn_query(q[None, :], k=K, num_threads=1)
        times.append((time.perf_counter() - t) * 1000)
        ids.append(found[0])
    return np.asarray(ids, dtype=np.int64), times


def run(vec_dir: Path, label: str, other: Path | None) -> None:
    import hnswlib

    s = json.loads((vec_dir / "settings.json").read_text(encoding="utf-8"))
    docs, qs = np.load(vec_dir / "passages.npy"), np.load(vec_dir / "queries.npy")
    out = vec_dir / label
    out.mkdir(exist_ok=True)
    t = time.perf_counter()
    index = hnswlib.Index(space="ip", dim=docs.shape[1])
    index.init_index(max_elements=len(docs), ef_construction=s["ef_construction"], M=s["m"], random_seed=s["seed"])
    index.add_items(docs, np.arange(len(docs)), num_threads=1)
    build_s = time.perf_counter() - t
    index.set_ef(s["ef_search"])
    index.save_index(str(out / "index.bin"))
    ids, times = _search(index, qs)
    _search(index, qs)  # warm: the second pass is the one timed
    ids2, times = _search(index, qs)
    assert (ids == ids2).all()
    np.save(out / "ids.npy", ids)
    result = {"label": label, "module": getattr(hnswlib, "__file__", ""), "build_s": round(build_s, 2),
              "query_ms_p50": round(statistics.median(times), 4),
              "query_ms_p95": round(float(np.percentile(times, 95)), 4)}
    if other is not None:  # the other library's saved index, loaded and queried with this one
        loaded = hnswlib.Index(space="ip", dim=docs.shape[1])
        try:
            loaded.load_index(str(other / "index.bin"), max_elements=0, allow_replace_deleted=False)
        except RuntimeError as exc:  # the two builds' files differ (see docs/benchmarks/ann-wheels.md)
            result["loads_other_index"] = f"no: {exc}"
        else:
            loaded.set_ef(s["ef_search"])
            other_ids, _ = _search(loaded, qs)
            np.save(out / "ids_of_other_index.npy", other_ids)
            result["loads_other_index"] = "yes"
    (out / "result.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps(result))


def compare(vec_dir: Path, labels: list[str]) -> None:
    docs, qs = np.load(vec_dir / "passages.npy"), np.load(vec_dir / "queries.npy")
    exact = np.argsort(-(qs @ docs.T), axis=1, kind="stable")[:, :K]
    rows = []
    ids = {lab: np.load(vec_dir / lab / "ids.npy") for lab in labels}
    for lab in labels:
        r = json.loads((vec_dir / lab / "result.json").read_text(encoding="utf-8"))
        overlap = [len(set(a) & set(b)) / K for a, b in zip(ids[lab], exact, strict=True)]
        r["recall@10"] = round(float(np.mean(overlap)), 4)
        other = vec_dir / lab / "ids_of_other_index.npy"
        if other.exists():
            r["other_index_same_ids"] = bool((np.load(other) == ids[labels[0]]).all())
        rows.append(r)
    a, b = labels[0], labels[1]
    same = float(np.mean([(x == y).all() for x, y in zip(ids[a], ids[b], strict=True)]))
    print(json.dumps({"rows": rows, f"queries with identical top 10 ({a} vs {b})": same}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("vectors")
    v.add_argument("--out", type=Path, required=True)
    v.add_argument("--passages", type=int, default=25_000)
    v.add_argument("--queries", type=int, default=1_000)
    r = sub.add_parser("run")
    r.add_argument("--vectors", type=Path, required=True)
    r.add_argument("--label", required=True)
    r.add_argument("--other", type=Path)
    g = sub.add_parser("augment")
    g.add_argument("--vectors", type=Path, required=True)
    g.add_argument("--to", type=int, default=25_000)
    c = sub.add_parser("compare")
    c.add_argument("--vectors", type=Path, required=True)
    c.add_argument("--labels", nargs=2, required=True)
    args = ap.parse_args()
    if args.cmd == "vectors":
        vectors(args.out, args.passages, args.queries)
    elif args.cmd == "augment":
        augment(args.vectors, args.to)
    elif args.cmd == "run":
        run(args.vectors, args.label, args.other)
    else:
        compare(args.vectors, args.labels)


if __name__ == "__main__":
    main()
