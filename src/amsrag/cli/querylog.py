"""`amsrag ops querylog show|prune|stats`: the index's query log (`[query_log]`, off by default)."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from amsrag.cli.common import IndexOpt, JsonOpt, emit, out

querylog_app = typer.Typer(no_args_is_help=True, help="The query log: answered questions with their route, "
                                                      "answer and flags (opt-in: [query_log] enabled = true).")

SinceOpt = Annotated[str | None, typer.Option("--since", help="from this ISO 8601 date or time (UTC unless it "
                                                              "gives an offset), inclusive")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="before this ISO 8601 date or time, exclusive")]


def _clip(text: str | None, n: int) -> str:
    if text is None:
        return "—"
    return text if len(text) <= n else text[: n - 1] + "…"


@querylog_app.command("show")
def querylog_show(
    index: IndexOpt,
    since: SinceOpt = None,
    until: UntilOpt = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="the newest N entries")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """The newest entries (oldest of them first): time, route, strategy, flags, latency, question, answer."""
    from amsrag.querylog import open_query_log
    from amsrag.querylog.entry import parse_time

    start, end = (parse_time(t) if t else None for t in (since, until))
    with closing(open_query_log(index)) as qlog:
        entries = list(reversed(qlog.query(start, end, limit=limit, newest_first=True)))
    if as_json:
        for e in entries:
            emit(e.to_dict())
        return
    table = Table(title=Text(f"query log: {len(entries)} entries"))
    for col in ("id", "time (UTC)", "route", "strategy", "abst.", "flag", "ms", "question", "answer"):
        table.add_column(col, no_wrap=col in ("id", "time (UTC)"))
    for e in entries:
        route = e.route_label or "—"
        if e.route_alpha is not None:
            route += f" {e.route_alpha:.2f}"
        table.add_row(str(e.id), e.ts.strftime("%Y-%m-%d %H:%M:%S"), Text(route), Text(e.strategy),
                      "yes" if e.abstained else "", "yes" if e.flagged else "",
                      f"{e.total_ms:.0f}" if e.total_ms is not None else "—",
                      Text(_clip(e.query, 60)), Text(_clip(e.answer, 40)))
    out.print(table)


@querylog_app.command("prune")
def querylog_prune(
    index: IndexOpt,
    retention_days: Annotated[float | None, typer.Option(
        "--retention-days", min=0, help="keep this many days (default: [query_log] retention_days; 0 keeps all)")]
        = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete the entries older than the retention."""
    from amsrag.querylog import open_query_log

    with closing(open_query_log(index)) as qlog:
        days = qlog.retention_days if retention_days is None else retention_days
        deleted = qlog.prune(days)
        left = qlog.count()
    if as_json:
        emit({"deleted": deleted, "entries": left, "retention_days": days})
        return
    out.print(f"deleted {deleted} entries older than {days:g} days; {left} left" if days > 0
              else f"retention 0 keeps every entry: nothing deleted; {left} entries", highlight=False)


@querylog_app.command("stats")
def querylog_stats(
    index: IndexOpt,
    since: SinceOpt = None,
    until: UntilOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Counts by route label and strategy, abstention, escalation and flagged rates, latency percentiles."""
    from amsrag.querylog import open_query_log, summarise
    from amsrag.querylog.entry import parse_time

    start, end = (parse_time(t) if t else None for t in (since, until))
    with closing(open_query_log(index)) as qlog:
        summary = summarise(qlog.iter(start, end))
    if as_json:
        emit(summary)
        return
    n = summary["entries"]
    if not n:
        out.print("no entries in the range", highlight=False)
        return

    def rate(value: float | None) -> str:
        return "—" if value is None else f"{value:.1%}"

    out.print(Text(f"{n} entries, {summary['first']} … {summary['last']}\n"
                   f"abstained {summary['abstained']} ({rate(summary['abstention_rate'])}), escalated "
                   f"{summary['escalated']} ({rate(summary['escalation_rate'])}), flagged {summary['flagged']} of "
                   f"{summary['audited']} audited ({rate(summary['flagged_rate'])}); total ms p50 "
                   f"{summary['total_ms_p50']}, p95 {summary['total_ms_p95']}"), highlight=False)
    for key, title in (("by_route_label", "route label"), ("by_strategy", "strategy"), ("by_system", "system"),
                       ("by_source", "source")):
        table = Table(title=title)
        table.add_column(title)
        table.add_column("entries", justify="right")
        table.add_column("share", justify="right")
        for name, count in summary[key].items():
            table.add_row(Text(name), str(count), f"{count / n:.1%}")
        out.print(table)
