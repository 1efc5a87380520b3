"""`amsrag train route tune`: thresholds by expected cost, per-class routes, the CA-RRF priors and the MMR gate,
frozen in the index config. `amsrag train route learn` / `train route library`: the index's query library (labelled
queries whose nearest neighbours vote on a new query's hop structure)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from amsrag.cli.common import FormatOpt, IndexOpt, JsonOpt, QuietOpt, emit, err, out
from amsrag.errors import InputError

if TYPE_CHECKING:
    from amsrag.classify.library import QueryLibrary

route_app = typer.Typer(no_args_is_help=True, help="Routing: tune thresholds, routes, fusion priors and the MMR gate; "
                                                   "the query library.")


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
    quiet: QuietOpt = False,
) -> None:
    """Grid-search (theta_high, theta_low) under the cost matrix, choose each class's routes, fit the CA-RRF
    priors (beta, k) and the MMR gate on the calibration questions; saves them all."""
    from amsrag.ingest import load_qa
    from amsrag.learn.router import calibration_queries, tune, write_curve
    from amsrag.pipeline import Engine
    from amsrag.progress import progress_for
    from amsrag.store.open import is_postgres_url

    questions = [q for path in qa for q in load_qa(path, fmt=fmt, limit=limit).questions]
    with Engine.open(index) as engine:
        with progress_for(err, quiet) as progress, progress.task("calibration queries", len(questions)) as adv:
            cal = calibration_queries(engine, questions, adv)
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


@route_app.command("taxonomy")
def route_taxonomy(
    index: IndexOpt,
    labelled: Annotated[Path, typer.Option("--questions", help="JSONL of {question, class}: class text, aggregation "
                                                               "or structured (or a hop class, counted as text)")],
    as_json: JsonOpt = False,
) -> None:
    """Fit the taxonomy's min_confidence thresholds on your own labelled questions, over this index (its
    tables and themes), under the task cost matrix `router.taxonomy.costs`; saves them in the index config."""
    import json

    import numpy as np

    from amsrag.pipeline import Engine
    from amsrag.route.taxonomy import task_cost, tune_min_confidence
    from amsrag.types import COMPLEXITIES, TASK_KINDS

    if not labelled.is_file():
        raise InputError(f"{labelled}: no such file (JSONL of {{\"question\": ..., \"class\": ...}})")
    try:
        text = labelled.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{labelled}: not UTF-8 text (byte {exc.start})") from None
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            question, kind = str(rec["question"]), str(rec["class"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"{labelled}: line {n}: expected {{\"question\": ..., \"class\": ...}} ({exc})") from None
        kind = "text" if kind in COMPLEXITIES else kind
        if kind not in TASK_KINDS:
            raise InputError(f"{labelled}: line {n}: class {kind!r} is not one of text, aggregation, structured")
        rows.append((question, TASK_KINDS.index(kind)))
    if len(rows) < 10:
        raise InputError(f"{labelled}: {len(rows)} labelled questions; at least 10 are needed to fit thresholds")
    with Engine.open(index) as engine:
        probs = []
        for question, _ in rows:
            vec = engine.index.encoder.encode_query(question)
            decision, _ = engine.taxonomy.decide(question, vec, engine.complexity_of(question, vec))
            task = decision.task["probs"]
            probs.append([task.get(k, 0.0) for k in TASK_KINDS])
        p, y = np.array(probs), np.array([k for _, k in rows])
        cfg = engine.config.model_copy(deep=True)
        before = task_cost(p, y, engine.taxonomy.thresholds, cfg.router.taxonomy.costs)
        fitted = tune_min_confidence(p, y, cfg.router.taxonomy.costs, cfg.router.taxonomy.task_classes)
        cfg.router.taxonomy.min_confidence.update(fitted)
        engine.index.update_config(cfg)
    summary = {"questions": len(rows), "min_confidence": fitted, "mean_cost_before": round(before, 4),
               "mean_cost_after": round(task_cost(p, y, fitted, cfg.router.taxonomy.costs), 4)}
    if as_json:
        emit(summary)
    else:
        out.print(summary)


# ---------------------------------------------------------------------------- the query library
def _library_summary(library: QueryLibrary) -> dict[str, Any]:
    return {"size": len(library), "counts": library.counts()}


def _print_counts(location: str, counts: dict[str, int]) -> None:
    table = Table(title=Text(f"query library of {location}"), show_header=False)
    for key, n in counts.items():
        table.add_row(Text(key), str(n))
    out.print(table)


REVIEW_SOURCE = "review"


@route_app.command("learn")
def route_learn(
    index: IndexOpt,
    file: Annotated[Path | None, typer.Argument(help="JSONL rows {question, hop: one_hop|multi_hop} (or "
                                                     "`complexity`, `label`), or a QA file whose hop structure is "
                                                     "known")] = None,
    reviews: Annotated[bool, typer.Option(
        "--reviews", help="also the index's reviewed questions with a true class one_hop or multi_hop (source "
        f"`{REVIEW_SOURCE}`)")] = False,
    source: Annotated[str | None, typer.Option(
        "--source", help="where FILE's labels came from (default: the file name)")] = None,
    fmt: FormatOpt = "auto",
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Add labelled queries to the index's query library (embedded as the classifier reads them); a question
    stored with another label is relabelled: the latest confirmation wins (reviews are added after FILE)."""
    from amsrag.classify.library import LibraryAddReport
    from amsrag.cli.classifier import reviewed_hop_labels
    from amsrag.embed.factory import routing_encoder_for
    from amsrag.learn.label import read_hop_labels
    from amsrag.progress import progress_for
    from amsrag.store.open import open_index

    if file is None and not reviews:
        raise InputError("give labelled queries: FILE, --reviews (the index's reviewed questions), or both")
    batches: list[tuple[str | None, str, list[str], list[str]]] = []  # (file, source, questions, hops)
    if file is not None:  # every row checked before anything is embedded or stored
        name = source if source is not None else file.name
        if not name.strip():
            raise InputError("--source must be a non-empty name")
        batches.append((str(file), name, *read_hop_labels(file, fmt)))
    if reviews:
        questions, hops, n_with_class = reviewed_hop_labels(index)
        if not questions:
            raise InputError(f"no reviewed question of {index} has a true class one_hop or multi_hop "
                             f"({n_with_class} reviewed items have a true class): review some first "
                             f"(`amsrag ops review mark ID --verdict ... --class ...` or the web UI's /review page)")
        batches.append((None, REVIEW_SOURCE, questions, hops))
    reports: list[tuple[str | None, str, int, LibraryAddReport]] = []
    with open_index(index) as idx:
        encoder = routing_encoder_for(idx.config.embedding, idx.encoder)
        library = idx.query_library().copy()
        for path, name, questions, hops in batches:
            what = "library: embed" if path else "library: embed reviews"
            with progress_for(err, quiet) as progress, progress.task(what, len(questions)) as adv:
                vectors = encoder.encode(questions, adv)
            reports.append((path, name, len(questions), library.add(questions, hops, vectors, name)))
        if any(r.added or r.relabelled for _, _, _, r in reports):
            idx.save_query_library(library)
        location = idx.location
    for path, name, received, report in reports:
        summary = {"index": location, "file": path, "source": name, "received": received,
                   **report.to_dict(), **_library_summary(library)}
        if as_json:
            emit(summary)
            continue
        counts = library.counts()
        what = escape(path) if path else "the reviews"
        out.print(f"[green]learned {received}[/] labelled queries from {what}: {report.added} added, "
                  f"{report.relabelled} relabelled, {report.unchanged} unchanged; the library of {escape(location)} "
                  f"holds {len(library)} ({counts['one_hop']} one_hop, {counts['multi_hop']} multi_hop)",
                  highlight=False)


@route_app.command("library")
def route_library(index: IndexOpt, as_json: JsonOpt = False) -> None:
    """How many labelled queries the index's query library holds, by hop label and by source."""
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        library = idx.query_library()
        location = idx.location
    if as_json:
        emit({"index": location, **_library_summary(library)})
        return
    _print_counts(location, {"queries": len(library), **library.counts()})
