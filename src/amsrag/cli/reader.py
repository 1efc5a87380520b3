"""`amsrag train reader train|calibrate|evaluate`: the trained span reader (the `extractive` generator)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from amsrag.cli.common import DataOpt, JsonOpt, emit, err, out
from amsrag.errors import InputError

reader_app = typer.Typer(no_args_is_help=True, help="Train and evaluate the span reader (the extractive generator).")

ModelOpt = Annotated[Path | None, typer.Option("--model", help="reader folder (default: the one shipped in amsrag)")]
SeedOpt = Annotated[int, typer.Option("--seed", help="split and training seed")]


def _log(msg: str) -> None:
    err.print(Text(f"[{time.strftime('%H:%M:%S')}] {msg}"), highlight=False)


def _data(data: Path | None) -> Path:
    from amsrag.ingest.dataset_facts import default_data_dir

    d = data or default_data_dir()
    if not d.is_dir():
        raise InputError(f"{d}: data folder not found (pass --data or set $AMSRAG_DATA)")
    return d


def _held_out(data: Path) -> set[str]:
    from amsrag.evaluate.builder import held_out_questions

    return held_out_questions(data)


def _summary_table(res: dict[str, Any]) -> None:
    t = Table(title=f"reader on the held-out test split (threshold {res['threshold']})")
    for col in ("setting", "dataset", "n", "EM", "F1", "answered", "precision of answered"):
        t.add_column(col)
    for setting, by_ds in res["int8"].items():
        if not isinstance(by_ds, dict):
            continue
        for ds, m in by_ds.items():
            if isinstance(m, dict) and "f1" in m:
                prec = m.get("precision_answered")
                t.add_row(Text(setting), Text(ds), str(m.get("n", "")), f"{m['em']:.3f}", f"{m['f1']:.3f}",
                          f"{m.get('answered', 0):.3f}", "-" if prec is None else f"{prec:.3f}")
    out.print(t)
    lat = res.get("latency_5_passages") or {}
    if lat:
        out.print(f"5 passages, 1 thread: p50 {lat.get('p50_ms')} ms, p95 {lat.get('p95_ms')} ms; "
                  f"load {res.get('load_seconds')} s")


@reader_app.command("train")
def train_cmd(
    out_dir: Annotated[Path, typer.Option("--out", help="run folder: model, card, splits, evaluation")],
    data: DataOpt = None,
    minutes: Annotated[float, typer.Option("--minutes", help="wall-clock training budget (lr decays over it)")] = 55.0,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="stop after this many steps")] = None,
    seed: SeedOpt = 13,
    lr: Annotated[float, typer.Option("--lr")] = 1e-4,
    batch_size: Annotated[int, typer.Option("--batch-size")] = 16,
    bf16: Annotated[bool, typer.Option("--bf16/--no-bf16", help="bf16 autocast")] = True,
    curve_every: Annotated[float, typer.Option("--curve-every", help="minutes between learning-curve points")] = 10.0,
    cal_per_dataset: Annotated[int, typer.Option("--cal-per-dataset")] = 120,
    eval_per_dataset: Annotated[int, typer.Option("--eval-per-dataset")] = 200,
) -> None:
    """Fine-tune MiniLM (needs the `train` extra: torch, transformers), export int8 ONNX, calibrate, evaluate.

    The evaluation benchmark's and the demo's questions are held out of every split."""
    if minutes <= 0:
        raise InputError(f"--minutes must be positive, got {minutes}")
    import importlib.util

    missing = [m for m in ("torch", "transformers", "onnx") if importlib.util.find_spec(m) is None]
    if missing:  # an optional extra: never needed at run time
        raise InputError(f"training needs the train extra (pip install 'amsrag[train]'); missing: {', '.join(missing)}")
    from amsrag.learn.reader.run import calibrate, evaluate
    from amsrag.learn.reader.train import train

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    d = _data(data)
    held = _held_out(d)
    train(d, out_dir, minutes=minutes, seed=seed, lr=lr, batch_size=batch_size, bf16=bf16, curve_every=curve_every,
          max_steps=max_steps, log=_log, exclude=held)
    _log(f"calibration: {json.dumps(calibrate(out_dir, d, seed, cal_per_dataset, held))}")
    res = evaluate(out_dir, d, seed, eval_per_dataset, out_dir / "eval.json", fp32=True, exclude=held)
    _summary_table(res)


@reader_app.command("calibrate")
def calibrate_cmd(
    model: Annotated[Path, typer.Option("--model", help="reader folder whose card gets the calibration")],
    data: DataOpt = None,
    seed: SeedOpt = 13,
    per_dataset: Annotated[int, typer.Option("--per-dataset")] = 120,
    as_json: JsonOpt = False,
) -> None:
    """Refit the confidence and the abstention threshold on the calibration split; written into the card."""
    from amsrag.generate.reader_model import SpanReader
    from amsrag.learn.reader.run import calibrate

    d = _data(data)
    SpanReader.load(model)  # a missing or broken artifact fails before the data are read
    cal = calibrate(model, d, seed, per_dataset, _held_out(d))
    if as_json:
        emit(cal)
    else:
        out.print(f"threshold {cal['threshold']} (expected F1 {cal['expected_f1_at_threshold']}); "
                  f"coefficients {cal['coef']}")


@reader_app.command("evaluate")
def evaluate_cmd(
    model: ModelOpt = None,
    data: DataOpt = None,
    seed: SeedOpt = 13,
    per_dataset: Annotated[int, typer.Option("--per-dataset", help="test questions per data set")] = 200,
    fp32: Annotated[bool, typer.Option("--fp32", help="also score reader-fp32.onnx of a training folder")] = False,
    report: Annotated[Path | None, typer.Option("--report", help="also write the results as JSON")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Score a reader on the held-out test split: gold passages, gold + 3 distractors, abstention, latency."""
    from amsrag.generate.reader_model import default_directory
    from amsrag.learn.reader.run import evaluate

    if per_dataset < 1:
        raise InputError(f"--per-dataset must be positive, got {per_dataset}")
    from amsrag.generate.reader_model import SpanReader

    d = _data(data)
    SpanReader.load(model or default_directory())  # a missing or broken artifact fails before the data are read
    res = evaluate(model or default_directory(), d, seed, per_dataset, report, fp32=fp32, exclude=_held_out(d))
    slim = {k: v for k, v in res.items() if k != "records"}
    if as_json:
        emit(slim)
    else:
        _summary_table(slim)


@reader_app.command("calibrate-quote")
def calibrate_quote_cmd(
    model: ModelOpt = None,
    data: DataOpt = None,
    seed: SeedOpt = 13,
    per_dataset: Annotated[int, typer.Option("--per-dataset", help="calibration and test items per data set")] = 100,
    wrong_cost: Annotated[float, typer.Option("--wrong-cost", min=0.0, help="what a sentence answer without the "
                                              "answer costs against an abstention (a right one scores 1)")] = 1.0,
    reads: Annotated[Path | None, typer.Option("--reads", help="JSON file of the reads: written after reading, "
                                               "reused when it exists (same seed and size)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit P(the quoted sentence holds the answer) and the sentence-answer threshold; written into the card as
    `quote_calibration` (the shipped reader's card by default)."""
    from amsrag.generate.reader_model import CARD_FILE, SpanReader, default_directory
    from amsrag.learn.reader.quote import calibrate_quotes
    from amsrag.learn.reader.run import load_items

    folder = model or default_directory()
    d = _data(data)
    reader = SpanReader.load(folder)
    cal = calibrate_quotes(reader, load_items(folder, d, seed, _held_out(d)), seed, per_dataset, reads, wrong_cost)
    cal["command"] = (f"amsrag train reader calibrate-quote --per-dataset {per_dataset} --seed {seed} "
                      f"--wrong-cost {wrong_cost:g}")
    card = json.loads((folder / CARD_FILE).read_text(encoding="utf-8"))
    card["quote_calibration"] = cal
    (folder / CARD_FILE).write_text(json.dumps(card, indent=1), encoding="utf-8")
    if as_json:
        emit(cal)
    else:
        out.print(f"threshold {cal['threshold']}; test {cal['test']}; coefficients {cal['coef']}")
