"""`amsrag demo`: the main job on the bundled demo corpus."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from amsrag.cli.chain_view import print_chain
from amsrag.config import amsrag_home
from amsrag.errors import AmsragError
from amsrag.progress import progress_for
from amsrag.types import RETRIEVERS, QAExample


def demo_data_dir() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "demo"))


def default_demo_index() -> Path:
    return amsrag_home() / "demo-index"


def load_demo_questions() -> list[QAExample]:
    rows = [json.loads(line) for line in (demo_data_dir() / "questions.jsonl").read_text("utf-8").splitlines()
            if line.strip()]
    return [QAExample(id=r["id"], question=r["question"], answers=r["answers"],
                      gold_passage_ids=r["gold_passage_ids"], dataset=r.get("dataset", ""),
                      complexity=r.get("complexity"), qtype=r.get("qtype")) for r in rows]


def open_or_build_demo_index(index_dir: Path, fresh: bool, err: Console, quiet: bool = False):
    from amsrag.ingest import iter_passages
    from amsrag.store import EmbeddedIndex

    if fresh and index_dir.exists():
        shutil.rmtree(index_dir)
    if index_dir.exists():
        try:
            index = EmbeddedIndex.open(index_dir)
            _tables_and_themes(index)  # a demo index built before tables and themes existed gets them
            return index
        except AmsragError as exc:  # built by another version: the demo index is ours to rebuild
            err.print(f"[yellow]rebuilding the demo index[/] ({escape(str(exc))})", highlight=False)
            shutil.rmtree(index_dir)
    passages = list(iter_passages([demo_data_dir() / "passages.jsonl.gz"], fmt="jsonl"))
    err.print(Text(f"building the demo index at {index_dir} from {len(passages)} bundled passages and "
                   f"{len(demo_tables())} tables"))
    index = EmbeddedIndex.create(index_dir)
    with progress_for(err, quiet) as progress:
        index.add(passages, progress=progress)
    _tables_and_themes(index)
    return index


def demo_tables() -> list:
    from amsrag.indexing.tables import read_table_inputs
    from amsrag.ingest.api import InputRoot

    folder = demo_data_dir() / "tables"
    return read_table_inputs([InputRoot(folder, "demo-tables")]).tables


def _tables_and_themes(index) -> None:
    from amsrag.indexing.themes import refresh_themes

    if index.tables() is None:
        index.put_tables(demo_tables())
    if index.themes() is None:
        refresh_themes(index)


def load_table_questions() -> list[dict]:
    text = (demo_data_dir() / "table_questions.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _showcase(questions: list[QAExample]) -> list[QAExample]:
    """One question of each kind the demo corpus holds, in a fixed order."""
    picked: list[QAExample] = []
    for want in (("hotpotqa", "bridge"), ("hotpotqa", "comparison"), ("nq", None), ("squad", None)):
        for q in questions:
            if q.dataset == want[0] and (want[1] is None or q.qtype == want[1]) and q not in picked:
                picked.append(q)
                break
    return picked


def run_demo(out: Console, err: Console, index_dir: Path | None = None, fresh: bool = False, k: int = 3,
             quiet: bool = False) -> None:
    index_dir = index_dir or default_demo_index()
    from amsrag.retrievers import retriever_for

    index = open_or_build_demo_index(index_dir, fresh, err, quiet)
    questions = load_demo_questions()
    retrievers = {name: retriever_for(index, name) for name in RETRIEVERS}
    with index:
        for q in _showcase(questions):
            vec = index.encoder.encode_query(q.question)
            table = Table(title=f"[bold]{escape(q.question)}[/]\n[dim]{escape(q.dataset)} {escape(q.qtype or '')} · "
                                f"answer: {escape(' / '.join(q.answers))}[/]", title_justify="left")
            table.add_column("retriever")
            table.add_column("rank")
            table.add_column("score", justify="right")
            table.add_column("title")
            table.add_column("gold")
            for name, r in retrievers.items():
                for h in r.search(q.question, k=k, query_vector=vec):
                    table.add_row(name if h.rank == 1 else "", str(h.rank), f"{h.score:.3f}", Text(h.title),
                                  "[green]✓[/]" if h.id in q.gold_passage_ids else "")
            out.print(table)
        _recall_summary(out, index, questions, retrievers)
        _routes(out, index, questions)
    out.print(Text(f"index: {index_dir} ({len(index)} passages). Try: amsrag search --index {index_dir} "
                   "--retriever graph \"your question\"", style="dim"))


def _recall_summary(out: Console, index, questions: list[QAExample], retrievers: dict) -> None:
    scored = [q for q in questions if q.gold_passage_ids]
    vecs = index.encoder.encode([q.question for q in scored])
    table = Table(title=f"Recall@5 of gold passages over the {len(scored)} demo questions")
    table.add_column("retriever")
    table.add_column("Recall@5", justify="right")
    table.add_column("all gold in top 5", justify="right")
    for name, r in retrievers.items():
        recalls, complete = [], 0
        for q, v in zip(scored, vecs, strict=True):
            top = {h.id for h in r.search(q.question, k=5, query_vector=v)}
            found = len(top & set(q.gold_passage_ids))
            recalls.append(found / len(q.gold_passage_ids))
            complete += found == len(q.gold_passage_ids)
        table.add_row(name, f"{sum(recalls) / len(recalls):.3f}", f"{complete}/{len(scored)}")
    out.print(table)


def _routes(out: Console, index, questions: list[QAExample]) -> None:
    """The adaptive pipeline on the showcase questions: the route each took against the fixed pipeline,
    and the answer `amsrag ask` gives with its citation; then the answers over every demo question."""
    from amsrag.generate.metrics import exact_match, token_f1
    from amsrag.pipeline import Engine

    engine = Engine(index)
    out.print("[bold]The adaptive pipeline (system full) against the fixed pipeline (all retrievers + RRF), "
              "and the answer `amsrag ask` gives[/]")
    for q in _showcase(questions):
        vec = index.encoder.encode_query(q.question)
        full = engine.retrieve(q.question, system="full", query_vector=vec)
        fixed = engine.retrieve(q.question, system="fixed", query_vector=vec)
        answer = engine.ask(q.question, system="full")
        cx = full.trace["complexity"]
        generated = answer.trace.generator
        gold = set(q.gold_passage_ids)
        right = exact_match(answer.answer, q.answers) or token_f1(answer.answer, q.answers) >= 0.5
        mark = "" if answer.abstained else (" [green]✓[/]" if right else " [red]✗[/]")
        cited = [p for p in (index.get(c) for c in answer.citations) if p is not None]
        out.print(f"\n[bold]{escape(q.question)}[/]", highlight=False)
        out.print(f"  route: {escape(_class_cell(cx))} · strategy {escape(str(full.trace['strategy']))} · "
                  f"{', '.join(r['name'] for r in full.trace['retrievers'])} · gold in top 5: "
                  f"full {len(gold & {p.id for p in full.passages})}/{len(gold)}, "
                  f"fixed {len(gold & {p.id for p in fixed.passages})}/{len(gold)}", highlight=False)
        out.print(f"  answer: [bold]{escape(answer.answer)}[/]{mark} (expected {escape(' / '.join(q.answers))}) · "
                  f"confidence {generated.confidence if generated else None} · evidence check "
                  f"{escape(str(answer.trace['corrective']['action']))}", highlight=False)
        for p in cited:
            out.print(f"  cited: {escape(p.title or p.id)}" + (" [green](gold)[/]" if p.id in gold else ""),
                      highlight=False)
        print_chain(answer.trace, out)
    out.print("")
    _answers(out, engine, questions)
    _beyond_passages(out, engine)


def _beyond_passages(out: Console, engine) -> None:
    """The other two classes of the taxonomy: questions over the bundled tables (structured: SQL) and a
    corpus-wide question (aggregation: the themes)."""
    from amsrag.generate.metrics import exact_match
    from amsrag.pipeline.trace_parts import RouteFallback, TableTrace

    out.print("\n[bold]Beyond passages: questions over the two bundled tables, and one about the whole corpus[/]")
    for q in load_table_questions():
        a = engine.ask(q["question"], system="full")
        tax = a.trace.get("taxonomy") or {}
        out.print(f"\n[bold]{escape(q['question'])}[/]", highlight=False)
        out.print(f"  route: {escape(str(tax.get('label')))} ({tax.get('alpha', 0):.2f}) → "
                  f"{escape(str(a.trace['strategy']))} · {escape(str(tax.get('reason', '')))}", highlight=False)
        structured = a.trace.structured
        if isinstance(structured, TableTrace) and structured.sql:
            right = any(exact_match(a.answer, [ans]) for ans in q["answers"])
            out.print(f"  answer: [bold]{escape(a.answer)}[/] " + ("[green]✓[/]" if right else "[red]✗[/]")
                      + f" (expected {escape(' / '.join(q['answers']))}) · confidence {structured.confidence:.2f}",
                      highlight=False)
            out.print(Text(f"  SQL on {structured.table}: {structured.sql}", style="dim"), highlight=False,
                      soft_wrap=True)
            for row in structured.cited[:3]:
                out.print(Text(f"  cited [{row.id}] {row.text[:120]}", style="dim"), highlight=False)
        else:
            out.print(Text("  answer: " + a.answer.replace("\n", "\n          ")), highlight=False)
            if a.trace.global_search is None:
                why = structured.fallback if isinstance(structured, RouteFallback) else "answered from passages"
                out.print(Text(f"  ({why})", style="dim"), highlight=False)


def _answers(out: Console, engine, questions: list[QAExample]) -> None:
    from amsrag.generate.metrics import exact_match, token_f1

    em = f1 = answered = cites_gold = 0.0
    ms: list[float] = []
    for q in questions:
        a = engine.ask(q.question, system="full")
        em += exact_match(a.answer, q.answers)
        f1 += token_f1(a.answer, q.answers)
        answered += not a.abstained
        cites_gold += bool(set(a.citations) & set(q.gold_passage_ids))
        ms.append(float(a.trace["timings_ms"]["total"]))
    n = len(questions)
    ms.sort()
    out.print(f"[bold]amsrag ask[/] on all {n} demo questions ({escape(engine.config.generator.name)} reader): "
              f"EM {em / n:.2f}, F1 {f1 / n:.2f}, answered {answered:.0f}/{n}, cited a gold passage "
              f"{cites_gold:.0f}/{n}, median {ms[n // 2]:.0f} ms per question")


def _class_cell(cx: dict) -> str:
    """The class and alpha; for zero_hop with a generator that cannot answer alone, the hop class routed by."""
    cell = f"{cx['label']} ({cx['alpha']:.2f})"
    if cx.get("route_label", cx["label"]) != cx["label"]:
        cell += f" → routed as {cx['route_label']} ({cx['route_alpha']:.2f})"
    return cell
