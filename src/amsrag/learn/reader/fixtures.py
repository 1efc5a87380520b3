"""Pick the reader's test fixtures (tests/fixtures/reader/cases.json) from the held-out test split.

    python -m amsrag.learn.reader.fixtures --model DIR --items DIR/items.pkl --out tests/fixtures/reader/cases.json

Real questions that the shipped model answers (or abstains on) as the tests expect; licences of the sources
are recorded beside the cases.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
from pathlib import Path
from typing import Any

from amsrag.generate.metrics import token_f1
from amsrag.generate.reader_model import SpanReader
from amsrag.learn.reader.data import Item, Para
from amsrag.learn.reader.evaluate import settings_for
from amsrag.types import Passage


def _row(p: Passage) -> dict[str, str]:
    return {"id": p.id, "title": p.title, "text": p.text}


def _f1(answer: str, it: Item) -> float:
    return token_f1(answer, it.answers)


def pick(reader: SpanReader, items: list[Item], seed: int = 3) -> dict[str, Any]:
    rng = random.Random(seed)
    test = [it for it in items if it.split == "test"]
    rng.shuffle(test)
    pool = [p for it in items for p in it.gold_paras()]
    out: dict[str, Any] = {"_source": "held-out test (yes/no: calibration) split of the reader's training data "
                           "(never trained on): SQuAD v1.1 (CC BY-SA 4.0), NQ-open oracle (CC BY-SA 3.0), "
                           "HotpotQA (CC BY-SA 4.0); picked by amsrag.learn.reader.fixtures"}
    for ds in ("squad", "nq"):
        for it in test:
            g = it.gold_paras()
            if it.dataset != ds or it.kind != "span" or len(g[0].text.split()) > 130:
                continue
            ps = [Passage(id=f"{ds}-gold", title=g[0].title, text=g[0].text)]
            r = reader.read(it.question, ps)
            if _f1(r.answer, it) >= 0.99 and not r.abstained and r.confidence > reader.threshold + 0.15:
                out[ds] = {"question": it.question, "answers": it.answers, "passages": [_row(ps[0])], "id": it.id}
                break
    for it in [x for x in items if x.kind in ("yes", "no") and x.split in ("test", "cal")]:
        ps = [Passage(id=f"hp-{i}", title=p.title, text=p.text) for i, p in enumerate(it.gold_paras())]
        r = reader.read(it.question, ps)
        if r.answer == it.kind:
            out["yesno"] = {"question": it.question, "answers": [it.kind], "passages": [_row(p) for p in ps],
                            "id": it.id, "split": it.split}
            break
    for it in sorted(test, key=lambda x: x.dataset != "hotpotqa"):  # HotpotQA's own distractors first
        if it.dataset not in ("hotpotqa", "squad") or it.kind != "span":
            continue
        sets = settings_for(it, pool, rng)
        ps = sets["mixed"]
        r = reader.read(it.question, ps)
        if r.passage_id is None or not r.passage_id.startswith("g") or _f1(r.answer, it) < 0.99:
            continue
        r2 = reader.read(it.question, ps[::-1])
        gold_with_answer = [p for p in ps if p.id == r.passage_id]
        if r2.answer != r.answer or r2.passage_id != r.passage_id or not gold_with_answer:
            continue
        out["distractors"] = {"question": it.question, "answers": it.answers, "passages": [_row(p) for p in ps],
                              "gold_id": r.passage_id, "id": it.id, "dataset": it.dataset}
        break
    for it in test:
        ps = settings_for(it, pool, rng)["none"]
        if not ps:
            continue
        r = reader.read(it.question, ps)
        if r.abstained and r.confidence < reader.threshold * 0.5:
            out["unanswerable"] = {"question": it.question, "answers": it.answers,
                                   "passages": [_row(p) for p in ps], "id": it.id,
                                   "note": "passages of other questions that lack the answer"}
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--items", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    items: list[Item] = pickle.loads(a.items.read_bytes())
    assert all(isinstance(p, Para) for it in items[:5] for p in it.paras)
    cases = pick(SpanReader.load(a.model), items)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(sorted(cases))


if __name__ == "__main__":
    main()
