"""The reader's training run end to end (`amsrag train reader train|calibrate|evaluate`): calibrate the confidence
on the calibration split, score the test split."""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any


def load_items(model: Path, data: Path, seed: int, exclude: Collection[str] = ()) -> list[Any]:
    """The run's items with their splits: `items.pkl` of a training folder, else rebuilt from `data`."""
    f = model / "items.pkl"
    if f.is_file():
        return list(pickle.loads(f.read_bytes()))
    from amsrag.learn.reader.data import load_all

    return load_all(data, seed, exclude)[0]


def calibrate(model: Path, data: Path, seed: int, n: int, exclude: Collection[str] = ()) -> dict[str, Any]:
    """Fit the confidence on the calibration split with the int8 model; write it into the card."""
    import random

    from amsrag.generate.reader_model import CARD_FILE, SpanReader
    from amsrag.learn.reader.evaluate import fit_calibration, read_all

    items = [it for it in load_items(model, data, seed, exclude) if it.split == "cal"]
    by_ds: dict[str, list[Any]] = {}
    for it in items:
        by_ds.setdefault(it.dataset, []).append(it)
    rng = random.Random(seed)
    chosen = [x for its in by_ds.values() for x in rng.sample(its, min(n, len(its)))]
    reader = SpanReader.load(model)
    recs = read_all(reader, chosen, seed + 1)
    cal = fit_calibration(recs)
    card = json.loads((model / CARD_FILE).read_text())
    card["calibration"] = cal
    (model / CARD_FILE).write_text(json.dumps(card, indent=1))
    return cal


def evaluate(model: Path, data: Path, seed: int, n: int, out: Path | None, fp32: bool = False,
             keep: bool = False, all_items: list[Any] | None = None, exclude: Collection[str] = (),
             fp32_model: Path | None = None) -> dict[str, Any]:
    """The reader in `model` on the test split. `fp32`: also score the un-quantised graph (`fp32_model`, by
    default `model/reader-fp32.onnx` of a training folder) with the same card."""
    import random
    import shutil
    import tempfile

    from amsrag.generate.reader_model import CARD_FILE, MODEL_FILE, SpanReader
    from amsrag.learn.reader.evaluate import latency, load_time, read_all, summarise

    items = [it for it in (all_items or load_items(model, data, seed, exclude)) if it.split == "test"]
    by_ds: dict[str, list[Any]] = {}
    for it in items:
        by_ds.setdefault(it.dataset, []).append(it)
    rng = random.Random(seed + 7)
    chosen = [x for _, its in sorted(by_ds.items()) for x in rng.sample(its, min(n, len(its)))]
    reader = SpanReader.load(model)
    res: dict[str, Any] = {"model": str(model), "n_per_dataset": n, "threshold": reader.threshold}
    t = time.time()
    recs = read_all(reader, chosen, seed + 2, keep=keep)
    res["int8"] = summarise(reader, recs)
    res["read_seconds"] = round(time.time() - t, 1)
    fp32_file = fp32_model or model / "reader-fp32.onnx"
    if fp32 and fp32_file.is_file():
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(fp32_file, Path(d) / MODEL_FILE)
            card = json.loads((model / CARD_FILE).read_text(encoding="utf-8"))
            card.pop("artifact", None)  # its sha256 is the int8 model's
            (Path(d) / CARD_FILE).write_text(json.dumps(card), encoding="utf-8")
            r32 = SpanReader.load(d)
            res["fp32_gold"] = summarise(r32, read_all(r32, chosen, seed + 2, settings=("gold",)))["gold"]
    res["latency_5_passages"] = latency(reader, items)
    res["load_seconds"] = load_time(model)
    res["records"] = recs
    if out is not None:
        out.write_text(json.dumps(res, indent=1))
    return res
