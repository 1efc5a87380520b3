"""`amsrag index build|add|delete|stats|export`: build and maintain an index."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from amsrag.cli.common import FormatOpt, IndexOpt, JsonOpt, emit, err, out
from amsrag.config import AmsragConfig
from amsrag.progress import RichProgress
from amsrag.store.base import PassageIndex
from amsrag.types import Passage

index_app = typer.Typer(no_args_is_help=True, help="Build and maintain an index directory.")


def _read_inputs(inputs: list[Path], fmt: str, config: AmsragConfig) -> list[Passage]:
    from amsrag.ingest import iter_passages

    return list(iter_passages(inputs, fmt=fmt, chunking=config.chunking))


def _ingest(index: PassageIndex, passages: list[Passage], as_json: bool) -> None:
    with RichProgress(console=err) as progress:
        report = index.add(passages, progress=progress)
    summary = {"index": index.location, "received": report.received, "added": report.added,
               "skipped_existing": report.skipped_existing,
               "skipped_duplicate_content": report.skipped_duplicate_content, "passages": len(index),
               "seconds": {k: round(v, 3) for k, v in report.seconds.items()}}
    if as_json:
        emit(summary)
    else:
        out.print(f"[green]added {report.added}[/] passages to {index.location} "
                  f"({report.skipped_existing} already stored, {report.skipped_duplicate_content} duplicate "
                  f"content skipped); the index now holds {len(index)} passages")


@index_app.command("build")
def index_build(
    inputs: Annotated[list[Path], typer.Argument(help="files or folders to index")],
    index: IndexOpt,
    fmt: FormatOpt = "auto",
    config_file: Annotated[Path | None, typer.Option("--config", help="TOML configuration")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a new index from INPUT files or folders."""
    from amsrag.errors import InputError
    from amsrag.store.open import create_index

    config = AmsragConfig.load(config_file) if config_file else AmsragConfig()
    passages = _read_inputs(inputs, fmt, config)
    if not passages:
        raise InputError(f"empty corpus: no passages found in {', '.join(map(str, inputs))}; nothing was built")
    with create_index(index, config) as idx:
        _ingest(idx, passages, as_json)


@index_app.command("add")
def index_add(
    inputs: Annotated[list[Path], typer.Argument(help="files or folders to add")],
    index: IndexOpt,
    fmt: FormatOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Add passages to an existing index (only new passages are embedded)."""
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        passages = _read_inputs(inputs, fmt, idx.config)
        _ingest(idx, passages, as_json)


@index_app.command("delete")
def index_delete(
    ids: Annotated[list[str], typer.Argument(help="passage ids")],
    index: IndexOpt,
    as_json: JsonOpt = False,
) -> None:
    """Delete passages by id (all or nothing)."""
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        report = idx.delete(ids)
        if as_json:
            emit({"index": idx.location, "deleted": report.deleted, "passages": len(idx)})
        else:
            out.print(f"[green]deleted {report.deleted}[/] passages; the index now holds {len(idx)}")


@index_app.command("stats")
def index_stats(index: IndexOpt, as_json: JsonOpt = False) -> None:
    """Show what an index holds and how it was built."""
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        stats = idx.stats()
    if as_json:
        emit(stats)
        return
    table = Table(title=f"index {stats['index']}", show_header=False)
    for key, value in stats.items():
        table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
    out.print(table)


@index_app.command("export")
def index_export(
    index: IndexOpt,
    to: Annotated[str, typer.Option("--to", help="postgresql:// URL of a database without an amsrag index")],
    as_json: JsonOpt = False,
) -> None:
    """Copy an embedded index into PostgreSQL (stored vectors and NER are copied, nothing is re-embedded)."""
    from amsrag.errors import InputError
    from amsrag.store import EmbeddedIndex
    from amsrag.store.open import export_index, is_postgres_url

    if is_postgres_url(index):
        raise InputError("--index must be an embedded index directory to export from")
    t = time.perf_counter()
    with EmbeddedIndex.open(index) as src, RichProgress(console=err) as progress:
        report = export_index(src, to, progress)
    summary = {"index": index, "to": _redacted(to), "passages": report.added,
               "seconds": round(time.perf_counter() - t, 3)}
    if as_json:
        emit(summary)
    else:
        out.print(f"[green]exported {report.added}[/] passages from {index} to {summary['to']} "
                  f"in {summary['seconds']:.1f} s (vectors copied, nothing re-embedded)")


def _redacted(url: str) -> str:
    from amsrag.store.postgres.store import redact

    return redact(url)
