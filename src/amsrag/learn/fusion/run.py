"""The whole `amsrag train fusion train` run: questions, the evaluation corpus's index, collection, training,
artifact."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amsrag.artifacts import file_sha256
from amsrag.evaluate.builder import (
    EVALUATED_SEEDS,
    BenchmarkSpec,
    default_cache_dir,
    evaluated_questions,
    load_or_build,
    spare_questions,
)
from amsrag.evaluate.corpus_index import open_or_build_index
from amsrag.ingest.dataset_facts import EVAL_FILES
from amsrag.learn.fusion.data import SUBSETS, collect
from amsrag.learn.fusion.train import TrainSettings, base_fusion, check_out_dir, train, write_artifact
from amsrag.pipeline import Engine
from amsrag.pipeline.signals import index_profile
from amsrag.progress import NullProgress, Progress


def train_fusion(data_dir: Path, out: Path, per_group: int, settings: TrainSettings,
                 progress: Progress | None = None, log: Callable[[str], None] = print,
                 cache_dir: Path | None = None) -> dict[str, Any]:
    """Train on the evaluation corpus (built or reused from the eval cache) and write the artifact to `out`."""
    check_out_dir(out)  # before minutes of passes, not after
    progress = progress or NullProgress()
    cache = cache_dir or default_cache_dir()
    bench, bench_dir = load_or_build(BenchmarkSpec(data_dir=data_dir), cache)
    excluded = evaluated_questions(data_dir)
    questions = spare_questions(bench, data_dir, excluded, per_group, settings.seed)
    log(f"{len(questions)} training questions (none of the {len(excluded)} questions of the evaluated "
        f"benchmarks, seeds {list(EVALUATED_SEEDS)}); corpus {bench_dir}")
    index = open_or_build_index(bench.passages, bench_dir / "index", cache, progress=progress)
    config = index.config.model_copy(deep=True)
    config.fusion = base_fusion()
    with Engine(index, config=config) as engine:
        engine.retrieve("warm up question about a film director", system="A0")
        with progress.task("fusion training passes", len(questions)) as advance:
            collected = collect(engine, questions, settings.pool, advance)
        profile = index_profile(engine.index)
    log(f"{len(collected.groups)} groups; training LightGBM lambdarank ({settings.rounds} rounds)")
    trained = train(collected, questions, settings)
    files = sorted({rel for rels in EVAL_FILES.values() for rel in rels})
    ids = "\n".join(sorted(q.id for q in questions)).encode()
    data = {"benchmark_key": bench.key, "corpus_passages": len(bench.passages),
            "question_ids_sha256": hashlib.sha256(ids).hexdigest(),
            "files": {rel: file_sha256(data_dir / rel) for rel in files},
            "excluded": "every eval and calibration question of the default benchmark at seeds "
                        + " and ".join(str(s) for s in EVALUATED_SEEDS),
            "per_group": per_group, "subsets": ["+".join(s) for s in SUBSETS]}
    write_artifact(out, trained, settings, profile, data, questions)
    return {"out": str(out), "questions": len(questions), "groups": len(collected.groups), **trained.split,
            "validation": trained.metrics["validation"]["all"], "importance": trained.importance}
