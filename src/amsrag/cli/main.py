"""The `amsrag` command line (DESIGN §9). Thin: parsing, calling the library, printing."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from amsrag.classify.cli import classifier_app
from amsrag.config import AmsragConfig
from amsrag.correct.cli import evaluator_app
from amsrag.errors import AmsragError
from amsrag.evaluate.cli import eval_command
from amsrag.ingest.formats import FORMATS
from amsrag.progress import RichProgress

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="amsrag: adaptive multi-source RAG.")
index_app = typer.Typer(no_args_is_help=True, help="Build and maintain an index directory.")
app.add_typer(index_app, name="index")
app.add_typer(classifier_app, name="classifier")
app.add_typer(evaluator_app, name="evaluator")
app.command("eval")(eval_command)

out = Console()
err = Console(stderr=True)

IndexOpt = Annotated[str, typer.Option("--index", help="index directory or postgresql:// URL")]
JsonOpt = Annotated[bool, typer.Option("--json", help="one JSON object per line on stdout")]
FormatOpt = Annotated[str, typer.Option("--format", help="auto or one of: " + ", ".join(FORMATS))]


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _read_inputs(inputs: list[Path], fmt: str, config: AmsragConfig) -> list:
    from amsrag.ingest import iter_passages

    return list(iter_passages(inputs, fmt=fmt, chunking=config.chunking))


def _ingest(index, passages: list, as_json: bool) -> None:
    with RichProgress(console=err) as progress:
        report = index.add(passages, progress=progress)
    summary = {"index": str(index.path), "received": report.received, "added": report.added,
               "skipped_existing": report.skipped_existing,
               "skipped_duplicate_content": report.skipped_duplicate_content, "passages": len(index),
               "seconds": {k: round(v, 3) for k, v in report.seconds.items()}}
    if as_json:
        _emit(summary)
    else:
        out.print(f"[green]added {report.added}[/] passages to {index.path} "
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
            _emit({"index": str(idx.path), "deleted": report.deleted, "passages": len(idx)})
        else:
            out.print(f"[green]deleted {report.deleted}[/] passages; the index now holds {len(idx)}")


@index_app.command("stats")
def index_stats(index: IndexOpt, as_json: JsonOpt = False) -> None:
    """Show what an index holds and how it was built."""
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        stats = idx.stats()
    if as_json:
        _emit(stats)
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
        _emit(summary)
    else:
        out.print(f"[green]exported {report.added}[/] passages from {index} to {summary['to']} "
                  f"in {summary['seconds']:.1f} s (vectors copied, nothing re-embedded)")


def _redacted(url: str) -> str:
    from amsrag.store.postgres.store import redact

    return redact(url)


@app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="the query")],
    index: IndexOpt,
    retriever: Annotated[str, typer.Option("--retriever", help="bm25|dense|graph")] = "bm25",
    k: Annotated[int, typer.Option("-k", help="number of hits")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Run one retriever and print its ranked hits."""
    from amsrag.store.open import open_index

    with open_index(index) as idx:
        r = idx.retriever(retriever)
        t = time.perf_counter()
        hits = r.search(query, k=k)
        ms = (time.perf_counter() - t) * 1000
    if as_json:
        _emit({"query": query, "retriever": retriever,
               "hits": [{"id": h.id, "title": h.title, "score": h.score, "rank": h.rank} for h in hits],
               "ms": round(ms, 3)})
        return
    table = Table(title=f"{retriever}: {query}  ({ms:.1f} ms)")
    for col in ("rank", "score", "id", "title"):
        table.add_column(col)
    for h in hits:
        table.add_row(str(h.rank), f"{h.score:.4f}", h.id, h.title)
    out.print(table)


SystemOpt = Annotated[str, typer.Option("--system", help="full|fixed|A0..A4|bm25|dense|graph|adaptive-rag")]


def _print_trace(trace: dict) -> None:
    cx = trace.get("complexity")
    head = f"system [bold]{trace['system']}[/] · strategy [bold]{trace['strategy']}[/] · {trace['reason']}"
    if cx:
        probs = " ".join(f"{k} {v:.2f}" for k, v in cx["probs"].items())
        head += f"\ncomplexity [bold]{cx['label']}[/] (alpha {cx['alpha']:.3f}; {probs})"
        if "route_label" in cx:
            head += (f" → routed as {cx['route_label']} (alpha {cx['route_alpha']:.3f}): "
                     "the generator cannot answer alone")
    weights = " ".join(f"{r} {w:.3f}" for r, w in trace["fusion"]["weights"].items())
    head += f"\nfusion {trace['fusion']['method']} weights {weights}"
    for r in trace["retrievers"]:
        error = f" [red]{r['error']}[/]" if r["error"] else ""
        head += f"\n  {r['name']}: {len(r['hits'])} hits in {r['ms']:.1f} ms{error}"
    for rnd in (trace.get("second_hop") or {}).get("rounds", []):
        head += "\nsecond hop via " + ", ".join(f"{b['entity']} (+{len(b['rows'])})" for b in rnd["bridges"])
    corr = trace.get("corrective") or {}
    if corr.get("action") not in (None, "skipped"):
        head += f"\ncorrective: {corr['action']} (S = {corr['score']:.3f})"
    for e in trace.get("escalations", []):
        head += f"\n  escalated {e['from']} → {e['to']}: {e['reason']}"
    t = trace["timings_ms"]
    head += (f"\ntimings (ms): embed {t['embed']}, classify {t.get('classify', 0)}, fusion {t['fusion']}, "
             f"mmr {t['mmr']}, total {t['total']}")
    out.print(head, highlight=False)


@app.command("retrieve")
def retrieve(
    query: Annotated[str, typer.Argument(help="the question")],
    index: IndexOpt,
    system: SystemOpt = "full",
    k: Annotated[int | None, typer.Option("-k", help="passages to return (default: the strategy's k)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Adaptive retrieval: classify, route, retrieve, fuse; prints the passages and the trace."""
    from amsrag.pipeline import Engine

    with Engine.open(index) as engine:
        result = engine.retrieve(query, system=system, k=k)
    if as_json:
        _emit(result.to_dict())
        return
    _print_trace(result.trace)
    table = Table(title=query)
    for col in ("#", "score", "id", "title", "text"):
        table.add_column(col)
    for i, p in enumerate(result.passages, 1):
        table.add_row(str(i), f"{p.score:.4f}", p.id, p.title, p.text[:160] + ("…" if len(p.text) > 160 else ""))
    out.print(table)


@app.command("ask")
def ask(
    query: Annotated[str, typer.Argument(help="the question")],
    index: IndexOpt,
    system: SystemOpt = "full",
    generator: Annotated[str | None, typer.Option(
        "--generator", help="extractive|llamacpp|openai (default: the index configuration's, extractive)")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", help="llamacpp: GGUF file; openai: the model name sent to the server")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="openai: the server's API root, e.g. "
                                                 "http://127.0.0.1:8080/v1")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer with citations from the retrieved passages, and show the route taken."""
    from amsrag.generate import make_generator
    from amsrag.pipeline import Engine

    with Engine.open(index) as engine:
        cfg = engine.config.generator
        name = generator or cfg.name
        update: dict = {"name": name}
        if model is not None:
            update["model_path" if name == "llamacpp" else "model"] = model
        if base_url is not None:
            update["base_url"] = base_url
        gen = make_generator(cfg.model_copy(update=update), encoder=engine.index.encoder)
        result = engine.ask(query, system=system, generator=gen)
    if as_json:
        _emit(result.to_dict())
        return
    _print_trace(result.trace)
    g = result.trace["generator"]
    line = f"generator {g['name']}: {g['prompt_tokens']} prompt + {g['output_tokens']} output tokens, {g['ms']:.1f} ms"
    if g.get("confidence") is not None:
        line += f", confidence {g['confidence']:.3f}"
    out.print(line, highlight=False)
    if g.get("error"):
        err.print(f"[yellow]warning:[/] generator {g['requested']} failed ({g['error']}); "
                  "the answer is the extractive one (retrieval only)", highlight=False, soft_wrap=True)
    out.print(f"\n[bold]{result.answer}[/]  [dim]{' '.join('[' + c + ']' for c in result.citations)}[/]",
              highlight=False)


route_app = typer.Typer(no_args_is_help=True, help="Routing: tune thresholds and priors.")
app.add_typer(route_app, name="route")


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
) -> None:
    """Grid-search (theta_high, theta_low) under the cost matrix and fit the CA-RRF priors; saves both."""
    from tqdm import tqdm

    from amsrag.ingest import load_qa
    from amsrag.pipeline import Engine
    from amsrag.route.tune import calibration_queries, fit_beta, tune_thresholds, write_curve
    from amsrag.store.open import is_postgres_url

    questions = [q for path in qa for q in load_qa(path, fmt=fmt, limit=limit).questions]
    with Engine.open(index) as engine:
        with tqdm(total=len(questions), desc="calibration queries", file=sys.stderr) as bar:
            cal = calibration_queries(engine, questions, bar.update)
        cfg = engine.config
        best, curve = tune_thresholds(cal, cfg.router, miss_cap, engine.generator_knows)
        beta = fit_beta(cal)
        new = cfg.model_copy(deep=True)
        new.router.theta_high, new.router.theta_low = best.theta_high, best.theta_low
        new.fusion.beta_by_class = beta
        engine.index.update_config(new)
        if curve_file is None and not is_postgres_url(index):
            curve_file = Path(index) / "route-tune.json"
        if curve_file is not None:
            write_curve(curve_file, best, curve, beta, len(cal))
    summary = {"queries": len(cal), "theta_high": best.theta_high, "theta_low": best.theta_low,
               "expected_loss": round(best.loss, 4), "multi_hop_miss_rate": round(best.miss_rate, 4),
               "route_mix": best.route_mix, "miss_cap_met": best.miss_rate <= miss_cap, "beta_by_class": beta,
               "curve": str(curve_file) if curve_file else None}
    if as_json:
        _emit(summary)
        return
    out.print(summary)
    if not summary["miss_cap_met"]:
        err.print(f"[yellow]warning:[/] no threshold pair keeps the multi_hop miss rate within {miss_cap}; "
                  f"the pair with the least expected cost was saved")


@app.command("demo")
def demo(
    index: Annotated[Path | None, typer.Option("--index", help="where to build the demo index")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="rebuild the demo index")] = False,
    k: Annotated[int, typer.Option("-k", help="hits shown per retriever")] = 3,
) -> None:
    """Build an index over the bundled demo corpus and show each retriever at work."""
    from amsrag.demo import run_demo

    run_demo(out, err, index_dir=index, fresh=fresh, k=k)


@app.command("serve")
def serve(
    index: IndexOpt,
    host: Annotated[str | None, typer.Option("--host", help="bind address (default 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option("--port", help="TCP port (default 8000)")] = None,
    config_file: Annotated[Path | None, typer.Option("--config", help="TOML whose [serve] section to use")] = None,
    access_log: Annotated[bool, typer.Option("--access-log", help="log every request")] = False,
) -> None:
    """HTTP API, OpenAI-compatible endpoint and web UI over an index (API keys: $AMSRAG_API_KEYS)."""
    from amsrag.serve import run

    run(index, host=host, port=port, config_file=config_file, access_log=access_log)


def main() -> None:
    try:
        app()
    except AmsragError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
