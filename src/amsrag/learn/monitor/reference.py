"""The shipped drift reference: the shipped classifier's routing of its own calibration questions.

The hop head's temperature was fit on the calibration mix (`learn.classifier.train.calibration_mix`: at most
`calibration_rows_per_dataset` questions per data set of the `cal` split, picked by a seeded hash), so
that mix is the traffic whose alphas the calibration vouches for. The labelled data are rebuilt with the
artifact's own cap and seed; their sha256 must equal the artifact's `training_data.sha256` (else the split
is not the one the classifier was calibrated on, and the build stops). Each question is routed as an index
of the default configuration routes it (`Engine.complexity_of`: the shipped classifier, no query library,
a generator that cannot answer alone), and the reference and its card are written to
src/amsrag/data/monitor/.

    python -m amsrag.learn.monitor [--data ../shared/data] [--out src/amsrag/data/monitor]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import file_sha256
from amsrag.config import AmsragConfig
from amsrag.errors import InputError
from amsrag.ingest.dataset_facts import default_data_dir
from amsrag.monitor.drift import REFERENCE_FILE, DriftReference
from amsrag.progress import LogProgress

CARD_FILE = "drift_reference.card.json"
COMMAND = "python -m amsrag.learn.monitor --data ../shared/data"


def calibration_questions(data_dir: Path) -> tuple[list[str], list[str], dict[str, Any]]:
    """(questions, their data sets, provenance) of the shipped classifier's calibration mix."""
    from amsrag.classify.model import ComplexityClassifier
    from amsrag.learn.classifier.data import build_labelled_data
    from amsrag.learn.classifier.train import Prepared, calibration_mix

    meta = ComplexityClassifier.load().meta
    tc = meta.get("train_config", {})
    cap, seed, per_dataset = tc.get("cap"), int(tc.get("seed", 13)), int(tc.get("calibration_rows_per_dataset", 400))
    data = build_labelled_data(data_dir, cap=cap, seed=seed, implicit=bool(tc.get("implicit", False)))
    expected = meta.get("training_data", {}).get("sha256")
    if data.sha256 != expected:
        raise InputError(f"{data_dir}: the labelled data hash {data.sha256[:12]} differs from the shipped "
                         f"classifier's {str(expected)[:12]}: not the data it was calibrated on")
    questions = [r.question for r in data.rows]
    # calibration_mix reads the rows and their data sets only: no embeddings are needed to pick the mix
    prep = Prepared(data.rows, np.zeros((len(data.rows), 0)), np.zeros((len(data.rows), 0)),
                    np.zeros(len(data.rows), dtype=bool))
    picked = np.flatnonzero(calibration_mix(prep, prep.mask("cal"), per_dataset, seed))
    return ([questions[i] for i in picked], [data.rows[i].dataset for i in picked],
            {"labelled_data_sha256": data.sha256, "cap": cap, "seed": seed, "rows_per_dataset": per_dataset,
             "implicit": bool(tc.get("implicit", False))})


def build(data_dir: Path, out_dir: Path) -> DriftReference:
    from amsrag.monitor.baseline import reference_from_questions
    from amsrag.pipeline import Engine
    from amsrag.store import EmbeddedIndex

    questions, datasets, provenance = calibration_questions(data_dir)
    with tempfile.TemporaryDirectory() as tmp, LogProgress(stream=sys.stderr) as progress:
        index = EmbeddedIndex.create(Path(tmp) / "index", AmsragConfig())
        with Engine(index) as engine, progress.task("routing the calibration mix", len(questions)) as advance:
            ref = reference_from_questions(engine, questions, "the shipped classifier's calibration mix "
                                           f"({len(questions)} questions of its cal split)", advance)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = ref.save(out_dir / REFERENCE_FILE)
    card = {
        "what": "drift reference of the shipped complexity classifier: its routing of the questions its hop "
                "temperature was calibrated on (amsrag.monitor.drift; used when an index has no "
                "drift_reference.json of its own)",
        "rebuild": COMMAND,
        "reference_sha256": file_sha256(path),
        "classifier": ref.classifier,
        "settings": {**provenance, "bins": ref.settings.get("bins"), "gray_zone": list(ref.gray_zone),
                     "routing": "Engine.complexity_of on an empty index of the default configuration "
                                "(no query library, generator_knows = false)"},
        "questions_by_dataset": dict(sorted({d: datasets.count(d) for d in set(datasets)}.items())),
        "data_files": {str(p.relative_to(data_dir)): file_sha256(p)
                       for p in _data_files(data_dir, provenance["implicit"])},
        "summary": {"n": ref.n, "route_mix": {k: round(v, 4) for k, v in ref.route_mix.items()},
                    "gray_share": round(ref.gray_share, 4)},
    }
    (out_dir / CARD_FILE).write_text(json.dumps(card, indent=1) + "\n", "utf-8")
    return ref


def _data_files(data_dir: Path, implicit: bool) -> list[Path]:
    from amsrag.learn.classifier.data import dataset_files
    from amsrag.learn.decomposer.data import STRATEGYQA_FILE

    strategyqa = data_dir / STRATEGYQA_FILE
    return [*dataset_files(data_dir), *([strategyqa] if implicit and strategyqa.is_file() else [])]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m amsrag.learn.monitor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="the public data folder (default: ../shared/data)")
    parser.add_argument("--out", type=Path, default=Path("src/amsrag/data/monitor"))
    args = parser.parse_args(argv)
    ref = build(args.data or default_data_dir(), args.out)
    print(json.dumps({"n": ref.n, "route_mix": ref.route_mix, "gray_share": ref.gray_share,
                      "out": str(args.out)}))
