"""The evaluation run behind `amsrag eval`: build (or reuse) the benchmark, run every system, write
report.md / report.json / PNGs."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amsrag.errors import InputError
from amsrag.filters import Where
from amsrag.lazy import extra_hint, installed
from amsrag.progress import NullProgress, Progress

if TYPE_CHECKING:
    from amsrag.evaluate.builder import EvalQuery
    from amsrag.indexes.allowed_rows import AllowedRows
    from amsrag.pipeline import Engine

# (engine, calibration questions, progress) -> (the tuned config, what was tuned): `train route tune` in memory
Tuner = Callable[["Engine", Sequence["EvalQuery"], Progress | None], tuple[Any, dict[str, Any]]]

QUICK_SIZES = {"nq": 12, "squad": 8, "hotpotqa": 12, "musique": 8, "zero_hop": 8}
QUICK_NOISE = 60
QUICK_SYSTEMS = "bm25,dense,graph,A0,A1,A2,A3,A4,adaptive-rag,full,full@0.85/0.55,full@0.95/0.65"


@dataclass(slots=True)
class EvalOptions:
    out: Path
    qa: list[Path] = field(default_factory=list)
    fmt: str = "auto"
    corpus: Path | None = None
    noise: int | None = None  # None: 1000 (QUICK_NOISE with quick)
    systems: str | None = None
    limit: int | None = None
    answer_limit: int | None = None  # EM/F1 on a seeded sample of this many queries (None: all)
    seed: int = 13
    generator: str | None = None
    index: Path | None = None
    sizes: str | None = None
    scope: str | None = None  # None: files (gold with quick)
    data_dir: Path | None = None
    cache_dir: Path | None = None
    bootstrap: int = 1000
    quick: bool = False
    no_answers: bool = False
    tune: bool = False  # `train route tune` in memory on the benchmark's calibration questions first
    corrective: bool = True  # False: the corrective step off for this run (config override, reported)
    workers: int | None = None  # answer-phase processes (None: min(2, CPUs))
    audit: bool = True  # the citation-support audit of every answer, as `Engine.ask` runs it
    where: Where | None = None  # retrieval within this metadata filter; only questions whose gold passes it
    command: str = ""


def within_filter(queries: Sequence[EvalQuery], index: Any, allowed: AllowedRows
                  ) -> tuple[list[EvalQuery], dict[str, Any]]:
    """The queries whose gold passages are all stored and allowed by the filter, and the counts: a question
    without gold passages cannot show that its evidence lies inside the filter, so it is left out too."""
    rows = index.rows_for_ids(sorted({g for q in queries for g in q.gold}))
    kept = [q for q in queries if q.gold and all(g in rows and rows[g] in allowed for g in q.gold)]
    no_gold = sum(not q.gold for q in queries)
    return kept, {**allowed.trace(), "questions": len(queries), "kept": len(kept),
                  "gold_outside": len(queries) - len(kept) - no_gold, "no_gold": no_gold}


def _filter_queries(queries: Sequence[EvalQuery], index: Any, where: Where
                    ) -> tuple[list[EvalQuery], dict[str, Any]]:
    kept, counts = within_filter(queries, index, index.allowed_rows(where))
    if not kept:
        raise InputError(f"--where {' '.join(where.cli_args())}: no question has all its gold passages among the "
                         f"{counts['allowed']} of {counts['passages']} passages it allows ({counts['gold_outside']} "
                         f"have gold passages outside it, {counts['no_gold']} have none); nothing to score")
    return kept, counts


def _notes(report: dict[str, Any], info: dict[str, Any], run_mode: str, bench_dir: Path) -> list[str]:
    n_gold = report["queries"]["with_gold"]
    return [
        f"Retrieval metrics (nDCG@5, Recall@5, MRR@10) count only the {n_gold} queries with gold passages; "
        "zero-hop queries without gold passages count in EM/F1, retriever calls and latency, not in retrieval "
        "metrics. all-gold@5 counts only the queries with two or more gold passages (the multi-hop evidence).",
        "Retrieval latency = the query embedding (measured once per query, charged to every system that uses it: "
        "all but `bm25`) + the trace's classification, retrievers (run in parallel, so the stages can sum to more "
        "than the total), fusion and MMR; one query at a time, systems interleaved query by query, on a shared "
        "2-core machine: compare systems within this run, as ratios.",
        f"Answers: {run_mode}. EM/F1 use the official SQuAD v1.1 normalisation, max over the gold aliases; an "
        "abstention (\"insufficient evidence\") scores 0. `generate_ms_mean` in report.json is measured with the "
        "harness's sentence-embedding cache (a passage sentence is embedded once per run): not a cost figure.",
        ("Audit: every answer given is audited as `Engine.ask` audits it (the citation-support audit, "
         "`amsrag.audit`): the share flagged, mean support, the flag's precision and its recall of the wrong "
         "answers (F1 < 0.5) per system." if report["config"].get("audited") else "Audit: off in this run."),
        "MRR@10: the same system asked for k = 10 (MMR systems in a second, untimed call, since MMR's choice "
        "depends on k).",
        "Complexity classes: the silver three-way label where the question has one, else the data set's hop count "
        "(dataset-derived labels never say zero_hop). Zero-hop queries are Adaptive-RAG silver-A questions "
        "(FLAN-T5-XL answered them without retrieval); the extractive generator cannot answer closed-book, so "
        "routing them to no retrieval would cost answers here.",
        "The eval questions come from the same public files the classifier's training data was drawn from "
        "(80 % of those questions were in its training split), so the classifier table is optimistic; the routing "
        "thresholds were not tuned on these queries by this run.",
        f"Benchmark: {json.dumps(info.get('sizes'))} per group, seed {info.get('seed')}, noise {info.get('noise')}, "
        f"dropped {json.dumps(info.get('dropped'))}.",
        "Corrective step (DESIGN §6, `full` and the `full@` rows): "
        + ("on: as in `Engine.ask`, answers read the passages of a retrieval with the corrective step "
           "(`answer_path` in report.json: its time, retriever calls and actions); the retrieval metrics and "
           "latency above are those of `retrieve` (fused result, before the corrective step)."
           if report["config"].get("corrective_enabled") else "off in this run (`--no-corrective`)."),
        (f"`full` (and every CA-RRF system) runs with thresholds and priors tuned in this run (`--tune`, "
         f"in memory) on {report['config']['tuned_in_run']['calibration_questions']} calibration questions "
         f"disjoint from the eval queries: {json.dumps(report['config']['tuned_in_run'])}."
         if report["config"].get("tuned_in_run") else
         f"`full` runs at the index's router thresholds ({report['config'].get('theta_high')}/"
         f"{report['config'].get('theta_low')}). {info.get('calibration', {}).get('n', 0)} calibration questions "
         f"disjoint from these queries are in `{bench_dir / 'calibration.jsonl'}`: `--tune`, or "
         "`amsrag train route tune --index INDEX --qa` that file, tunes thresholds and priors without touching the "
         "eval queries."),
    ] + ([_filter_note(report["config"]["where"])] if report["config"].get("where") else [])


def _filter_note(counts: dict[str, Any]) -> str:
    spec = " ".join(Where.from_json(counts["where"]).cli_args())
    return (f"Filter `--where {spec}`: every system retrieves within the {counts['allowed']} of {counts['passages']} "
            f"passages it allows; only the {counts['kept']} of {counts['questions']} questions whose gold passages "
            f"all pass it are scored ({counts['gold_outside']} with gold passages outside it and "
            f"{counts['no_gold']} without gold passages left out).")


def run_eval(opts: EvalOptions, progress: Progress | None = None, log=print,
             tuner: Tuner | None = None) -> dict[str, Any]:
    """The whole evaluation; returns report.json's content (also written under `opts.out`). `tuner` runs
    `opts.tune` (`amsrag.learn.router.tune_on_calibration`: the fitting code lives in the learning wing)."""
    from amsrag.evaluate import plots
    from amsrag.evaluate.answering import make_answerer
    from amsrag.evaluate.builder import BenchmarkSpec, default_cache_dir, load_or_build, parse_sizes
    from amsrag.evaluate.corpus_index import open_or_build_index
    from amsrag.evaluate.predictions import PREDICTIONS_FILE, by_plan, plan_markdown, write_predictions
    from amsrag.evaluate.report import build_report, markdown
    from amsrag.evaluate.runner import run
    from amsrag.evaluate.systems import parse_systems
    from amsrag.ingest.dataset_facts import default_data_dir
    from amsrag.pipeline import Engine
    from amsrag.retrieve.filtered import scope
    from amsrag.store import EmbeddedIndex

    progress = progress or NullProgress()
    if opts.limit is not None and opts.limit < 1:
        raise InputError(f"--limit must be a positive integer, got {opts.limit}")
    if opts.answer_limit is not None and opts.answer_limit < 1:
        raise InputError(f"--answer-limit must be a positive integer, got {opts.answer_limit}")
    if opts.workers is not None and not 1 <= opts.workers <= 64:
        raise InputError(f"--workers must be between 1 and 64, got {opts.workers}")
    if opts.bootstrap < 100:
        raise InputError(f"--bootstrap must be >= 100, got {opts.bootstrap}")
    if opts.index is not None and opts.corpus is not None:
        raise InputError("--index and --corpus both name the corpus; give one")
    if (opts.index is not None or opts.corpus is not None) and opts.noise:
        raise InputError("--noise adds passages to a corpus built from the QA files; --corpus / --index are used "
                         "exactly as given")
    rows = parse_systems(opts.systems or (QUICK_SYSTEMS if opts.quick else None))
    sizes = parse_sizes(opts.sizes) if opts.sizes else (dict(QUICK_SIZES) if opts.quick and not opts.qa else None)
    spec = BenchmarkSpec(qa=[Path(p) for p in opts.qa], fmt=opts.fmt, corpus=opts.corpus,
                         noise=0 if opts.index or opts.corpus else opts.noise if opts.noise is not None
                         else (QUICK_NOISE if opts.quick else 1000),
                         seed=opts.seed, sizes=sizes, scope=opts.scope or ("gold" if opts.quick else "files"),
                         data_dir=opts.data_dir or default_data_dir())
    for path in spec.qa:
        if not path.exists():
            raise InputError(f"{path}: no such file")
    cache_dir = opts.cache_dir or default_cache_dir()
    index = None
    if opts.index is not None:  # the prebuilt index is the corpus; gold passages are matched to it by content
        index = EmbeddedIndex.open(opts.index)
        spec.corpus_passages = list(index.iter_passages())
    bench, bench_dir = load_or_build(spec, cache_dir)
    log(f"benchmark {bench_dir}: {len(bench.queries)} queries, {len(bench.passages)} passages")
    if index is None:
        index = open_or_build_index(bench.passages, bench_dir / "index", cache_dir, progress=progress)
    index_path = str(index.path)
    queries = bench.queries
    filter_counts: dict[str, Any] | None = None
    if opts.where:  # before --limit: the sample is drawn from the questions the filter keeps
        queries, filter_counts = _filter_queries(queries, index, opts.where)
        log(_filter_note(filter_counts))
    if opts.limit:  # a seeded sample across groups rather than the first groups in file order
        import random

        order = list(range(len(queries)))
        random.Random(opts.seed).shuffle(order)
        queries = [queries[i] for i in sorted(order[: opts.limit])]
    answerer = None if opts.no_answers else make_answerer(index, opts.generator, cache_dir / "sentence-vectors.npz")
    mask = None
    if opts.answer_limit is not None and opts.answer_limit < len(queries):
        import random

        chosen = set(random.Random(f"{opts.seed}:answers").sample(range(len(queries)), opts.answer_limit))
        mask = [i in chosen for i in range(len(queries))]
    knows = answerer.knows if answerer else False
    tuning: dict[str, Any] = {}
    config_override = None
    if opts.tune:
        if tuner is None:
            raise InputError("tune=True needs a tuner: run_eval(..., tuner=amsrag.learn.router.tune_on_calibration)")
        with Engine(index, generator_knows=knows) as probe:
            config_override, tuning = tuner(probe, bench.calibration, progress)
        log(f"tuned on {tuning['calibration_questions']} calibration questions: theta "
            f"{tuning['theta_high']}/{tuning['theta_low']}")
        index = EmbeddedIndex.open(index.path)  # the probe engine closed it
    if not opts.corrective and hasattr(index.config, "corrective"):
        config_override = (config_override or index.config).model_copy(deep=True)
        config_override.corrective.enabled = False
    with Engine(index, generator_knows=knows, config=config_override) as engine:
        workers = opts.workers or min(2, os.cpu_count() or 1)
        # resolved on this engine's index (the probe engine of --tune closed the one the questions were kept on)
        allowed = engine.index.allowed_rows(opts.where) if opts.where else None
        with scope(allowed):  # every retrieval of the run (answers' too) ranks within the filter
            result = run(engine, queries, rows, answerer, progress, answer_mask=mask, workers=workers,
                         audit=opts.audit)
        cfg = engine.config
        config = {
            "command": opts.command, "benchmark": bench.info, "benchmark_key": bench.key, "index": index_path,
            "systems": [r.name for r in rows], "limit": opts.limit, "answer_limit": opts.answer_limit,
            "seed": opts.seed, "k": 5,
            "theta_high": cfg.router.theta_high, "theta_low": cfg.router.theta_low,
            "beta_by_class": cfg.fusion.beta_by_class, "generator_knows": engine.generator_knows,
            "tuned_in_run": tuning or None,
            "corrective_enabled": bool(getattr(getattr(cfg, "corrective", None), "enabled", False)),
            "answer_workers": workers if answerer is not None else None,
            "audited": bool(opts.audit and answerer is not None and cfg.audit.enabled),
            "seconds": round(result.seconds, 1),
        }
        if filter_counts is not None:
            config["where"] = filter_counts
        report = build_report(result, config, len(index), b=opts.bootstrap, seed=opts.seed)
    plans = by_plan(result)
    for name, table in plans.items():
        report["systems"][name]["by_plan"] = table
    opts.out.mkdir(parents=True, exist_ok=True)
    write_predictions(result, opts.out / PREDICTIONS_FILE)
    (opts.out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    if installed("matplotlib"):
        plots.quality_vs_calls(report, opts.out / "quality_vs_calls.png")
        plots.latency_breakdown(report, opts.out / "latency_breakdown.png")
        plots.reliability(result.predictions, [q.complexity for q in queries], opts.out / "reliability.png")
    else:
        log(f"figures not drawn: matplotlib is not installed ({extra_hint('plots')})")
    n_answered = len(queries) if mask is None else sum(mask)
    mode = (f"`{result.generator}` generator reading each system's k = 5 passages, as `Engine.ask` does (identical "
            f"inputs answered once), on {n_answered} of the {len(queries)} queries (the same ones for every system), "
            f"after the timed retrieval, in {report['config']['answer_workers']} process(es)"
            if answerer is not None else "not computed (--no-answers)")
    text = markdown(report, opts.command, _notes(report, bench.info, mode, bench_dir))
    if plans:
        text += "\n\n" + plan_markdown(plans)
    (opts.out / "report.md").write_text(text + "\n")
    return report
