"""`amsrag index tables list|query`, `amsrag index themes show|rebuild`, `amsrag train tables train` and
`amsrag train taxonomy train`: the structured and global routes' sources and models (`tables_app` is the old
`amsrag tables` group, all three commands, kept as a hidden alias for one release)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from amsrag.cli.common import DataOpt, IndexOpt, JsonOpt, QuietOpt, emit, err, out
from amsrag.errors import InputError

tables_app = typer.Typer(no_args_is_help=True, help="The index's tables and the semantic parser.")
taxonomy_app = typer.Typer(no_args_is_help=True, help="The five-way taxonomy's task head.")
themes_app = typer.Typer(no_args_is_help=True, help="The corpus themes of the global route.")
index_tables_app = typer.Typer(no_args_is_help=True, help="The index's tables: list them, query them.")
train_tables_app = typer.Typer(no_args_is_help=True, help="The semantic parser of the table route.")


def _data_dir(data: Path | None) -> Path:
    from amsrag.ingest.dataset_facts import default_data_dir

    data_dir = data or default_data_dir()
    if not data_dir.is_dir():
        raise InputError(f"{data_dir}: data folder not found (pass --data or set $AMSRAG_DATA)")
    return data_dir


@index_tables_app.command("list")
@tables_app.command("list")
def tables_list(index: IndexOpt, as_json: JsonOpt = False) -> None:
    """The tables of an index: id, rows, columns with their types."""
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        store = idx.tables()
        profiles = store.profiles() if store is not None else []
    if as_json:
        emit({"index": index, "tables": [p.to_dict() for p in profiles]})
        return
    if not profiles:
        out.print(f"{escape(index)} holds no tables (add CSV, TSV, Excel or SQLite files with `amsrag index add`)")
        return
    view = Table("table", "rows", "columns")
    for p in profiles:
        view.add_row(escape(p.table_id), str(p.n_rows),
                     escape(", ".join(f"{c.name} ({c.type}{', ' + c.unit if c.unit else ''})" for c in p.columns)))
    out.print(view)


@index_tables_app.command("query")
@tables_app.command("query")
def tables_query(
    sql: Annotated[str, typer.Argument(help="one read-only SELECT over the index's tables (their sql names, "
                                            "see `index tables list --json`)")],
    index: IndexOpt,
    as_json: JsonOpt = False,
) -> None:
    """Run one guarded, read-only SELECT (the structured route's guard: no writes, no other tables, an
    allowlist of functions, a row limit and a timeout)."""
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        store = idx.tables()
        if store is None:
            raise InputError(f"{index} holds no tables")
        cfg = idx.config.tables
        rows = store.runner(timeout_s=cfg.timeout_s, row_limit=cfg.row_limit).run(sql)
    if as_json:
        emit({"columns": list(rows.columns), "rows": [list(r) for r in rows.rows], "truncated": rows.truncated})
        return
    view = Table(*[escape(c) for c in rows.columns])
    for r in rows.rows:
        view.add_row(*[escape(str(v)) for v in r])
    out.print(view)
    if rows.truncated:
        err.print(f"(truncated at {len(rows.rows)} rows: tables.row_limit)")


@train_tables_app.command("train")
@tables_app.command("train")
def tables_train(
    out_dir: Annotated[Path, typer.Option("--out", help="artifact folder; src/amsrag/data/tables is the shipped "
                                                        "one")],
    data: DataOpt = None,
) -> None:
    """Train the semantic parser on WikiTableQuestions (its test tables held out)."""
    from amsrag.learn.tables.train import main as train_main

    train_main(["--data", str(_data_dir(data)), "--out", str(out_dir)])


@taxonomy_app.command("train")
def taxonomy_train(
    out_dir: Annotated[Path, typer.Option("--out", help="artifact folder; src/amsrag/data/task is the shipped one")],
    data: DataOpt = None,
    seed: Annotated[int, typer.Option("--seed")] = 13,
    as_json: JsonOpt = False,
) -> None:
    """Train the task head (text / aggregation / structured) and fit the taxonomy's thresholds."""
    import logging

    from amsrag.learn.taxonomy.train import train

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    card = train(_data_dir(data), out_dir, seed)
    if as_json:
        emit(card)
    else:
        out.print(card["calibration_metrics"])


@themes_app.command("show")
def themes_show(index: IndexOpt, as_json: JsonOpt = False) -> None:
    """The index's themes: size, key terms, representative passages."""
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        themes = idx.themes()
    if themes is None or themes.k == 0:
        raise InputError(f"{index} has no themes (built at index time once it holds themes.min_passages passages; "
                         f"`amsrag index themes rebuild --index {index}`)")
    rows = [{"id": t.id, "size": t.size, "terms": list(t.label_terms), "representatives": list(t.representatives)}
            for t in themes.themes]
    if as_json:
        emit({"index": index, "themes": rows, "passages": themes.n_passages})
        return
    view = Table("theme", "passages", "key terms", "representatives")
    for r in sorted(rows, key=lambda r: -int(r["size"])):  # type: ignore[call-overload]
        view.add_row(str(r["id"]), str(r["size"]), escape(", ".join(r["terms"])),  # type: ignore[arg-type]
                     escape(", ".join(r["representatives"])))  # type: ignore[arg-type]
    out.print(view)


@themes_app.command("rebuild")
def themes_rebuild(index: IndexOpt, as_json: JsonOpt = False, quiet: QuietOpt = False) -> None:
    """Rebuild the themes from every passage vector (they are otherwise kept up to date incrementally)."""
    from amsrag.indexing.themes import refresh_themes
    from amsrag.progress import progress_for
    from amsrag.store.open import open_index

    with open_index(index) as idx, progress_for(err, quiet) as progress:
        report = refresh_themes(idx, notice=lambda m: err.print(escape(m)), rebuild=True, progress=progress)
    if as_json:
        emit(report.to_dict())
    else:
        out.print(f"[green]themes {report.action}[/]: {report.themes} themes over {report.passages} passages, "
                  f"{report.seconds:.1f} s")
