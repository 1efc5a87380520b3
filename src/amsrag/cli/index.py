"""`amsrag index build|add|sync|delete|check|repair|stats|export`: build and maintain an index (`index init`,
`index tables` and `index themes` join the group in `cli.main`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, get_args

import typer
from rich.markup import escape
from rich.table import Table

from amsrag.cli.common import FormatOpt, IndexOpt, JsonOpt, QuietOpt, emit, err, out
from amsrag.errors import InputError
from amsrag.progress import progress_for

if TYPE_CHECKING:
    from amsrag.indexing.job import JobReport
    from amsrag.store.base import Store

SKIPPED_LISTED = 20  # skipped files listed one a line; --json has all
TagOpt = Annotated[list[str] | None, typer.Option(
    "--tag", help="a tag for every document read (repeatable), beside a folder's amsrag.toml and Markdown front "
                  "matter tags; filter with --where tag=NAME (docs/metadata-filters.md)")]

index_app = typer.Typer(no_args_is_help=True, help="Build, maintain and inspect an index directory; write a "
                        "configuration file.")


def _notice(quiet: bool):
    return (lambda message: None) if quiet else (lambda message: err.print(escape(message), highlight=False))


def _job_summary(index: Store, report: JobReport, as_json: bool, what: str) -> None:
    summary = {"index": index.location, **report.to_dict(), "passages": len(index)}
    if as_json:
        emit(summary)
        return
    tables = report.tables_added + report.tables_replaced + report.tables_unchanged + report.tables_deleted
    parts = [] if tables and not report.received else [f"{report.added} passages added"]
    if tables:
        parts.append(report.tables_summary())
    if report.removed or report.kept:
        parts.append(f"{report.removed} removed, {report.kept} unchanged in changed documents")
    if report.documents_created or report.documents_replaced or report.documents_deleted:
        parts.append(f"documents: {report.documents_created} new, {report.documents_replaced} changed, "
                     f"{report.documents_deleted} deleted, {report.documents_unchanged} unchanged")
    if report.documents_meta_updated:
        parts.append(f"{report.documents_meta_updated} unchanged document(s) got new tags, time or size")
    if report.skipped_existing or report.skipped_duplicate_content:
        parts.append(f"{report.skipped_existing} already stored, {report.skipped_duplicate_content} duplicate "
                     f"content skipped")
    parts.append(f"{report.embedded} embedded" + (f" ({report.resumed} resumed from an interrupted run)"
                                                  if report.resumed else ""))
    if report.table_rows_padded:
        parts.append(f"{report.table_rows_padded} table row(s) had fewer cells than the header (padded with empty "
                     f"cells)")
    out.print(f"[green]{what}[/] {escape(index.location)}: " + "; ".join(parts)
              + f"; the index now holds {len(index)} passages in {report.batches} committed batch(es), "
                f"{report.seconds.get('total', 0):.1f} s", highlight=False)
    if report.skipped_files:
        out.print(f"[yellow]{escape(report.skipped_summary())}[/]", highlight=False, soft_wrap=True)
    for skipped in report.skipped_files[:SKIPPED_LISTED]:
        out.print(f"  [yellow]skipped:[/] {escape(skipped['reason'])}: {escape(skipped['file'])}", highlight=False,
                  soft_wrap=True)
    if len(report.skipped_files) > SKIPPED_LISTED:
        out.print(f"  ... and {len(report.skipped_files) - SKIPPED_LISTED} more (--json lists every one)",
                  highlight=False)
    from amsrag.pipeline.language import index_language_warnings

    for warning in index_language_warnings(index.config, report.languages):
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)


@index_app.command("build")
def index_build(
    inputs: Annotated[list[str], typer.Argument(help="files or folders to index (a folder as NAME=PATH to name "
                                                    "its documents NAME/...)")],
    index: IndexOpt,
    fmt: FormatOpt = "auto",
    config_file: Annotated[Path | None, typer.Option("--config", help="TOML configuration")] = None,
    graph: Annotated[str | None, typer.Option(
        "--graph", help="entity graph: 'ner' (titles + spaCy named entities, the default) or 'title' (titles and "
                        "their aliases only: ~90x faster to build, docs/benchmarks/graph-modes.md); overrides "
                        "graph.ner of --config")] = None,
    encoder: Annotated[str | None, typer.Option(
        "--encoder", help="dense encoder: all-MiniLM-L6-v2-int8 (English, the default) or multilingual-e5-small-q4 "
                          "(Chinese and ~100 other languages; docs/chinese.md); overrides embedding.model of --config"
    )] = None,
    tag: TagOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Create a new index from INPUT files or folders."""
    from amsrag.config import AmsragConfig, EmbeddingConfig
    from amsrag.indexing import ingest_inputs
    from amsrag.store.open import create_index, remove_empty_index

    config = AmsragConfig.load(config_file) if config_file else AmsragConfig()
    if graph is not None:
        if graph not in ("ner", "title"):
            raise InputError(f"--graph must be 'ner' or 'title', got {graph!r}")
        config.graph.ner = graph == "ner"
    if encoder is not None:
        models = get_args(EmbeddingConfig.model_fields["model"].annotation)
        if encoder not in models:
            raise InputError(f"--encoder must be one of {', '.join(models)}, got {encoder!r}")
        config.embedding = EmbeddingConfig.model_validate({**config.embedding.model_dump(), "model": encoder})
    idx = create_index(index, config)
    try:
        with idx:
            with progress_for(err, quiet) as progress:
                report = ingest_inputs(idx, inputs, fmt, progress=progress, notice=_notice(quiet), tags=tag or ())
            _job_summary(idx, report, as_json, "built")  # while open: a PostgreSQL index counts in the database
    except Exception:
        remove_empty_index(index)  # bad input is refused before any write: leave no empty index behind
        raise


@index_app.command("add")
def index_add(
    inputs: Annotated[list[str], typer.Argument(help="files or folders to add (a folder as NAME=PATH)")],
    index: IndexOpt,
    fmt: FormatOpt = "auto",
    replace: Annotated[bool, typer.Option(
        "--replace", help="replace each input file's documents as a whole (changed passages re-embedded, "
        "passages no longer in the file deleted)")] = False,
    tag: TagOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Add passages to an existing index (only new content is embedded; an interrupted add resumes)."""
    from amsrag.indexing import ingest_inputs
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        with progress_for(err, quiet) as progress:
            report = ingest_inputs(idx, inputs, fmt, replace=replace, progress=progress, notice=_notice(quiet),
                                   tags=tag or ())
        _job_summary(idx, report, as_json, "replaced in" if replace else "added to")


@index_app.command("sync")
def index_sync(
    folders: Annotated[list[str], typer.Argument(help="folders to keep the index in step with (PATH or NAME=PATH)")],
    index: IndexOpt,
    fmt: FormatOpt = "auto",
    keep_deleted: Annotated[bool, typer.Option(
        "--keep-deleted", help="do not delete documents whose file is gone")] = False,
    watch: Annotated[bool, typer.Option(
        "--watch", help="keep syncing until Ctrl-C: one sync per batch of file changes, one line each (needs "
        'pip install "amsrag[watch]")')] = False,
    tag: TagOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Sync folders into an index: add new files, replace changed ones, delete removed ones."""
    from amsrag.indexing import sync_folders
    from amsrag.store.open import open_index

    if watch:
        _watch(index, folders, fmt, not keep_deleted, as_json, quiet, tag or [])
        return
    with open_index(index) as idx:
        with progress_for(err, quiet) as progress:
            report = sync_folders(idx, folders, fmt, delete=not keep_deleted, progress=progress,
                                  notice=_notice(quiet), tags=tag or ())
        _job_summary(idx, report, as_json, "synced")


def _watch(index: str, folders: list[str], fmt: str, delete: bool, as_json: bool, quiet: bool,
           tags: list[str]) -> None:
    """`index sync --watch`: a line (or a JSON object) per batch, and a last one when Ctrl-C ends it."""
    from amsrag.indexing.watch import WatchBatch, require_watchfiles, watch_and_sync
    from amsrag.store.open import open_index

    require_watchfiles()  # before the index is opened: the missing extra is the first thing said

    def show(batch: WatchBatch) -> None:
        if as_json:
            emit(batch.to_dict())
        else:
            colour = "red" if batch.error is not None else "green"
            out.print(f"[{colour}]{escape(batch.line())}[/]", highlight=False, soft_wrap=True)

    with open_index(index) as idx:
        if not as_json:
            err.print(f"watching {escape(', '.join(folders))} for {escape(idx.location)} (Ctrl-C stops)",
                      highlight=False)
        summary = watch_and_sync(idx, folders, fmt=fmt, delete=delete, on_batch=show, notice=_notice(quiet or as_json),
                                 tags=tags)
    if as_json:
        emit({"watch": summary.to_dict()})
    else:
        out.print(escape(summary.line()), highlight=False, soft_wrap=True)


@index_app.command("delete")
def index_delete(
    ids: Annotated[list[str] | None, typer.Argument(help="passage ids")] = None,
    index: IndexOpt = "",
    doc: Annotated[list[str] | None, typer.Option("--doc", help="a document id (repeatable): delete all its "
                                                               "passages")] = None,
    table: Annotated[list[str] | None, typer.Option("--table", help="a table id (repeatable): delete the "
                                                                   "table")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete passages by id, whole documents with --doc, or tables with --table (all or nothing)."""
    from amsrag.indexing.themes import refresh_themes
    from amsrag.store.open import open_index

    if not index:
        raise InputError("--index is required")
    if sum(map(bool, (ids, doc, table))) != 1:
        raise InputError("give passage ids, --doc DOC_ID or --table TABLE_ID (one of the three)")
    with open_index(index) as idx:
        if table:
            known = set(idx.tables().table_ids()) if idx.tables() is not None else set()  # type: ignore[union-attr]
            unknown = [t for t in table if t not in known]
            if unknown:
                raise InputError(f"no such table(s) in {idx.location}: {', '.join(unknown)}; nothing was deleted "
                                 f"(`amsrag index tables list --index {idx.location}` lists them)")
            deleted = idx.delete_tables(table).deleted
            if as_json:
                emit({"index": idx.location, "tables_deleted": deleted})
            else:
                out.print(f"[green]deleted {deleted}[/] table(s)")
            return
        report = idx.delete_documents(doc) if doc else idx.delete(ids or [])
        tables_deleted = _delete_document_tables(idx, doc or [])
        refresh_themes(idx, notice=_notice(as_json))
        if as_json:
            emit({"index": idx.location, "deleted": report.deleted, "documents": report.documents,
                  "passages": len(idx), **({"tables_deleted": tables_deleted} if doc else {})})
        else:
            what = f" ({report.documents} documents)" if doc else ""
            also = f" and {tables_deleted} of their tables" if tables_deleted else ""
            out.print(f"[green]deleted {report.deleted}[/] passages{what}{also}; the index now holds {len(idx)}")


def _delete_document_tables(idx: Store, docs: list[str]) -> int:
    """The real tables read from the deleted documents (`DOC#table-N`) deleted with them."""
    from amsrag.indexing.tables import document_table_ids

    stored = idx.tables() if docs else None
    found = sorted(document_table_ids(stored.table_ids(), docs)) if stored is not None else []
    return idx.delete_tables(found).deleted if found else 0


@index_app.command("check")
def index_check(index: IndexOpt, as_json: JsonOpt = False) -> None:
    """Verify the passages database, the manifest and every derived index (exit status 1 on a problem)."""
    from amsrag.store.open import open_index_unchecked

    with open_index_unchecked(index) as idx:
        report = idx.check()
    if as_json:
        emit(report.to_dict())
    elif report.ok:
        out.print(f"[green]ok[/] {escape(report.location)}: " + escape(", ".join(report.checked)), highlight=False)
    else:
        for problem in report.problems:
            err.print(f"[red]problem[/] {escape(problem)}", highlight=False)
        if report.repairable:
            err.print(f"repair with `amsrag index repair --index {escape(index)}` "
                      f"(rebuilds {escape(', '.join(report.repairable))} without re-embedding stored passages)",
                      highlight=False)
    if not report.ok:
        raise typer.Exit(1)


@index_app.command("repair")
def index_repair(
    index: IndexOpt,
    component: Annotated[list[str] | None, typer.Option(
        "--component", help="rebuild this derived index even if it checks out (bm25, dense, graph)")] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Rebuild missing or damaged derived indexes from the stored passages and vectors."""
    from amsrag.errors import InputError
    from amsrag.store.open import open_index_unchecked

    bad = sorted(set(component or ()) - {"bm25", "dense", "graph"})
    if bad:
        raise InputError(f"unknown component(s) {', '.join(bad)}; choose from bm25, dense, graph")
    with open_index_unchecked(index) as idx:
        with progress_for(err, quiet) as progress:
            report = idx.repair(component or None, progress=progress)
        after = idx.check()
    if as_json:
        emit({**report.to_dict(), "ok": after.ok, "problems": after.problems})
    elif not report.rebuilt:
        out.print(f"[green]nothing to repair[/] in {escape(report.location)}", highlight=False)
    else:
        out.print(f"[green]rebuilt[/] {escape(', '.join(report.rebuilt))} in {escape(report.location)} "
                  f"({report.reembedded} passages re-embedded, {report.seconds:.1f} s); check: "
                  f"{'ok' if after.ok else 'still ' + escape('; '.join(after.problems))}", highlight=False)
    if not after.ok:
        raise typer.Exit(1)


@index_app.command("stats")
def index_stats(index: IndexOpt, as_json: JsonOpt = False) -> None:
    """Show what an index holds and how it was built."""
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        stats = idx.stats()
    if as_json:
        emit(stats)
        return
    table = Table(title=escape(f"index {stats['index']}"), show_header=False)
    for key, value in stats.items():
        table.add_row(key, escape(json.dumps(value) if isinstance(value, dict) else str(value)))
    out.print(table)


@index_app.command("export")
def index_export(
    index: IndexOpt,
    to: Annotated[str, typer.Option("--to", help="postgresql:// URL of a database without an amsrag index")],
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Copy an embedded index into PostgreSQL (stored vectors and NER are copied, nothing is re-embedded)."""
    from amsrag.errors import InputError
    from amsrag.store import EmbeddedIndex
    from amsrag.store.open import export_index, is_postgres_url

    if is_postgres_url(index):
        raise InputError("--index must be an embedded index directory to export from")
    t = time.perf_counter()
    with EmbeddedIndex.open(index) as src, progress_for(err, quiet) as progress:
        report = export_index(src, to, progress)
    target, seconds = _redacted(to), round(time.perf_counter() - t, 3)
    if as_json:
        emit({"index": index, "to": target, "passages": report.added, "seconds": seconds})
    else:
        out.print(f"[green]exported {report.added}[/] passages from {escape(index)} to {escape(target)} "
                  f"in {seconds:.1f} s (vectors copied, nothing re-embedded)")


def _redacted(url: str) -> str:
    from amsrag.store.postgres.connection import redact

    return redact(url)
