"""`amsrag train classifier train|calibrate|evaluate|predict|label` (DESIGN §9)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from amsrag.cli.common import DataOpt, JsonOpt, QuietOpt, emit, err, generator_config, out
from amsrag.errors import InputError
from amsrag.progress import progress_for
from amsrag.types import COMPLEXITIES

if TYPE_CHECKING:
    from amsrag.calibration import CalibrationMethod

classifier_app = typer.Typer(no_args_is_help=True, help="Train, calibrate, evaluate and run the complexity classifier.")

ModelOpt = Annotated[Path | None,
                     typer.Option("--model", help="classifier artifact directory (default: the shipped one)")]
CacheOpt = Annotated[Path | None, typer.Option("--cache", help="embedding cache directory")]
SilverOpt = Annotated[list[Path] | None, typer.Option(
    "--silver", help="three-way silver labels of your generator (`train classifier label`) instead of the shipped "
    "FLAN-T5-XL ones; repeatable")]


def _prepared(data_dir: Path | None, cap: int | None, seed: int, cache: Path | None,
              silver: list[Path] | None = None, quiet: bool = False, implicit: bool = False):
    """Labelled data and its (cached) embeddings, with progress on stderr."""
    from amsrag.embed.encoder import MiniLMEncoder
    from amsrag.ingest.dataset_facts import default_data_dir
    from amsrag.learn.classifier.data import build_labelled_data
    from amsrag.learn.classifier.train import prepare

    data = build_labelled_data(data_dir or default_data_dir(), cap=cap, seed=seed, silver=silver, implicit=implicit)
    encoder = MiniLMEncoder()
    with progress_for(err, quiet) as progress, progress.task("embedding questions", len(data.rows)) as advance:
        prep = prepare(data, encoder, cache_dir=cache, progress=advance)
    return data, prep, encoder


def _print_summary(s: dict[str, Any], title: str) -> None:
    table = Table(title=title)
    for col in ("rows", "n", "hop accuracy", "ECE", "confident-downward"):
        table.add_column(col)
    hop = s["hop"]
    table.add_row("all", str(hop["n"]), f"{hop['accuracy']:.3f}", f"{hop['ece_after']:.3f}",
                  f"{s['confident_downward']:.3f}")
    for d, m in s["per_dataset"].items():
        table.add_row(Text(d), str(m["n"]), f"{m['accuracy']:.3f}", f"{m['ece']:.3f}", f"{m['confident_downward']:.3f}")
    out.print(table)
    if "silver_three_way" in s:
        m = s["silver_three_way"]
        out.print(f"three-way on the generator's labelled rows: accuracy {m['accuracy']:.3f} of {m['n']}")


@classifier_app.command("train")
def train_cmd(
    data: DataOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="where to write the artifact")] = Path("amsrag-classifier"),
    cap: Annotated[int, typer.Option("--cap", help="rows per data set (0: all)")] = 0,
    seed: Annotated[int, typer.Option("--seed")] = 13,
    method: Annotated[str, typer.Option("--calibration", help="temperature|platt|isotonic|none")] = "temperature",
    cache: CacheOpt = None,
    silver: SilverOpt = None,
    generator: Annotated[str | None, typer.Option(
        "--generator", help="the generator that made the --silver labels (recorded in the card)")] = None,
    implicit: Annotated[bool, typer.Option(
        "--implicit/--no-implicit", help="StrategyQA's implicit questions as multi_hop rows")] = True,
    implicit_weight: Annotated[float, typer.Option(
        "--implicit-weight", min=0.0,
        help="StrategyQA's share of the hop loss relative to another data set's")] = 1.0,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Train the hop head on the data sets' hop structure (and, with --silver, the knowledge head of the
    generator that made those labels), calibrate on the calibration mix, fit the query library's blend
    leave-one-data-set-out, write the artifact."""
    from amsrag.learn.classifier.evaluate import evaluate_classifier, summary
    from amsrag.learn.classifier.lodo import fit_library_settings, lodo_models
    from amsrag.learn.classifier.train import TrainConfig, train

    if silver and not generator:
        raise InputError("--silver labels describe one generator: name it with --generator (e.g. llamacpp)")
    config = TrainConfig(seed=seed, cap=cap or None, calibration=_method(method), implicit=implicit,
                         implicit_weight=implicit_weight)
    labelled, prep, encoder = _prepared(data, config.cap, seed, cache, silver, quiet, config.implicit)
    clf = train(labelled, prep, config, encoder.model_id, generator=generator)
    with progress_for(err, quiet) as progress, progress.task("leave-one-data-set-out heads",
                                                              len(labelled.datasets)) as advance:
        models = lodo_models(prep, config, progress=lambda _d: advance(1))
    clf.library_settings, _ = fit_library_settings(prep, models, config)
    clf.save(out_dir)
    s = summary(evaluate_classifier(clf, prep, "cal"))
    result = {"out": str(out_dir), "data_sha256": labelled.sha256, "rows": len(labelled.rows),
              "calibration": clf.meta["calibration"], "library_settings": asdict(clf.library_settings),
              "cal_split": s}
    if as_json:
        emit(result)
        return
    out.print(f"[green]wrote[/] {escape(str(out_dir))} (training data sha256 {labelled.sha256[:16]}…, "
              f"{len(labelled.rows)} rows; {labelled.held_out} held-out questions left out)", highlight=False)
    _print_summary(s, "calibration split")


MIN_CALIBRATION_QUESTIONS = 50


def _method(name: str) -> CalibrationMethod:
    from amsrag.calibration import CALIBRATION_METHODS

    if name not in CALIBRATION_METHODS:
        raise InputError(f"unknown calibration method {name!r}; use one of: {', '.join(CALIBRATION_METHODS)}")
    return name


def reviewed_hop_labels(index: Path | str) -> tuple[list[str], list[str], int]:
    """(questions, hop labels) of the index's reviewed items whose true class is one_hop or multi_hop, and how
    many reviewed items carry a true class at all (zero_hop ones are not hop labels)."""
    from contextlib import closing

    from amsrag.classify.library import HOP_LABELS
    from amsrag.review import open_review_queue

    with closing(open_review_queue(index)) as queue:
        labelled = queue.labelled()
    hop = [(q, c) for q, c in labelled if c in HOP_LABELS]
    return [q for q, _ in hop], [c for _, c in hop], len(labelled)


@classifier_app.command("calibrate")
def calibrate_cmd(
    index: Annotated[Path, typer.Option("--index", help="the index whose configuration stores the temperature")],
    qa_file: Annotated[Path | None, typer.Option("--qa", help="labelled questions: JSONL {question, hop} or any QA "
                                                 "file `index build` reads (hop from its data set)")] = None,
    reviews: Annotated[bool, typer.Option(
        "--reviews", help="the index's reviewed questions (`amsrag ops review`, the web UI's review page) with a true "
        "class one_hop or multi_hop; alone or with --qa")] = False,
    fmt: Annotated[str, typer.Option("--format", help="auto or a data set format")] = "auto",
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Refit the hop head's temperature on YOUR labelled questions (a few hundred) and store it in the index
    configuration: routing then acts on confidences calibrated on your own traffic."""
    import numpy as np

    from amsrag.calibration import ece, fit_temperature
    from amsrag.classify.features import features_batch
    from amsrag.classify.model import ComplexityClassifier
    from amsrag.learn.label import read_hop_labels
    from amsrag.store.open import open_index
    from amsrag.text.normalise import normalise_question

    if qa_file is None and not reviews:
        raise InputError("give the labelled questions: --qa FILE, --reviews (the index's reviewed questions), or both")
    questions: list[str] = []
    hops: list[str] = []
    n_reviewed = n_with_class = 0
    if reviews:  # first: a question both reviewed and in --qa keeps the reviewer's label
        questions, hops, n_with_class = reviewed_hop_labels(index)
        n_reviewed = len(questions)
    if qa_file is not None:
        seen = {normalise_question(q) for q in questions}
        for q, h in zip(*read_hop_labels(qa_file, fmt), strict=True):
            if normalise_question(q) not in seen:
                questions.append(q)
                hops.append(h)
    if len(questions) < MIN_CALIBRATION_QUESTIONS or len(set(hops)) < 2:
        where = []
        if reviews:
            where.append(f"{n_reviewed} from reviews ({n_with_class} reviewed items have a true class; zero_hop ones "
                         "do not count)")
        if qa_file is not None:
            where.append(f"{len(questions) - n_reviewed} from {qa_file}")
        have = ", ".join(f"{hops.count(h)} {h}" for h in sorted(set(hops))) or "none"
        raise InputError(f"{len(questions)} labelled questions ({'; '.join(where)}; {have}): a temperature needs at "
                         f"least {MIN_CALIBRATION_QUESTIONS}, with both one_hop and multi_hop"
                         + (f"; {MIN_CALIBRATION_QUESTIONS - len(questions)} more are needed"
                            if len(questions) < MIN_CALIBRATION_QUESTIONS else ""))
    with open_index(index) as idx:
        base = ComplexityClassifier.load(idx.config.classifier.artifact or None, encoder=idx.encoder)
        with progress_for(err, quiet) as progress, progress.task("embedding questions", len(questions)) as advance:
            vectors = idx.encoder.encode(questions, progress=advance)
        zh = base.hop.logits(vectors, features_batch(questions))
        y = np.array([h == "multi_hop" for h in hops], dtype=int)
        temperature = fit_temperature(zh, y)

        def calibration_error(p: np.ndarray) -> float:
            pred = (p >= 0.5).astype(int)
            return ece(np.where(pred == 1, p, 1 - p), pred == y)

        before = calibration_error(base.hop.calibrator.prob1(zh))
        after = calibration_error(1.0 / (1.0 + np.exp(-zh / temperature)))
        config = idx.config.model_copy(deep=True)
        config.classifier.hop_temperature = temperature
        idx.update_config(config)
    result = {"index": str(index), "questions": len(questions), "from_reviews": n_reviewed,
              "hop_temperature": temperature,
              "accuracy": float(np.mean((zh >= 0) == y)), "ece_before": before, "ece_after_in_sample": after}
    if as_json:
        emit(result)
        return
    out.print(f"[green]stored[/] hop temperature {temperature:.3f} in {escape(str(index))} ({len(questions)} "
              f"questions; hop accuracy {result['accuracy']:.3f}; ECE {before:.3f} -> {after:.3f} on these same "
              "questions)",
              highlight=False)


@classifier_app.command("evaluate")
def evaluate_cmd(
    model: ModelOpt = None,
    data: DataOpt = None,
    split: Annotated[str, typer.Option("--split", help="train|cal|test")] = "test",
    cache: CacheOpt = None,
    silver: SilverOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
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
    labelled, prep, _ = _prepared(data, config.cap, config.seed, cache, silver, quiet, config.implicit)
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
    from amsrag.pipeline.results import check_question

    if not path.is_file():
        raise InputError(f"{path}: no such file")
    questions = []
    for n, rec in iter_jsonl(path):
        q = rec.get("question") if isinstance(rec, dict) else rec
        if not isinstance(q, str) or not q.strip():
            raise InputError(f"{path}:{n}: expected an object with a non-empty string `question`")
        try:
            questions.append(check_question(q, _question_limit()))
        except InputError as exc:
            raise InputError(f"{path}:{n}: {exc}") from None
    return questions


def _question_limit() -> int:
    """The question length limit without an index: the default `serve.max_question_chars`."""
    from amsrag.config import ServeConfig

    return ServeConfig().max_question_chars


@classifier_app.command("predict")
def predict_cmd(
    question: Annotated[str | None, typer.Argument(help="the question")] = None,
    input_file: Annotated[Path | None, typer.Option("--input", help="JSONL file of {\"question\": ...}")] = None,
    model: ModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Label, class probabilities and alpha (calibrated confidence) per question."""
    from amsrag.classify.model import ComplexityClassifier
    from amsrag.pipeline.results import check_question

    if (question is None) == (input_file is None):
        raise InputError("give either a QUESTION or --input FILE.jsonl (not both)")
    questions = ([check_question(question, _question_limit())] if question is not None
                 else _read_jsonl_questions(input_file))  # type: ignore[arg-type]
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
        table.add_row(Text(q), p.label, f"{p.alpha:.3f}", *(f"{p.probs[c]:.3f}" for c in COMPLEXITIES))
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
    quiet: QuietOpt = False,
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
    from amsrag.store import EmbeddedIndex

    if match not in ("em", "f1"):
        raise InputError(f"--match must be em or f1, got {match!r}")
    sets = [load_qa(p, fmt=fmt, limit=limit) for p in qa_files]
    questions = [q for s in sets for q in s.questions if q.answers]
    if not questions:
        raise InputError(f"no questions with gold answers in {', '.join(map(str, qa_files))}: nothing to label")
    settings = LabelSettings(match=match)
    with tempfile.TemporaryDirectory(prefix="amsrag-label-") as tmp, progress_for(err, quiet) as progress:
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
    out.print(f"[green]wrote[/] {n} silver labels to {escape(str(out_file))} with generator {escape(name)}: "
              f"{summary['labels']} ({summary['by_dataset_fallback']} by the data set's hop count; right answers "
              f"per strategy {summary['correct']})", highlight=False)
