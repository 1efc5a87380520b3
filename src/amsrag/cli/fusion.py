"""`amsrag train fusion train`: the learned fuser (LightGBM lambdarank over fused candidates) and the expert memory."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from amsrag.cli.common import DataOpt, JsonOpt, QuietOpt, emit, err, out
from amsrag.errors import InputError

fusion_app = typer.Typer(no_args_is_help=True, help="Train the learned fuser and the expert weights.")


def _log(msg: str) -> None:
    err.print(Text(f"[{time.strftime('%H:%M:%S')}] {msg}"), highlight=False)


@fusion_app.command("train")
def fusion_train(
    out_dir: Annotated[Path, typer.Option("--out", help="artifact folder to write (fusion.txt, fusion.json, "
                                          "experts.npz); src/amsrag/data/fusion is the shipped one")],
    data: DataOpt = None,
    per_group: Annotated[int, typer.Option("--per-group", min=10, help="training questions per data set")] = 700,
    seed: Annotated[int, typer.Option("--seed", help="split and LightGBM seed")] = 13,
    rounds: Annotated[int, typer.Option("--rounds", min=10, max=5000, help="boosting rounds")] = 100,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Train on questions of ../shared/data disjoint from every evaluated question, over the eval corpus."""
    from amsrag.ingest.dataset_facts import default_data_dir
    from amsrag.learn.fusion.run import train_fusion
    from amsrag.learn.fusion.train import TrainSettings
    from amsrag.progress import progress_for

    data_dir = data or default_data_dir()
    if not data_dir.is_dir():
        raise InputError(f"{data_dir}: data folder not found (pass --data or set $AMSRAG_DATA)")
    with progress_for(err, quiet) as progress:
        summary = train_fusion(data_dir, out_dir, per_group, TrainSettings(seed=seed, rounds=rounds), progress, _log)
    if as_json:
        emit(summary)
        return
    out.print(summary)
