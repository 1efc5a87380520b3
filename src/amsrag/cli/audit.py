"""`amsrag train audit train|check`: the citation-support audit after generation."""

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

audit_app = typer.Typer(no_args_is_help=True, help="Train and run the citation-support audit of answers.")


def _table(report: dict[str, Any]) -> None:
    t = Table(title="citation-support audit (held-out test split, by question)")
    for col in ("model", "rows", "n", "supported", "ROC-AUC", "ECE", "Brier", "flag threshold", "flagged",
                "flag precision"):
        t.add_column(col)
    for head in ("full", "text"):
        rep = report[head]["test"]
        for name, m in [("all", rep["metrics"]), *rep["by_dataset"].items()]:
            flag = rep["flag"]
            t.add_row(Text(head), Text(name), str(m["n"]), str(m["positives"]),
                      *(f"{m[k]:.3f}" if m.get(k) is not None else "-" for k in ("roc_auc", "ece", "brier")),
                      f"{flag['threshold']:.2f}" if name == "all" else "",
                      f"{flag['flagged']:.3f}" if name == "all" else "",
                      f"{flag['precision']:.3f}" if name == "all" and flag["precision"] is not None else "")
    out.print(t)


@audit_app.command("train")
def train_cmd(
    data: DataOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="where to write the artifact")] = Path("amsrag-audit"),
    seed: Annotated[int, typer.Option("--seed")] = 13,
    model: Annotated[str, typer.Option("--model", help="gbdt|logistic")] = "gbdt",
    calibration: Annotated[str, typer.Option("--calibration", help="platt|isotonic|temperature|none")] = "platt",
    cache: Annotated[Path | None, typer.Option("--cache", help="feature cache directory")] = None,
    report_file: Annotated[Path | None, typer.Option("--report", help="also write the full report as JSON")] = None,
    docs: Annotated[Path | None, typer.Option(
        "--docs", help="folder of the documentation corpora (benchmarks/docs_qa/README.md): adds the rows of "
                       "the documentation sets of amsrag.learn.audit.doc_rows to the train / cal splits")] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Build (question, answer, cited passages) rows from the QA data, train and calibrate the support
    classifier, choose the flag threshold on the calibration split, report held-out metrics."""
    from amsrag.config import cache_root
    from amsrag.correct.evaluator import EVAL_CALIBRATIONS
    from amsrag.generate.reader_model import SpanReader
    from amsrag.ingest.dataset_facts import default_data_dir
    from amsrag.learn.audit.data import build_rows
    from amsrag.learn.audit.doc_rows import DOC_SET_NAMES
    from amsrag.learn.audit.train import AuditTrainConfig, train
    from amsrag.progress import progress_for

    if calibration not in EVAL_CALIBRATIONS:
        raise InputError(f"unknown calibration method {calibration!r}; use one of: {', '.join(EVAL_CALIBRATIONS)}")
    if model not in ("gbdt", "logistic"):
        raise InputError(f"unknown model {model!r}; use gbdt or logistic")
    config = AuditTrainConfig(seed=seed, model=model, calibration=calibration,
                              doc_sets=DOC_SET_NAMES if docs is not None else ())
    data_dir = data or default_data_dir()
    reader = SpanReader.load()
    with progress_for(err, quiet) as progress, progress.task("audit rows (reader + features)", None) as advance:
        rows = build_rows(data_dir, config.data_config(), reader, cache or cache_root() / "audit-features",
                          lambda i, n: advance(1), docs)
    support_model, report = train(rows, config, data_dir)
    support_model.save(out_dir)
    if report_file is not None:
        report_file.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if as_json:
        emit({"out": str(out_dir), "data_sha256": rows.sha256, "rows": report["rows"],
              **{h: {"test": {k: v for k, v in report[h]["test"]["metrics"].items() if k != "reliability"},
                     "flag": report[h]["test"]["flag"]} for h in ("full", "text")}})
        return
    out.print(f"[green]wrote[/] {escape(str(out_dir))} (training rows sha256 {rows.sha256[:16]}…)", highlight=False)
    _table(report)


@audit_app.command("check")
def check_cmd(
    query: Annotated[str, typer.Argument(help="the question")],
    answer: Annotated[str, typer.Option("--answer", help="the answer to audit")],
    input_file: Annotated[Path, typer.Option("--passages", help="JSONL of the cited {\"id\", \"title\", \"text\"}")],
    multi_hop: Annotated[bool, typer.Option("--multi-hop", help="a multi-hop question (the bridge feature)")] = False,
    model: Annotated[Path | None, typer.Option("--model", help="artifact directory (default: the shipped one)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Audit one answer against the passages it cites: P(supported) and the flag."""
    from amsrag.audit import SupportAuditor
    from amsrag.audit.model import SupportModel
    from amsrag.config import ServeConfig
    from amsrag.ingest.readers import iter_jsonl
    from amsrag.pipeline.results import check_question
    from amsrag.types import Passage

    query = check_question(query, ServeConfig().max_question_chars)
    if not answer.strip():
        raise InputError("--answer must not be empty")
    if not input_file.is_file():
        raise InputError(f"{input_file}: no such file")
    passages = []
    for n, rec in iter_jsonl(input_file):
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str) or not rec["text"].strip():
            raise InputError(f"{input_file}:{n}: expected an object with a non-empty string `text`")
        passages.append(Passage(str(rec.get("id", n)), rec["text"], str(rec.get("title", ""))))
    if not passages:
        raise InputError(f"{input_file}: no passages")
    verdict = SupportAuditor(SupportModel.load(model)).audit(query, answer, passages, multi_hop)
    if as_json:
        emit({"query": query, "answer": answer, **verdict.to_dict()})
        return
    colour = "red" if verdict.flagged else "green"
    out.print(f"[{colour}]{'flagged' if verdict.flagged else 'supported'}[/]: support {verdict.support:.3f} "
              f"(threshold {verdict.threshold:.2f}, features from {verdict.source})", highlight=False)
