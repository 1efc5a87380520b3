"""`amsrag route tune`: thresholds by expected cost, per-class routes, the CA-RRF priors and the MMR gate, frozen in
the index config."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from amsrag.cli.common import FormatOpt, IndexOpt, JsonOpt, emit, err, out

route_app = typer.Typer(no_args_is_help=True, help="Routing: tune thresholds, routes, fusion priors and the MMR gate.")


@route_app.command("tune")
def route_tune(
    index: IndexOpt,
    qa: Annotated[list[Path], typer.Option("--qa", help="QA files with complexity (and gold passages for beta)")],
    fmt: FormatOpt = "auto",
    limit: Annotated[int | None, typer.Option("--limit", help="at most this many questions per file")] = None,
    miss_cap: Annotated[float, typer.Option("--miss-cap", help="max share of multi_hop routed cheaper")] = 0.05,
    curve_file: Annotated[Path | None, typer.Option(
        "--curve", help="where to write the searched curve (default: DIR/route-tune.json; none for a URL)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Grid-search (theta_high, theta_low) under the cost matrix, choose each class's routes, fit the CA-RRF
    priors (beta, k) and the MMR gate on the calibration questions; saves them all."""
    from tqdm import tqdm

    from amsrag.ingest import load_qa
    from amsrag.pipeline import Engine
    from amsrag.route.tune import calibration_queries, tune, write_curve
    from amsrag.store.open import is_postgres_url

    questions = [q for path in qa for q in load_qa(path, fmt=fmt, limit=limit).questions]
    with Engine.open(index) as engine:
        with tqdm(total=len(questions), desc="calibration queries", file=sys.stderr) as bar:
            cal = calibration_queries(engine, questions, bar.update)
        tuning = tune(engine.config, cal, miss_cap, engine.generator_knows, engine.index.vectors_for_rows)
        engine.index.update_config(tuning.config)
        if curve_file is None and not is_postgres_url(index):
            curve_file = Path(index) / "route-tune.json"
        tuned = tuning.summary()
        if curve_file is not None:
            write_curve(curve_file, tuning.best, tuning.curve, tuned["beta_by_class"], len(cal), tuned)
    best = tuning.best
    summary = {"queries": len(cal), **tuned, "miss_cap_met": best.miss_rate <= miss_cap,
               "curve": str(curve_file) if curve_file else None}
    if as_json:
        emit(summary)
        return
    out.print(summary)
    if not summary["miss_cap_met"]:
        err.print(f"[yellow]warning:[/] no threshold pair keeps the multi_hop miss rate within {miss_cap}; "
                  f"the pair with the least expected cost was saved")
