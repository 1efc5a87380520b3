"""`amsrag ops monitor report|baseline`: what the query log says about the answers, and drift of the routing."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.text import Text

from amsrag.cli.common import IndexOpt, JsonOpt, QuietOpt, emit, err, out
from amsrag.cli.querylog import SinceOpt, UntilOpt
from amsrag.errors import InputError
from amsrag.progress import progress_for

monitor_app = typer.Typer(no_args_is_help=True, help="Monitoring over the query log: the proxy signals, drift of "
                                                     "the routing against a reference, and what to do.")

WindowOpt = Annotated[int | None, typer.Option(
    "--window", min=20, help="routed answers per drift window (default: [monitor] drift_window, 200)")]
ThresholdOpt = Annotated[float | None, typer.Option(
    "--threshold", min=0.01, help="PSI at or above which drift alarms (default: [monitor] drift_threshold, 0.25)")]


def _times(since: str | None, until: str | None):
    from amsrag.querylog.entry import parse_time

    start, end = (parse_time(t) if t else None for t in (since, until))
    if start is not None and end is not None and start >= end:
        raise InputError(f"--since {since} is not before --until {until}: the range is empty")
    return start, end


@monitor_app.command("report")
def monitor_report(
    index: IndexOpt,
    out_dir: Annotated[Path, typer.Option("--out", help="directory for report.md and the PNG figures")],
    since: SinceOpt = None,
    until: UntilOpt = None,
    window: WindowOpt = None,
    threshold: ThresholdOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Markdown report and PNG figures over the query log: the five proxy signals over time, citation support
    by route, alpha and route mix against the drift reference, drift PSI over rolling windows, the verdict."""
    from amsrag.monitor.drift import classifier_identity, reference_for_index, shipped_reference_path
    from amsrag.monitor.report import build_report, write_report
    from amsrag.querylog import open_query_log
    from amsrag.querylog.open import index_config

    start, end = _times(since, until)
    config = index_config(index)
    band = (config.monitor.gray_zone_low, config.monitor.gray_zone_high)
    window = window if window is not None else config.monitor.drift_window
    threshold = threshold if threshold is not None else config.monitor.drift_threshold
    with closing(open_query_log(index, config.query_log)) as qlog:
        reference, ref_path = reference_for_index(index)
        total = qlog.count(start, end)
        with progress_for(err, quiet) as progress, progress.task("reading the query log", total) as advance:
            report = build_report(qlog.iter(start, end), reference, band, window, threshold, str(index), advance)
    notes = []
    if ref_path == shipped_reference_path():
        notes.append("the index has no drift reference of its own, so the one shipped with amsrag is used (the "
                     "classifier's calibration mix of seven QA data sets); take one from your own traffic with "
                     f"`amsrag ops monitor baseline --index {index} --questions FILE` (or `--from-log`)")
    ours = classifier_identity(config.classifier)
    if reference.classifier and reference.classifier != ours:
        notes.append(f"the reference was taken with another classifier ({reference.classifier}; the index routes "
                     f"with {ours}): rebuild it with `amsrag ops monitor baseline`")
    if tuple(reference.gray_zone) != band:
        notes.append(f"the reference's gray zone {reference.gray_zone[0]:g}–{reference.gray_zone[1]:g} differs from "
                     f"[monitor] {band[0]:g}–{band[1]:g}: the gray-zone PSI compares different bands")
    report["reference"]["path"] = str(ref_path)
    report["reference_note"] = "; ".join(notes)
    report["since"], report["until"] = since, until
    files = write_report(report, out_dir)
    report["files"] = [str(f) for f in files]
    if as_json:
        emit({k: v for k, v in report.items() if k != "series"})
        return
    v = report["verdict"]
    if not report["entries"]:
        out.print(Text(f"no entries in the query log's range; wrote {files[0]}"), highlight=False)
        return
    head = "[bold red]DRIFT[/]" if v["alarm"] else "[green]no drift[/]" if v["ready"] else "[yellow]no verdict[/]"
    out.print(f"{report['entries']} answers ({report['routed']} routed): {head}; PSI alpha {v['psi']['alpha']:.3f}, "
              f"route {v['psi']['route']:.3f}, gray zone {v['psi']['gray_zone']:.3f} (alarm at {threshold:g})",
              highlight=False)
    out.print(Text(v["recommendation"]), highlight=False, soft_wrap=True)
    if report["reference_note"]:
        err.print("[yellow]note:[/] " + escape(report["reference_note"]), highlight=False, soft_wrap=True)
    out.print(Text(f"wrote {len(files)} files to {out_dir}: " + ", ".join(f.name for f in files)), highlight=False)


@monitor_app.command("baseline")
def monitor_baseline(
    index: IndexOpt,
    questions: Annotated[Path | None, typer.Option(
        "--questions", help="questions of the traffic the classifier is trusted on: a QA file, a JSONL of "
        "{\"question\": ...} or a text file, one per line")] = None,
    from_log: Annotated[bool, typer.Option("--from-log", help="take the reference from the query log instead")]
        = False,
    since: SinceOpt = None,
    until: UntilOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Store the index's drift reference (drift_reference.json in the index directory): the routing alpha,
    route mix and gray-zone share of a question file (classified and routed, not retrieved) or of the log."""
    from amsrag.monitor.baseline import read_questions, reference_from_log, reference_from_questions
    from amsrag.monitor.drift import REFERENCE_FILE, classifier_identity
    from amsrag.querylog.open import index_config, is_postgres_url

    if (questions is None) == (not from_log):
        raise InputError("give either --questions FILE or --from-log (not both)")
    if (since or until) and not from_log:
        raise InputError("--since / --until select query log entries: they go with --from-log")
    if is_postgres_url(index):
        raise InputError("a drift reference is stored in an embedded index's directory; a postgresql:// index "
                         "uses the reference shipped with amsrag")
    target = Path(index) / REFERENCE_FILE
    if questions is not None:
        from amsrag.pipeline import Engine

        qs = read_questions(questions)
        with Engine.open(index) as engine, progress_for(err, quiet) as progress, \
                progress.task("routing questions", len(qs)) as advance:
            reference = reference_from_questions(engine, qs, f"{questions.name} ({len(qs)} questions)", advance)
    else:
        from amsrag.querylog import open_query_log

        start, end = _times(since, until)
        config = index_config(index)
        band = (config.monitor.gray_zone_low, config.monitor.gray_zone_high)
        span = f"{since or 'the start'} to {until or 'the end'}"
        with closing(open_query_log(index, config.query_log)) as qlog:
            reference = reference_from_log(qlog.iter(start, end), band, f"the query log from {span}",
                                           classifier_identity(config.classifier))
    reference.save(target)
    summary = {"path": str(target), "source": reference.source, "n": reference.n,
               "route_mix": {k: round(v, 4) for k, v in reference.route_mix.items()},
               "gray_share": round(reference.gray_share, 4), "classifier": reference.classifier}
    if as_json:
        emit(summary)
        return
    mix = ", ".join(f"{k} {v:.1%}" for k, v in reference.route_mix.items())
    out.print(Text(f"stored the drift reference of {reference.n} routed answers in {target}: {mix}; gray zone "
                   f"{reference.gray_share:.1%}"), highlight=False)
