"""`amsrag ops review list|show|mark|dismiss`: the index's review queue without the web UI (`[review]`, opt-in)."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from amsrag.cli.common import IndexOpt, JsonOpt, emit, out
from amsrag.errors import InputError

review_app = typer.Typer(no_args_is_help=True, help="The review queue: flagged answers and misroute candidates; "
                                                    "mark them right or wrong with the question's true class.")

IdArg = Annotated[int, typer.Argument(help="the review item's id (`amsrag ops review list`)")]
NoteOpt = Annotated[str, typer.Option("--note", help="a note kept with the review")]


def _clip(text: str | None, n: int) -> str:
    if not text:
        return "—"
    return text if len(text) <= n else text[: n - 1] + "…"


def _route(answer: dict[str, Any]) -> str:
    cx = answer.get("complexity") or {}
    label = cx.get("route_label", cx.get("label"))
    alpha = cx.get("route_alpha", cx.get("alpha"))
    route = str(label or "—")
    if isinstance(alpha, int | float):
        route += f" {alpha:.2f}"
    return route + f" · {answer.get('strategy') or '—'}"


@review_app.command("list")
def review_list(
    index: IndexOpt,
    status: Annotated[str, typer.Option("--status", help="open|reviewed|dismissed|all")] = "open",
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="the newest N items")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """The newest items of a status: id, time, kind, route, review, question and answer."""
    from amsrag.review import open_review_queue

    with closing(open_review_queue(index)) as queue:
        items = queue.items(None if status == "all" else status, limit)
        counts = queue.counts()
    if as_json:
        for item in items:
            emit(item.to_dict())
        return
    table = Table(title=Text(f"review queue: {counts['open']} open, {counts['reviewed']} reviewed, "
                             f"{counts['dismissed']} dismissed"))
    for col in ("id", "time (UTC)", "kind", "status", "route", "review", "question", "answer"):
        table.add_column(col, no_wrap=col in ("id", "time (UTC)"))
    for i in items:
        review = "" if i.review is None else f"{i.review.verdict} {i.review.true_class or ''}".strip()
        table.add_row(str(i.id), i.ts.strftime("%Y-%m-%d %H:%M:%S"), i.kind, i.status, Text(_route(i.answer)),
                      Text(review), Text(_clip(i.query, 60)), Text(_clip(i.answer.get("answer"), 40)))
    out.print(table)


@review_app.command("show")
def review_show(item_id: IdArg, index: IndexOpt, as_json: JsonOpt = False) -> None:
    """One item: the question, the answer with its cited evidence, the route, the signals and the audit."""
    from amsrag.review import open_review_queue

    with closing(open_review_queue(index)) as queue:
        item = queue.get(item_id)
    if item is None:
        raise InputError(f"no review item {item_id} in {index}")
    if as_json:
        emit(item.to_dict())
        return
    a = item.answer
    lines = [f"#{item.id} {item.kind} ({item.status}), seen {item.seen}x, last {item.ts:%Y-%m-%d %H:%M:%S} UTC",
             f"why: {item.reason or '—'}", f"system {item.system}; route {_route(a)}", f"question: {item.query}",
             f"answer: {a.get('answer')}" + (" (abstained)" if a.get("abstained") else "")]
    for s in a.get("sources") or []:
        lines.append(f"  [{s['id']}] {s['title']}: {_clip(s['text'], 200)}")
    signals = a.get("signals") or {}
    lines.append("signals: " + ", ".join(f"{k} {v}" for k, v in signals.items()))
    audit = a.get("audit") or {}
    if audit:
        lines.append(f"audit: support {audit.get('support')}, flagged {audit.get('flagged')}")
    if item.details:
        lines.append(f"shadow probe: {item.details}")
    if item.review is not None:
        r = item.review
        lines.append(f"review: {r.verdict}, true class {r.true_class or '—'}, {r.reviewed_at:%Y-%m-%d %H:%M} UTC"
                     + (f" — {r.note}" if r.note else ""))
    out.print(Text("\n".join(lines)), highlight=False, soft_wrap=True)


@review_app.command("mark")
def review_mark(
    item_id: IdArg,
    index: IndexOpt,
    verdict: Annotated[str, typer.Option("--verdict", help="the answer is right or wrong")],
    true_class: Annotated[str | None, typer.Option(
        "--class", help="the question's true class: zero_hop (no retrieval), one_hop or multi_hop")] = None,
    note: NoteOpt = "",
    as_json: JsonOpt = False,
) -> None:
    """Review an item (a reviewed item may be marked again: the latest review wins)."""
    from amsrag.review import open_review_queue

    with closing(open_review_queue(index)) as queue:
        item = queue.mark(item_id, verdict, true_class, note)
    if as_json:
        emit(item.to_dict())
        return
    out.print(Text(f"reviewed #{item.id}: {verdict}" + (f", true class {true_class}" if true_class else "")),
              highlight=False)


@review_app.command("dismiss")
def review_dismiss(item_id: IdArg, index: IndexOpt, note: NoteOpt = "", as_json: JsonOpt = False) -> None:
    """Nothing to learn from an item: it leaves the open list without a review."""
    from amsrag.review import open_review_queue

    with closing(open_review_queue(index)) as queue:
        item = queue.dismiss(item_id, note)
    if as_json:
        emit(item.to_dict())
        return
    out.print(Text(f"dismissed #{item.id}"), highlight=False)
