"""`amsrag eval`: the evaluation run's options on the command line (the run is `amsrag.evaluate.harness`)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.text import Text

from amsrag.cli.common import QuietOpt
from amsrag.evaluate.harness import EvalOptions, run_eval
from amsrag.filters import Where

WHERE_HELP = (
    "retrieve only within passages matching FIELD=VALUE[,VALUE…] (repeatable; fields AND, values OR), as "
    "`search --where`, and score only the questions whose gold passages all match (the report gives the count "
    "kept; questions without gold passages are left out): source=GLOB (the passage's metadata source or "
    "document key), type=pdf,html,docx,pptx,markdown,text, doc=GLOB (the document key). A benchmark corpus built "
    "from QA files has no file types, so type= keeps nothing there; its passages' document key is the passage "
    "id (doc= and source= globs match ids), and their source is the data set (e.g. hotpotqa) when the passages "
    "were indexed with it (passage JSONL metadata, dataset files; a benchmark's cached passages.jsonl keeps none)")


def eval_command(
    out: Annotated[Path, typer.Option("--out", help="output directory (report.md, report.json, *.png)")],
    qa: Annotated[list[Path] | None, typer.Option(
        "--qa", help="QA files (any ../shared/data format or amsrag QA JSONL); default: the paper-like mix")] = None,
    fmt: Annotated[str, typer.Option("--format", help="format of the --qa files (auto-detected by default)")] = "auto",
    corpus: Annotated[Path | None, typer.Option("--corpus", help="passages JSONL: use exactly this corpus")] = None,
    noise: Annotated[int | None, typer.Option("--noise", help="Wikipedia noise passages (default 1000)")] = None,
    systems: Annotated[str | None, typer.Option(
        "--systems", help="comma-separated: bm25,dense,graph,fixed,A0..A4,adaptive-rag,full,full@0.90/0.60")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="evaluate a seeded sample of N queries")] = None,
    answer_limit: Annotated[int | None, typer.Option(
        "--answer-limit", help="EM/F1 on a seeded sample of N of the queries (generation dominates the run time)"
    )] = None,
    seed: Annotated[int, typer.Option("--seed", help="sampling and bootstrap seed")] = 13,
    generator: Annotated[str | None, typer.Option("--generator", help="generator name (default extractive)")] = None,
    index: Annotated[Path | None, typer.Option("--index", help="reuse this prebuilt index as the corpus")] = None,
    sizes: Annotated[str | None, typer.Option(
        "--sizes", help="questions per group, e.g. nq=250,squad=150,hotpotqa=250,musique=200,zero_hop=150")] = None,
    scope: Annotated[str | None, typer.Option(
        "--scope", help="corpus: files (every paragraph of the QA files) or gold (the questions' gold passages)"
    )] = None,
    data_dir: Annotated[Path | None, typer.Option("--data", help="shared data folder (default $AMSRAG_DATA "
                                                                "or ../shared/data)")] = None,
    cache_dir: Annotated[Path | None, typer.Option("--cache", help="benchmark / index / vector cache folder")] = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="bootstrap resamples B")] = 1000,
    quick: Annotated[bool, typer.Option("--quick", help="a small benchmark (~1-2 minutes) for CI")] = False,
    no_answers: Annotated[bool, typer.Option("--no-answers", help="retrieval metrics only (no generation)")] = False,
    tune: Annotated[bool, typer.Option(
        "--tune", help="`train route tune` (thresholds, priors) in memory on calibration questions disjoint from the "
        "eval queries before the run")] = False,
    no_audit: Annotated[bool, typer.Option(
        "--no-audit", help="do not audit the answers (the citation-support audit, reported per system)")] = False,
    no_corrective: Annotated[bool, typer.Option(
        "--no-corrective", help="turn the corrective step off for this run (it is reported in the config)")] = False,
    workers: Annotated[int | None, typer.Option(
        "--workers", help="processes for the answer phase, after the timed retrieval (default: min(2, CPUs))")] = None,
    sections: Annotated[str | None, typer.Option(
        "--sections", help="comma-separated extra sections: taxonomy (five-way routing on a mixed set, structured "
        "answers in the open setting), tables (WikiTableQuestions given the table), themes (theme recovery), cmrc "
        "(Chinese retrieval and answers on CMRC 2018)"
    )] = None,
    where: Annotated[list[str] | None, typer.Option("--where", help=WHERE_HELP)] = None,
    quiet: QuietOpt = False,
) -> None:
    """Evaluate every system in one run on one benchmark: report.md, report.json, PNGs."""
    from rich.console import Console

    from amsrag.progress import progress_for

    chosen = Where.parse(where)  # a malformed filter: exit code 2 before anything is built
    err = Console(stderr=True)
    command = "amsrag " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "amsrag eval"
    opts = EvalOptions(out=out, qa=list(qa or []), fmt=fmt, corpus=corpus, noise=noise, systems=systems, limit=limit,
                       answer_limit=answer_limit,
                       seed=seed, generator=generator, index=index, sizes=sizes, scope=scope, data_dir=data_dir,
                       cache_dir=cache_dir, bootstrap=bootstrap, quick=quick, no_answers=no_answers, tune=tune,
                       corrective=not no_corrective, workers=workers, audit=not no_audit,
                       where=chosen or None, command=command)
    with progress_for(err, quiet) as progress:
        from amsrag.learn.router import tune_on_calibration

        report = run_eval(opts, progress, log=lambda m: err.print(Text(str(m)), highlight=False),
                          tuner=tune_on_calibration if tune else None)
    if sections:
        from amsrag.learn.taxonomy.sections import append_sections

        append_sections(out, [s.strip() for s in sections.split(",") if s.strip()], data_dir, cache_dir, seed,
                        log=lambda m: err.print(Text(str(m)), highlight=False))
    err.print(f"wrote {escape(str(out / 'report.md'))}, {escape(str(out / 'report.json'))} and PNGs "
              f"({report['n_queries']} queries, {len(report['systems'])} systems)", highlight=False)
