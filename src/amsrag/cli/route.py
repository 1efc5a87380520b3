"""`amsrag route tune`: thresholds by expected cost and the CA-RRF priors, frozen in the index config."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from amsrag.cli.common import FormatOpt, IndexOpt, JsonOpt, emit, err, out

route_app = typer.Typer(no_args_is_help=True, help="Routing: tune thresholds and priors.")


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
    """Grid-search (theta_high, theta_low) under the cost matrix and fit the CA-RRF priors; saves both."""
    from tqdm import tqdm

    from amsrag.ingest import load_qa
    from amsrag.pipeline import Engine
    from amsrag.route.tune import calibration_queries, fit_beta, tune_thresholds, write_curve
    from amsrag.store.open import is_postgres_url

    questions = [q for path in qa for q in load_qa(path, fmt=fmt, limit=limit).questions]
    with Engine.open(index) as engine:
        with tqdm(total=len(questions), desc="calibration queries", file=sys.stderr) as bar:
            cal = calibration_queries(engine, questions, bar.update)
        cfg = engine.config
        best, curve = tune_thresholds(cal, cfg.router, miss_cap, engine.generator_knows)
        beta = fit_beta(cal)
        new = cfg.model_copy(deep=True)
        new.router.theta_high, new.router.theta_low = best.theta_high, best.theta_low
        new.fusion.beta_by_class = beta
        engine.index.update_config(new)
        if curve_file is None and not is_postgres_url(index):
            curve_file = Path(index) / "route-tune.json"
        if curve_file is not None:
            write_curve(curve_file, best, curve, beta, len(cal))
    summary = {"queries": len(cal), "theta_high": best.theta_high, "theta_low": best.theta_low,
               "expected_loss": round(best.loss, 4), "multi_hop_miss_rate": round(best.miss_rate, 4),
               "route_mix": best.route_mix, "miss_cap_met": best.miss_rate <= miss_cap, "beta_by_class": beta,
               "curve": str(curve_file) if curve_file else None}
    if as_json:
        emit(summary)
        return
    out.print(summary)
    if not summary["miss_cap_met"]:
        err.print(f"[yellow]warning:[/] no threshold pair keeps the multi_hop miss rate within {miss_cap}; "
                  f"the pair with the least expected cost was saved")
