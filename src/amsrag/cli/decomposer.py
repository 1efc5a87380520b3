"""`amsrag train decomposer train|plan`: the question decomposer (plans for multi-hop answering)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from amsrag.cli.common import DataOpt, JsonOpt, emit, out
from amsrag.errors import InputError

decomposer_app = typer.Typer(no_args_is_help=True, help="Train the question decomposer and show its plans.")


@decomposer_app.command("train")
def train_cmd(
    out_dir: Annotated[Path, typer.Option("--out", help="folder for decomposer.npz and decomposer.json")],
    data: DataOpt = None,
    exclude: Annotated[list[Path] | None, typer.Option(
        "--exclude", help="QA JSONL files whose questions are also left out (an eval benchmark's queries)")] = None,
) -> None:
    """Fit the type head, the tag head and the comparison template bank on the public decompositions
    (evaluated-benchmark and demo questions left out), with held-out and leave-one-data-set-out metrics."""
    from amsrag.ingest.dataset_facts import default_data_dir
    from amsrag.learn.decomposer.train import train

    d = data or default_data_dir()
    if not d.is_dir():
        raise InputError(f"{d}: data folder not found (pass --data or set $AMSRAG_DATA)")
    for path in exclude or []:
        if not path.is_file():
            raise InputError(f"{path}: no such file (--exclude)")
    from amsrag.config import cache_root

    card = train(d, out_dir, exclude=tuple(exclude or []), states_cache=cache_root() / "decomposer-states.npz")
    m = card["metrics"]
    test = m["test"]
    out.print(f"test: type accuracy {test['type_accuracy']:.3f}, multi-step {test['multi_step_accuracy']:.3f}, "
              f"ECE {test['ece']:.3f}; spans {m['spans_test']}")
    for left, r in m["leave_one_dataset_out"].items():
        if r.get("n"):
            out.print(f"left out {left}: type accuracy {r['type_accuracy']:.3f}, multi-step "
                      f"{r['multi_step_accuracy']:.3f}")
        else:
            out.print(f"left out {left}: {r.get('note')}")
    out.print(f"wrote {out_dir}")


@decomposer_app.command("plan")
def plan_cmd(
    question: Annotated[str, typer.Argument(help="the question")],
    model: Annotated[Path | None, typer.Option("--model", help="decomposer folder (default: the shipped one)")] = None,
    json_out: JsonOpt = False,
) -> None:
    """The plan the decomposer makes of QUESTION."""
    from amsrag.decompose.tagger import TaggerDecomposer

    plan = TaggerDecomposer.load(model).decompose(question)
    if json_out:
        emit({"question": question, "plan": plan.to_dict()})
        return
    out.print(json.dumps(plan.to_dict(), indent=1, ensure_ascii=False))


@decomposer_app.command("calibrate")
def calibrate_cmd(
    index: Annotated[Path, typer.Option("--index", help="index the calibration questions are answered over")],
    qa: Annotated[Path, typer.Option("--qa", help="amsrag QA JSONL, disjoint from evaluated questions (an eval "
                                     "benchmark's calibration.jsonl)")],
    out_dir: Annotated[Path, typer.Option("--out", help="folder for chain.json (copy it beside the decomposer)")],
    coverage: Annotated[float, typer.Option("--coverage", help="share of each plan type's questions answered")] = 0.9,
) -> None:
    """Calibrate the chain's confidence end to end and set the abstention threshold per plan type."""
    from amsrag.learn.decomposer.calibrate import calibrate

    if not qa.is_file():
        raise InputError(f"{qa}: no such file (--qa)")
    if not 0 < coverage <= 1:
        raise InputError(f"--coverage must be in (0, 1], got {coverage}")
    card = calibrate(index, qa, out_dir, coverage)
    out.print(json.dumps(card["metrics"], indent=1))
    out.print(f"thresholds {card['thresholds']}; wrote {out_dir}")
