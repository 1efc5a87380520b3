"""Cut tests/fixtures/retrieval_slice/ from ../shared/data (deterministic).

    python benchmarks/make_retrieval_slice.py
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from amsrag.types import passage_id_for

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "tests" / "fixtures" / "retrieval_slice"


def main() -> None:
    passages: list[dict] = []
    questions: list[dict] = []
    seen: set[str] = set()

    def add(title: str, text: str, source: str) -> str:
        pid = passage_id_for(title, text)
        if pid not in seen:
            seen.add(pid)
            passages.append({"id": pid, "title": title, "text": text, "metadata": {"source": source}})
        return pid

    with open(DATA / "hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl") as f:
        rows = [json.loads(line) for line in f]
    picked = [r for r in rows if r["type"] == "bridge"][:4] + [r for r in rows if r["type"] == "comparison"][:2]
    for r in picked:
        ids = {t: add(t, "".join(s).strip(), "hotpotqa")
               for t, s in zip(r["context"]["title"], r["context"]["sentences"], strict=True)}
        gold = sorted({ids[t] for t in r["supporting_facts"]["title"]})
        questions.append({"id": r["id"], "question": r["question"], "answers": [r["answer"]],
                          "gold_passage_ids": gold, "dataset": "hotpotqa", "complexity": "multi_hop",
                          "qtype": r["type"]})
    with gzip.open(DATA / "nq/lostinthemiddle_nq-open-oracle.jsonl.gz", "rt") as f:
        nq = [json.loads(line) for _, line in zip(range(10), f, strict=False)]
    for i, r in enumerate(nq):
        c = r["ctxs"][0]
        questions.append({"id": f"nq-{i}", "question": r["question"], "answers": r["answers"],
                          "gold_passage_ids": [add(c["title"], c["text"], "nq")], "dataset": "nq",
                          "complexity": "one_hop", "qtype": None})
    with open(DATA / "flashrag/wiki_sample_corpus_1000.jsonl") as f:
        for _, line in zip(range(20), f, strict=False):
            title, _, text = json.loads(line)["contents"].partition("\n")
            add(title.strip('"'), text.strip(), "wiki")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "passages.jsonl").write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in passages))
    (OUT / "questions.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions))
    print(f"{len(passages)} passages, {len(questions)} questions -> {OUT}")


if __name__ == "__main__":
    main()
