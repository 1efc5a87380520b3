"""`amsrag classifier train|calibrate|evaluate|predict|label` (DESIGN §9)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from amsrag.cli.common import DataOpt, JsonOpt, emit, err, generator_config, out
from amsrag.errors import InputError
from amsrag.types import COMPLEXITIES

classifier_app = typer.Typer(no_args_is_help=True, help="Train, calibrate, evaluate and run the complexity classifier.")

ModelOpt = Annotated[Path | None,
                     typer.Option("--model", help="classifier artifact directory (default: the shipped one)")]
CacheOpt = Annotated[Path | None, typer.Option("--cache", help="embedding cache directory")]
SilverOpt = Annotated[list[Path] | None, typer.Option(
    "--silver", help="three-way silver labels of your generator (`classifier label`) instead of the shipped "
    "FLAN-T5-XL ones; repeatable")]


def _prepared(data_dir: Path | None, cap: int | None, seed: int, cache: Path | None,
              silver: list[Path] | None = None):
    """Labelled data and its (cached) embeddings, with progress on stderr."""
    from amsrag.embed.encoder import MiniLMEncoder
    from amsrag.ingest.datasets import default_data_dir
    from amsrag.learn.classifier.data import build_labelled_data
    from amsrag.learn.classifier.train import prepare
    from amsrag.progress import RichProgress

    data = build_labelled_data(data_dir or default_data_dir(), cap=cap, seed=seed, silver=silver)
    encoder = MiniLMEncoder()
    with RichProgress(console=err) as progress, progress.task("embedding questions", len(data.rows)) as advance:
        prep = prepare(data, encoder, cache_dir=cache, progress=advance)
    return data, prep, encoder


def _print_summary(s: dict[str, Any], title: str) -> None:
    table = Table(title=title)
    for col in ("rows", "n", "accuracy", "macro-F1", "ECE before", "ECE after", "RAA"):
        table.add_column(col)
    for key, name in (("silver_three_way", "three-way, silver rows"), ("hop_dataset", "one vs multi, dataset rows")):
        m = s[key]
        table.add_row(name, str(m["n"]), f"{m['accuracy']:.3f}", f"{m['macro_f1']:.3f}", f"{m['ece_before']:.3f}",
                      f"{m['ece_after']:.3f}", f"{m['raa']:.3f}")
    out.print(table)
    out.print(f"confident-downward (multi_hop predicted cheaper with alpha >= 0.90): "
              f"{s['confident_downward']['all_multi_hop']:.3%} of {s['confident_downward']['n_multi_hop']}")


@classifier_app.command("train")
def train_cmd(
    data: DataOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="where to write the artifact")] = Path("amsrag-classifier"),
    cap: Annotated[int, typer.Option("--cap", help="dataset-derived rows per source data set (0: all)")] = 5000,
    seed: Annotated[int, typer.Option("--seed")] = 13,
    method: Annotated[str, typer.Option("--calibration", help="temperature|platt|isotonic|none")] = "temperature",
    cache: CacheOpt = None,
    silver: SilverOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Train both heads on the labelled data, calibrate them on the calibration split, write the artifact."""
    from amsrag.learn.classifier.evaluate import evaluate_classifier, summary
    from amsrag.learn.classifier.train import TrainConfig, train

    config = TrainConfig(seed=seed, cap=cap or None, calibration=_method(method))
    labelled, prep, encoder = _prepared(data, config.cap, seed, cache, silver)
    clf = train(labelled, prep, config, encoder.model_id)
    clf.save(out_dir)
    s = summary(evaluate_classifier(clf, prep, "cal"))
    result = {"out": str(out_dir), "data_sha256": labelled.sha256, "rows": len(labelled.rows),
              "calibration": clf.meta["calibration"], "cal_split": s}
    if as_json:
        emit(result)
        return
    out.print(f"[green]wrote[/] {out_dir} (training data sha256 {labelled.sha256[:16]}…, {len(labelled.rows)} rows)")
    _print_summary(s, "calibration split")


def _method(name: str):
    from amsrag.calibration import CALIBRATION_METHODS

    if name not in CALIBRATION_METHODS:
        raise InputError(f"unknown calibration method {name!r}; use one of: {', '.join(CALIBRATION_METHODS)}")
    return name


@classifier_app.command("calibrate")
def calibrate_cmd(
    model: ModelOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="where to write the recalibrated artifact")] = Path(
        "amsrag-classifier"),
    method: Annotated[str, typer.Option("--method", help="temperature|platt|isotonic|none")] = "temperature",
    data: DataOpt = None,
    cache: CacheOpt = None,
    silver: SilverOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Refit the calibration (and the zero-hop gate) of an artifact on the calibration split."""
    from amsrag.classify.model import ComplexityClassifier
    from amsrag.learn.classifier.evaluate import evaluate_classifier, summary
    from amsrag.learn.classifier.train import TrainConfig, calibrate

    clf = ComplexityClassifier.load(model)
    tc = clf.meta.get("train_config", {})
    config = TrainConfig(**{k: v for k, v in tc.items() if k in TrainConfig.__dataclass_fields__})
    labelled, prep, _ = _prepared(data, config.cap, config.seed, cache, silver)
    trained_on = clf.meta.get("training_data", {}).get("sha256")
    if trained_on and trained_on != labelled.sha256:
        raise InputError(f"the data under {labelled.data_dir} differ from the artifact's training data "
                         f"(sha256 {labelled.sha256[:16]}… vs {trained_on[:16]}…); its calibration split would "
                         "overlap the training rows: retrain with `amsrag classifier train` instead")
    info = calibrate(clf, prep, config, _method(method))
    clf.save(out_dir)
    s = summary(evaluate_classifier(clf, prep, "cal"))
    if as_json:
        emit({"out": str(out_dir), "calibration": info, "cal_split": s})
        return
    out.print(f"[green]wrote[/] {out_dir}: {method} calibration, zero-hop gate tau = {info['tau']}")
    _print_summary(s, "calibration split")


@classifier_app.command("evaluate")
def evaluate_cmd(
    model: ModelOpt = None,
    data: DataOpt = None,
    split: Annotated[str, typer.Option("--split", help="train|cal|test")] = "test",
    cache: CacheOpt = None,
    silver: SilverOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Accuracy, macro-F1, ECE before/after and RAA of an artifact on a split of its training data."""
    from amsrag.classify.model import ComplexityClassifier
    from amsrag.learn.classifier.evaluate import evaluate_classifier, summary
    from amsrag.learn.classifier.train import TrainConfig

    if split not in ("train", "cal", "test"):
        raise InputError(f"unknown split {split!r}; use train, cal or test")
    clf = ComplexityClassifier.load(model)
    tc = clf.meta.get("train_config", {})
    config = TrainConfig(**{k: v for k, v in tc.items() if k in TrainConfig.__dataclass_fields__})
    labelled, prep, _ = _prepared(data, config.cap, config.seed, cache, silver)
    s = summary(evaluate_classifier(clf, prep, split))
    s["data_sha256"] = labelled.sha256
    s["same_data_as_training"] = labelled.sha256 == clf.meta.get("training_data", {}).get("sha256")
    if as_json:
        emit(s)
        return
    _print_summary(s, f"{split} split")
    if not s["same_data_as_training"]:
        err.print("[yellow]warning:[/] the data differ from the artifact's training data; splits may overlap training")


def _read_jsonl_questions(path: Path) -> list[str]:
    from amsrag.ingest.readers import iter_jsonl

    if not path.is_file():
        raise InputError(f"{path}: no such file")
    questions = []
    for n, rec in iter_jsonl(path):
        q = rec.get("question") if isinstance(rec, dict) else rec
        if not isinstance(q, str) or not q.strip():
            raise InputError(f"{path}:{n}: expected an object with a non-empty string `question`")
        questions.append(q)
    return questions


@classifier_app.command("predict")
def predict_cmd(
    question: Annotated[str | None, typer.Argument(help="the question")] = None,
    input_file: Annotated[Path | None, typer.Option("--input", help="JSONL file of {\"question\": ...}")] = None,
    model: ModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Label, class probabilities and alpha (calibrated confidence) per question."""
    from amsrag.classify.model import ComplexityClassifier

    if (question is None) == (input_file is None):
        raise InputError("give either a QUESTION or --input FILE.jsonl (not both)")
    questions = [question] if question is not None else _read_jsonl_questions(input_file)  # type: ignore[arg-type]
    clf = ComplexityClassifier.load(model)
    predictions = clf.predict_batch(questions)
    if as_json:
        for q, p in zip(questions, predictions, strict=True):
            emit({"question": q, **p.to_dict()})
        return
    table = Table()
    for col in ("question", "label", "alpha", "zero_hop", "one_hop", "multi_hop"):
        table.add_column(col)
    for q, p in zip(questions, predictions, strict=True):
        table.add_row(q, p.label, f"{p.alpha:.3f}", *(f"{p.probs[c]:.3f}" for c in COMPLEXITIES))
    out.print(table)


@classifier_app.command("label")
def label_cmd(
    qa_files: Annotated[list[Path], typer.Argument(help="QA files (any ../shared/data format or amsrag QA JSONL)")],
    out_file: Annotated[Path, typer.Option("--out", help="silver label JSONL to write")],
    generator: Annotated[str | None, typer.Option("--generator", help="extractive|llamacpp|openai "
                                                  "(default: the index configuration's)")] = None,
    index: Annotated[Path | None, typer.Option("--index", help="index to retrieve from (default: a temporary "
                                               "index over the QA files' own passages)")] = None,
    model: Annotated[str | None, typer.Option("--model", help="llamacpp: GGUF file; openai: model name")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="openai: the server's API root")] = None,
    fmt: Annotated[str, typer.Option("--format", help="auto or a data set format")] = "auto",
    limit: Annotated[int | None, typer.Option("--limit", help="at most this many questions per file")] = None,
    match: Annotated[str, typer.Option("--match", help="em (exact match) or f1 (token F1 >= 0.5)")] = "em",
    as_json: JsonOpt = False,
) -> None:
    """Silver labels for YOUR generator: no-retrieval, one-step and multi-step answering; the cheapest
    strategy that answers right is the label (else the data set's hop count). Writes the Adaptive-RAG
    silver layout (`question`, `answer` A|B|C, `dataset_name`, `total_answer`) that the classifier reads."""
    import tempfile
    from collections import Counter

    from amsrag.generate import make_generator
    from amsrag.ingest import load_qa
    from amsrag.learn.label import LabelSettings, label_question, write_labels
    from amsrag.pipeline import Engine
    from amsrag.progress import RichProgress
    from amsrag.store import EmbeddedIndex

    if match not in ("em", "f1"):
        raise InputError(f"--match must be em or f1, got {match!r}")
    sets = [load_qa(p, fmt=fmt, limit=limit) for p in qa_files]
    questions = [q for s in sets for q in s.questions if q.answers]
    if not questions:
        raise InputError(f"no questions with gold answers in {', '.join(map(str, qa_files))}: nothing to label")
    settings = LabelSettings(match=match)
    with tempfile.TemporaryDirectory(prefix="amsrag-label-") as tmp, RichProgress(console=err) as progress:
        if index is None:
            passages = list({p.content_hash: p for s in sets for p in s.passages}.values())
            if not passages:
                raise InputError("the QA files carry no passages to retrieve from: pass --index DIR")
            idx = EmbeddedIndex.create(Path(tmp) / "index")
            idx.add(passages, progress=progress)
        else:
            idx = EmbeddedIndex.open(index)
        with Engine(idx) as engine:
            gen_config = generator_config(engine.config.generator, generator, model, base_url)
            name = gen_config.name
            gen = make_generator(gen_config, encoder=engine.index.encoder)

            def retrieve(question: str, system: str, k: int) -> list:
                return engine.retrieve(question, system=system, k=k).passages

            labels = []
            with progress.task(f"labelling with {name}", len(questions)) as advance:
                for q in questions:
                    labels.append(label_question(q, gen, retrieve, settings))
                    advance(1)
    n = write_labels(labels, out_file, name)
    counts = Counter(lab.label for lab in labels)
    summary = {"out": str(out_file), "questions": n, "generator": name,
               "labels": {c: counts.get(c, 0) for c in COMPLEXITIES},
               "by_dataset_fallback": sum(lab.by_dataset for lab in labels),
               "correct": {s: sum(lab.correct[s] for lab in labels) for s in COMPLEXITIES}}
    if as_json:
        emit(summary)
        return
    out.print(f"[green]wrote[/] {n} silver labels to {out_file} with generator {name}: {summary['labels']} "
              f"({summary['by_dataset_fallback']} by the data set's hop count; right answers per strategy "
              f"{summary['correct']})", highlight=False)
