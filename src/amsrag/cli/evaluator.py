"""`amsrag train evaluator train|evaluate|score`: the retrieval evaluator of the corrective step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from amsrag.cli.common import DataOpt, JsonOpt, QuietOpt, emit, err, out
from amsrag.errors import InputError

evaluator_app = typer.Typer(no_args_is_help=True, help="Train and evaluate the retrieval evaluator (corrective step).")

CacheOpt = Annotated[Path | None, typer.Option("--cache", help="embedding cache directory")]
VectorsOpt = Annotated[Path | None, typer.Option(
    "--corpus-vectors", help="reuse paragraph vectors from this npz (hashes, vectors, meta); "
    "default: bench-cache/corpus-vectors.npz when present")]


def _prepared(data_dir: Path | None, config, cache: Path | None, corpus_vectors: Path | None, quiet: bool = False):
    from amsrag.embed.encoder import MiniLMEncoder
    from amsrag.ingest.dataset_facts import default_data_dir
    from amsrag.learn.common import default_cache_dir
    from amsrag.learn.evaluator.train import prepare
    from amsrag.progress import progress_for

    encoder = MiniLMEncoder()
    if corpus_vectors is None:
        default = default_cache_dir().parent / "corpus-vectors.npz"
        corpus_vectors = default if default.is_file() else None
    with progress_for(err, quiet) as progress:
        prep = prepare(data_dir or default_data_dir(), config, encoder, cache, corpus_vectors, progress)
    return prep, encoder


def _table(report: dict[str, Any], title: str) -> None:
    t = Table(title=title)
    for col in ("rows", "n", "positives", "ROC-AUC", "avg. precision", "ECE", "Brier"):
        t.add_column(col)
    for name, m in [("test", report["test"]), *[(f"test/{d}", v) for d, v in report["test_by_dataset"].items()],
                    ("cal", report["cal"])]:
        t.add_row(Text(name), str(m["n"]), str(m["positives"]),
                  *(f"{m[k]:.3f}" if m[k] is not None else "-" for k in ("roc_auc", "average_precision", "ece",
                                                                         "brier")))
    out.print(t)
    th = report["thresholds"]
    out.print(f"tri-state thresholds (cal split, {th['aggregate']} over top-{th['k']}): upper = {th['upper']}, "
              f"lower = {th['lower']}")
    ts = report["tri_state_test"]
    out.print(f"test lists with a gold passage: {ts['with_gold']}; without: {ts['without_gold']}")


@evaluator_app.command("train")
def train_cmd(
    data: DataOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="where to write the artifact")] = Path("amsrag-evaluator"),
    per_dataset: Annotated[int, typer.Option("--per-dataset", help="questions per data set")] = 700,
    seed: Annotated[int, typer.Option("--seed")] = 13,
    calibration: Annotated[str, typer.Option("--calibration", help="platt|isotonic|temperature|none")] = "platt",
    model: Annotated[str, typer.Option("--model", help="gbdt|logistic")] = "gbdt",
    cache: CacheOpt = None,
    corpus_vectors: VectorsOpt = None,
    report_file: Annotated[Path | None, typer.Option("--report", help="also write the full report as JSON")] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Train on gold vs distractor paragraphs, calibrate on the cal split, tune the tri-state thresholds."""
    from amsrag.correct.evaluator import EVAL_CALIBRATIONS
    from amsrag.learn.evaluator.train import EvaluatorTrainConfig, train

    if calibration not in EVAL_CALIBRATIONS:
        raise InputError(f"unknown calibration method {calibration!r}; use one of: {', '.join(EVAL_CALIBRATIONS)}")
    if per_dataset < 20:
        raise InputError(f"--per-dataset must be at least 20, got {per_dataset}")
    if model not in ("gbdt", "logistic"):
        raise InputError(f"unknown model {model!r}; use gbdt or logistic")
    config = EvaluatorTrainConfig(seed=seed, per_dataset=per_dataset, calibration=calibration,
                                  model=model)
    prep, encoder = _prepared(data, config, cache, corpus_vectors, quiet)
    evaluator, report = train(prep, config, encoder.model_id)
    evaluator.save(out_dir)
    if report_file is not None:
        report_file.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if as_json:
        emit({"out": str(out_dir), "data_sha256": prep.sha256, **{k: report[k] for k in (
            "questions", "rows", "thresholds", "tri_state_test")}, "test": {
            k: v for k, v in report["test"].items() if k != "reliability"}})
        return
    out.print(f"[green]wrote[/] {escape(str(out_dir))} (training data sha256 {prep.sha256[:16]}…)", highlight=False)
    _table(report, "retrieval evaluator")


@evaluator_app.command("evaluate")
def evaluate_cmd(
    model: Annotated[Path | None, typer.Option("--model", help="artifact directory (default: the shipped one)")] = None,
    data: DataOpt = None,
    cache: CacheOpt = None,
    corpus_vectors: VectorsOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """ROC-AUC, ECE and tri-state rates of an artifact on the held-out test split of its training data."""
    from amsrag.correct.evaluator import RetrievalEvaluator
    from amsrag.learn.evaluator.train import EvaluatorTrainConfig, evaluate

    ev = RetrievalEvaluator.load(model)
    tc = ev.meta.get("train_config", {})
    config = EvaluatorTrainConfig(**{k: v for k, v in tc.items() if k in EvaluatorTrainConfig.__dataclass_fields__})
    prep, _ = _prepared(data, config, cache, corpus_vectors, quiet)
    report = evaluate(ev, prep, config)
    same = prep.sha256 == ev.meta.get("training_data", {}).get("sha256")
    if as_json:
        emit({"same_data_as_training": same, "thresholds": report["thresholds"],
               "test": {k: v for k, v in report["test"].items() if k != "reliability"},
               "test_by_dataset": report["test_by_dataset"], "tri_state_test": report["tri_state_test"]})
        return
    _table(report, "retrieval evaluator (held-out test split)")
    if not same:
        err.print("[yellow]warning:[/] the data differ from the artifact's training data; splits may overlap training")


@evaluator_app.command("score")
def score_cmd(
    query: Annotated[str, typer.Argument(help="the question")],
    input_file: Annotated[Path, typer.Option("--passages", help="JSONL of {\"id\", \"title\", \"text\"}")],
    model: Annotated[Path | None, typer.Option("--model", help="artifact directory (default: the shipped one)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Relevance of each passage of a JSONL file to the question, and the tri-state action."""
    from amsrag.config import CorrectiveConfig, ServeConfig
    from amsrag.correct.actions import CorrectiveStep
    from amsrag.correct.evaluator import RetrievalEvaluator
    from amsrag.ingest.readers import iter_jsonl
    from amsrag.pipeline.results import check_question

    query = check_question(query, ServeConfig().max_question_chars)
    if not input_file.is_file():
        raise InputError(f"{input_file}: no such file")
    passages = []
    for n, rec in iter_jsonl(input_file):
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str) or not rec["text"].strip():
            raise InputError(f"{input_file}:{n}: expected an object with a non-empty string `text`")
        passages.append({"id": str(rec.get("id", n)), "title": str(rec.get("title", "")), "text": rec["text"]})
    step = CorrectiveStep(CorrectiveConfig.model_validate({}), RetrievalEvaluator.load(model))
    a = step.assess(query, None, passages)
    if as_json:
        emit({"query": query, **a.to_dict()})
        return
    t = Table(title=Text(f"{a.action} (S = {a.score:.3f})"))
    for col in ("id", "title", "relevance"):
        t.add_column(col, no_wrap=col == "id")
    for p, s in zip(passages, a.per_passage, strict=True):
        t.add_row(Text(p["id"]), Text(p["title"]), f"{s:.3f}")
    out.print(t)
