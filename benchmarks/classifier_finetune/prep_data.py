"""Build amsrag's labelled rows (same cap/seed/splits as the shipped artifact), the 20 features, the shipped
artifact's raw logits and decisions, and save everything to bench-cache/classifier-finetune/data.npz + rows.json.

    OMP_NUM_THREADS=1 taskset -c 1 $TORCH_VENV/bin/python prep_data.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from amsrag.classify.model import ComplexityClassifier, shipped_artifact_dir
from amsrag.embed.encoder import MiniLMEncoder
from amsrag.learn.classifier.data import build_labelled_data
from amsrag.learn.classifier.train import Prepared, TrainConfig, knowledge_oof, prepare

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "bench-cache" / "classifier-finetune"  # git-ignored
DATA = Path(os.environ.get("AMSRAG_DATA", HERE.parents[2] / "shared" / "data"))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    clf = ComplexityClassifier.load(shipped_artifact_dir())
    config = TrainConfig(**clf.meta["train_config"])
    data = build_labelled_data(DATA, cap=config.cap, seed=config.seed)
    print("rows", len(data.rows), "sha matches artifact:", data.sha256 == clf.meta["training_data"]["sha256"])
    prep: Prepared = prepare(data, MiniLMEncoder(), cache_dir=OUT / "cache")
    zh, zk = clf.raw_logits(prep.embeddings, prep.features)
    label, _ = clf.probabilities(prep.embeddings, prep.features)
    oof_zk, _ = knowledge_oof(prep, config)  # the shipped rule's out-of-fold knowledge logits (silver train rows)
    tr = prep.mask("train", silver3=True)
    oof_full = np.full(len(prep.rows), np.nan)
    oof_full[tr] = oof_zk
    np.savez(
        OUT / "data.npz",
        features=prep.features,
        embeddings=prep.embeddings,
        hop_y=prep.hop_y,
        three_y=prep.three_y,
        shipped_zh=zh,
        shipped_zk=zk,
        shipped_label=label,
        shipped_oof_zk=oof_full,
        split=np.array([r.split for r in prep.rows]),
        source=np.array([r.source for r in prep.rows]),
        dataset=np.array([r.dataset for r in prep.rows]),
    )
    (OUT / "rows.json").write_text(
        json.dumps(
            {
                "sha256": data.sha256,
                "questions": [r.question for r in prep.rows],
                "zero_logit": clf.zero_logit,
                "hop_T": clf.meta["calibration"]["hop_params"]["temperature"][0],
                "knowledge_T": clf.meta["calibration"]["knowledge_params"]["temperature"][0],
                "tau": clf.meta["calibration"]["tau"],
            }
        )
    )
    s = prep.mask("test", silver3=True)
    print("shipped test silver acc", float(np.mean(label[s] == prep.three_y[s])))


if __name__ == "__main__":
    main()
