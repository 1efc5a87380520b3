"""The `amsrag` command line (DESIGN §9). Thin: parsing, calling the library, printing. Nine doors at the top
(`DOORS`); the old top-level names are hidden aliases (cli.aliases)."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from amsrag.cli.aliases import DeprecatedCommand, DeprecatedGroup, respell_suggestions
from amsrag.cli.audit import audit_app
from amsrag.cli.chain_view import print_chain
from amsrag.cli.classifier import classifier_app
from amsrag.cli.common import (
    IndexOpt,
    JsonOpt,
    QuietOpt,
    SystemOpt,
    WhereOpt,
    emit,
    err,
    generator_config,
    out,
    print_error,
    print_trace,
)
from amsrag.cli.decomposer import decomposer_app
from amsrag.cli.eval import eval_command
from amsrag.cli.evaluator import evaluator_app
from amsrag.cli.fusion import fusion_app
from amsrag.cli.index import index_app
from amsrag.cli.init import init_command
from amsrag.cli.mcp import mcp_command
from amsrag.cli.monitor import monitor_app
from amsrag.cli.querylog import querylog_app
from amsrag.cli.reader import reader_app
from amsrag.cli.review import review_app
from amsrag.cli.route import route_app
from amsrag.cli.tables import index_tables_app, tables_app, taxonomy_app, themes_app, train_tables_app
from amsrag.errors import AmsragError, InputError

if TYPE_CHECKING:
    from amsrag.config import GeneratorConfig
    from amsrag.filters import Where
    from amsrag.pipeline import Engine
    from amsrag.pipeline.results import AnswerResult


# the top level, in this order (issue 41): the query commands, the index, the service, the demo, the evaluation,
# the fitting wing and the operations of a deployment; every other name is an old spelling (cli.aliases)
DOORS = ("ask", "retrieve", "search", "index", "serve", "demo", "eval", "train", "ops")


class AmsragGroup(TyperGroup):
    """The root command: an `AmsragError` from any command is printed as one line on stderr (its message
    verbatim) and exits with status 2, both from the console script and under typer's CliRunner. `--help` and
    the shell completion list `DOORS` in their order, then any other (hidden) name."""

    def invoke(self, ctx):  # the context class is typer's own click
        try:
            return super().invoke(ctx)
        except AmsragError as exc:
            print_error(exc)
            raise typer.Exit(2) from None

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except Exception as exc:  # typer's own click's UsageError: "No such command ... Did you mean ...?"
            if isinstance(getattr(exc, "message", None), str):
                exc.message = respell_suggestions(exc.message)  # type: ignore[attr-defined]
            raise

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        return [*(n for n in DOORS if n in names), *(n for n in names if n not in DOORS)]


# rich_markup_mode=None: help texts are printed as written ("[serve] section", "[default: ...]"), never
# read as rich markup (the root's mode applies to every command group)
app = typer.Typer(cls=AmsragGroup, add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, help="amsrag: adaptive multi-source RAG.")

# `index`: build and maintain an index, write its configuration, inspect its tables and themes
index_app.command("init")(init_command)
index_app.add_typer(index_tables_app, name="tables")
index_app.add_typer(themes_app, name="themes")
app.add_typer(index_app, name="index")

# `train <model> <command>`: every group that fits a model or a threshold, whole (its commands keep their names)
train_app = typer.Typer(no_args_is_help=True, help="Fit the models and thresholds the engine routes and answers "
                        "with, and run or evaluate each one on its own.")
TRAIN_GROUPS = (("classifier", classifier_app), ("evaluator", evaluator_app), ("audit", audit_app),
                ("route", route_app), ("reader", reader_app), ("decomposer", decomposer_app), ("fusion", fusion_app),
                ("tables", train_tables_app), ("taxonomy", taxonomy_app))
for _name, _group in TRAIN_GROUPS:
    train_app.add_typer(_group, name=_name)
app.add_typer(train_app, name="train")

# `ops <group> <command>`: a deployment's query log, review queue and monitoring
ops_app = typer.Typer(no_args_is_help=True, help="A deployment's query log, review queue and monitoring.")
OPS_GROUPS = (("querylog", querylog_app), ("review", review_app), ("monitor", monitor_app))
for _name, _group in OPS_GROUPS:
    ops_app.add_typer(_group, name=_name)
app.add_typer(ops_app, name="ops")
app.command("eval")(eval_command)

# the old spellings, hidden, for one release: the same commands after a one-line notice on stderr
OLD_GROUPS = (*((name, group) for name, group in TRAIN_GROUPS if name != "tables"), ("tables", tables_app),
              ("themes", themes_app), *OPS_GROUPS)
for _name, _group in OLD_GROUPS:
    app.add_typer(_group, name=_name, hidden=True, cls=DeprecatedGroup)
app.command("init", hidden=True, cls=DeprecatedCommand)(init_command)
app.command("mcp", hidden=True, cls=DeprecatedCommand)(mcp_command)


def _print_version(value: bool) -> None:
    if value:
        from amsrag.version import __version__

        out.print(f"amsrag {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def root(version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                               help="print the version and exit")] = False) -> None:
    """amsrag: adaptive multi-source RAG."""


@app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="the query")],
    index: IndexOpt,
    retriever: Annotated[str, typer.Option("--retriever", help="bm25|dense|graph")] = "bm25",
    k: Annotated[int, typer.Option("-k", help="number of hits")] = 10,
    where: WhereOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run one retriever and print its ranked hits."""
    from amsrag.filters import Where
    from amsrag.pipeline.results import check_question
    from amsrag.retrieve.filtered import ranking_within
    from amsrag.retrievers import retriever_for
    from amsrag.store.open import open_index

    scope = Where.parse(where)
    with open_index(index) as idx:
        query = check_question(query, idx.config.serve.max_question_chars)
        r = retriever_for(idx, retriever)
        allowed = idx.allowed_rows(scope) if scope else None
        if allowed is not None:
            r = ranking_within(allowed, r)
        t = time.perf_counter()
        hits = r.search(query, k=k)
        ms = (time.perf_counter() - t) * 1000
    if as_json:
        found: dict[str, Any] = {"query": query, "retriever": retriever,
                                 "hits": [{"id": h.id, "title": h.title, "score": h.score, "rank": h.rank}
                                          for h in hits], "ms": round(ms, 3)}
        if allowed is not None:
            found["filter"] = allowed.trace()
        emit(found)
        return
    scoped = f" [{' '.join(scope.cli_args())}: {len(allowed)} passages]" if allowed is not None else ""
    table = Table(title=Text(f"{retriever}: {query}{scoped}  ({ms:.1f} ms)"))
    for col in ("rank", "score", "id", "title"):
        table.add_column(col, no_wrap=col == "id")
    for h in hits:
        table.add_row(str(h.rank), f"{h.score:.4f}", Text(h.id), Text(h.title))
    out.print(table)


@app.command("retrieve")
def retrieve(
    query: Annotated[str, typer.Argument(help="the question")],
    index: IndexOpt,
    system: SystemOpt = "full",
    k: Annotated[int | None, typer.Option("-k", help="passages to return (default: the strategy's k)")] = None,
    explain: Annotated[int, typer.Option(
        "--explain", min=-1, max=10, help="learned fuser: trace the top feature contributions of this many "
        "leading passages (default: 3 with --json)")] = -1,
    where: WhereOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Adaptive retrieval: classify, route, retrieve, fuse; prints the passages and the trace."""
    from amsrag.filters import Where
    from amsrag.lazy import lean_imports
    from amsrag.pipeline import Engine

    lean_imports()
    scope = Where.parse(where)
    with Engine.open(index) as engine:
        result = engine.retrieve(query, system=system, k=k, explain=(3 if as_json else 0) if explain < 0 else explain,
                                 where=scope or None)
    if as_json:
        emit(result.to_dict())
        return
    print_trace(result.trace)
    table = Table(title=Text(result.query))
    for col in ("#", "score", "id", "title", "text"):
        table.add_column(col, no_wrap=col == "id")
    for i, p in enumerate(result.passages, 1):
        table.add_row(str(i), f"{p.score:.4f}", Text(p.id), Text(p.title),
                      Text(p.text[:160] + ("…" if len(p.text) > 160 else "")))
    out.print(table)


@app.command("ask")
def ask(
    query: Annotated[str, typer.Argument(help="the question")],
    index: Annotated[str | None, typer.Option(
        "--index", help="index directory or postgresql:// URL (may be left out with --server)")] = None,
    system: SystemOpt = "full",
    generator: Annotated[str | None, typer.Option(
        "--generator",
        help="extractive|heuristic|llamacpp|openai (default: the index configuration's, extractive)")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", help="llamacpp: GGUF file; openai: the model name sent to the server")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="openai: the server's API root, e.g. "
                                                 "http://127.0.0.1:8080/v1")] = None,
    log: Annotated[bool | None, typer.Option(
        "--log/--no-log", help="record the answer in the index's query log (default: [query_log] enabled)")] = None,
    server: Annotated[str | None, typer.Option(
        "--server", help="ask the running `amsrag serve` at this URL (default: the service the index directory "
        "announces, if one runs; key: $AMSRAG_API_KEY)")] = None,
    local: Annotated[bool, typer.Option(
        "--local", help="answer in this process even when a service runs for the index")] = False,
    where: WhereOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer with citations from the retrieved passages, and show the route taken."""
    from amsrag.cli.remote import ServiceUnavailable, find_service
    from amsrag.filters import Where

    scope = Where.parse(where)  # a malformed filter fails here, before a service or a model is reached

    local_options = [name for name, value in (("--generator", generator), ("--model", model),
                                              ("--base-url", base_url), ("--log/--no-log", log)) if value is not None]
    service = find_service(index, server, local, local_options)
    if service is not None:
        try:
            answer = service.ask(query, system, scope.to_dict())
        except ServiceUnavailable as exc:
            if not service.discovered:
                raise InputError(str(exc)) from None
            err.print(f"[yellow]warning:[/] {escape(str(exc))}; answering locally", highlight=False, soft_wrap=True)
        else:
            sources = {p["id"]: ((p.get("citation") or {}).get("label") or p.get("title", ""), p.get("text", ""))
                       for p in answer.pop("sources", [])}
            answer.pop("titles", None)
            if as_json:
                emit(answer)
                return
            print_answer(answer["answer"], answer["citations"], answer["abstained"], answer["trace"], sources,
                         answer.get("quote"), answer.get("parts") or ())
            return
    if index is None:
        raise InputError("--index is required (or --server URL: ask a running service)")
    ask_locally(query, index, system, generator, model, base_url, log, as_json, scope)


def ask_locally(query: str, index: str, system: str, generator: str | None, model: str | None,
                base_url: str | None, log: bool | None, as_json: bool, where: Where | None = None) -> None:
    """`ask` in this process: open the index, load the generator, answer."""
    from amsrag.generate import make_generator
    from amsrag.lazy import lean_imports
    from amsrag.pipeline import Engine
    from amsrag.text import language

    lean_imports()
    language.preload()
    with Engine.open(index) as engine:
        engine.check_question(query)  # before a generator is loaded
        gen_config = generator_config(engine.config.generator, generator, model, base_url)
        gen = make_generator(gen_config, encoder=engine.index.encoder)
        result = engine.ask(query, system=system, generator=gen, where=where or None)
        from amsrag.text.citations import citation_label

        answer_passages = {c: (citation_label(p.metadata) or p.title, p.text)
                           for c, p in ((c, engine.index.get(c)) for c in result.citations) if p is not None}
        if log if log is not None else engine.config.query_log.enabled:
            log_answer(engine, result, gen_config)
    if as_json:
        emit(result.to_dict())
        return
    print_answer(result.answer, result.citations, result.abstained, result.trace, answer_passages,
                 result.quote.to_dict() if result.quote is not None else None,
                 [part.to_dict() for part in result.parts])


def print_answer(answer: str, citations: list[str], abstained: bool, trace: Mapping[str, Any],
                 passages: Mapping[str, tuple[str, str]], quote: Mapping[str, Any] | None = None,
                 parts: Sequence[Mapping[str, Any]] = ()) -> None:
    """An answer as `ask` prints it: the trace, the generator line, the answer with its citations, the audit,
    the table route's statement and the cited passages (`passages`: citation label or title, and text, by id).
    A question answered in `parts`: each part as its own answer under its question, then the cited passages."""
    if parts:
        for i, part in enumerate(parts, 1):
            out.print(Text(f"part {i}: {part['query']}", style="bold"), highlight=False, soft_wrap=True)
            print_answer(part["answer"], part["citations"], part["abstained"], part["trace"], {}, part.get("quote"))
            out.print()
        print_cited(citations, passages)
        return
    print_trace(trace)
    g = trace["generator"]
    line = f"generator {g['name']}: {g['prompt_tokens']} prompt + {g['output_tokens']} output tokens, {g['ms']:.1f} ms"
    if g.get("confidence") is not None:
        line += f", confidence {g['confidence']:.3f}"
    # answers, citations and passages are data: printed as Text, never read as markup ("[a/b.md#13]")
    out.print(Text(line), highlight=False)
    if g.get("error"):
        err.print(f"[yellow]warning:[/] generator {escape(str(g['requested']))} failed ({escape(str(g['error']))}); "
                  "the answer is the extractive one (retrieval only)", highlight=False, soft_wrap=True)
    out.print()
    out.print(Text.assemble((answer, "bold"), "  ", (" ".join("[" + c + "]" for c in citations), "dim")),
              highlight=False, soft_wrap=True)
    if quote:  # the supporting sentence, the answer span underlined
        text, start, end = str(quote["text"]), int(quote["start"]), int(quote["end"])
        out.print(Text.assemble("quote: “", text[:start], (text[start:end], "bold underline"), text[end:], "” ",
                                (f"[{quote['passage_id']}]", "dim")), highlight=False, soft_wrap=True)
    print_audit(trace)
    print_chain(trace, out)
    if abstained and g.get("candidate") and g["candidate"] != answer:
        out.print(Text(f"best candidate, below the confidence threshold {g.get('threshold')}: {g['candidate']}",
                       style="dim"), highlight=False, soft_wrap=True)
    structured = trace.get("structured")
    if structured and structured.get("sql"):
        out.print(Text(f"table {structured['table']}, confidence {structured['confidence']:.3f}: "
                       f"{structured['sql']}", style="dim"), highlight=False, soft_wrap=True)
        for row in structured.get("cited", []):
            out.print(Text(f"[{row['id']}] {row['text'][:160]}", style="dim"), highlight=False)
    print_cited(citations, passages)


def print_cited(citations: Sequence[str], passages: Mapping[str, tuple[str, str]]) -> None:
    """The cited passages under an answer: a document's passage cites its file, page and section
    ("guide.pdf p. 14 · Install")."""
    for cid in citations:
        if cid in passages:
            label, text = passages[cid]
            out.print(Text(f"[{cid}] {label}: {text[:160]}{'…' if len(text) > 160 else ''}", style="dim"),
                      highlight=False)


def print_audit(trace: Mapping[str, Any]) -> None:
    """The citation-support audit and the proxy signals that fired, under the answer."""
    audit = trace.get("audit") or {}
    signals = trace.get("signals") or {}
    fired = [name for key, name in (("gray_zone", "gray-zone alpha"), ("disagreement", "confident but unsupported"),
                                    ("sufficiency_failed", "evidence failed the sufficiency check"))
             if signals.get(key)]
    if signals.get("escalations"):
        fired.append(f"escalated {signals['escalations']}×")
    tail = f" · signals: {', '.join(fired)}" if fired else ""
    if audit.get("support") is None:
        if audit.get("reason"):
            out.print(Text(f"audit: not audited ({audit['reason']}){tail}", style="dim"), highlight=False)
        return
    line = f"audit: support {audit['support']:.2f} against its {audit.get('against', 'citations')}"
    verdict = "unsupported" if audit.get("flagged") else "supported"
    line += f" ({verdict}, threshold {audit.get('threshold')})"
    if signals.get("flagged"):
        out.print(Text(f"flagged as likely wrong: {signals.get('flag_reason') or 'see the signals'} · {line[7:]}{tail}",
                       style="yellow"), highlight=False, soft_wrap=True)
    else:
        out.print(Text(f"{line}{tail}", style="dim"), highlight=False, soft_wrap=True)


def log_answer(engine: Engine, result: AnswerResult, gen_config: GeneratorConfig) -> None:
    """Append `result` to the index's query log; a failure is a warning on stderr, never the command's."""
    from amsrag.querylog import Redactor, entry_from_answer, query_log_for_index, secrets_of

    cfg = engine.config.query_log
    try:
        redactor = Redactor(secrets_of(engine.config.model_copy(update={"generator": gen_config})))
        entry = entry_from_answer(result, cfg, "cli", redactor)
        qlog = query_log_for_index(engine.index, cfg)
        try:
            qlog.append(entry)
        finally:
            qlog.close()
    except Exception as exc:
        err.print(f"[yellow]warning:[/] the answer was not logged: {escape(type(exc).__name__)}: "
                  f"{escape(str(exc))}", highlight=False, soft_wrap=True)


@app.command("demo")
def demo(
    index: Annotated[Path | None, typer.Option("--index", help="where to build the demo index")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="rebuild the demo index")] = False,
    k: Annotated[int, typer.Option("-k", help="hits shown per retriever")] = 3,
    lang: Annotated[str, typer.Option("--lang", help="en: the English demo corpus; zh: two Chinese articles")] = "en",
    quiet: QuietOpt = False,
) -> None:
    """Build an index over the bundled demo corpus and show each retriever at work."""
    if lang == "zh":
        from amsrag.cli.demo_zh import run_demo_zh

        run_demo_zh(out, err, index_dir=index, fresh=fresh, k=k, quiet=quiet)
        return
    if lang != "en":
        raise InputError(f"no demo corpus for language {lang!r}; choose en or zh")
    from amsrag.cli.demo import run_demo

    run_demo(out, err, index_dir=index, fresh=fresh, k=k, quiet=quiet)


@app.command("serve")
def serve(
    index: IndexOpt,
    host: Annotated[str | None, typer.Option("--host", help="bind address (default 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option("--port", help="TCP port (default 8000)")] = None,
    config_file: Annotated[Path | None, typer.Option("--config", help="TOML whose [serve] section to use")] = None,
    access_log: Annotated[bool, typer.Option("--access-log", help="log every request")] = False,
    query_log: Annotated[bool | None, typer.Option(
        "--query-log/--no-query-log", help="log answered questions (default: [query_log] enabled)")] = None,
    review: Annotated[bool | None, typer.Option(
        "--review/--no-review", help="queue flagged and suspect answers for review; the web UI's /review page "
        "(default: [review] enabled)")] = None,
    shadow: Annotated[bool | None, typer.Option(
        "--shadow/--no-shadow", help="shadow-path probes of gray-zone answers (default: [shadow] enabled)")] = None,
    watch: Annotated[list[str] | None, typer.Option(
        "--watch", help="a folder (PATH or NAME=PATH; repeatable) kept in step with the index while serving, as "
        '`index sync --watch` (needs pip install "amsrag[watch]"); its files are served as --sources')] = None,
    sources: Annotated[list[str] | None, typer.Option(
        "--sources", help="a synced folder (PATH or NAME=PATH as indexed; repeatable) whose files are served "
        "read-only at /v1/sources/NAME/PATH; citations link to them (the web UI opens them at the page)")] = None,
    mcp: Annotated[bool, typer.Option(
        "--mcp", help="serve the Model Context Protocol instead: tools search, ask and get_passage (docs/mcp.md; "
        "needs pip install 'amsrag[mcp]')")] = False,
    transport: Annotated[str | None, typer.Option(
        "--transport", help="--mcp: stdio (the client starts this command; the default) or http (streamable HTTP "
        "at --path, bound to --host and --port; API keys as for serve)")] = None,
    path: Annotated[str | None, typer.Option("--path", help="--mcp over http: the endpoint's path (default /mcp)")]
    = None,
) -> None:
    """HTTP API, OpenAI-compatible endpoint and web UI over an index (API keys: $AMSRAG_API_KEYS); with --mcp,
    a Model Context Protocol server instead."""
    if mcp:
        web_only = [name for name, value in (("--config", config_file), ("--access-log", access_log or None),
                                             ("--query-log/--no-query-log", query_log),
                                             ("--review/--no-review", review), ("--shadow/--no-shadow", shadow),
                                             ("--watch", watch), ("--sources", sources)) if value is not None]
        if web_only:
            raise InputError(f"{', '.join(web_only)}: options of the web service, not of --mcp")
        mcp_command(index, transport or "stdio", host, port, path or "/mcp")
        return
    mcp_only = [name for name, value in (("--transport", transport), ("--path", path)) if value is not None]
    if mcp_only:
        raise InputError(f"{', '.join(mcp_only)}: options of --mcp")
    from amsrag.serve import run

    run(index, host=host, port=port, config_file=config_file, access_log=access_log, query_log=query_log,
        review=review, shadow=shadow, watch=watch or (), sources=sources or ())


def main() -> None:
    try:
        app()
    except AmsragError as exc:  # raised outside a command (AmsragGroup handles the commands' own)
        print_error(exc)
        sys.exit(2)


if __name__ == "__main__":
    main()
