"""`amsrag demo --lang zh`: the two Chinese articles amsrag was designed from, indexed and asked three questions.

Each question shows what each retriever finds (a passage holding the question's `evidence` string is gold),
what BM25 found with the tokenizer amsrag had before it segmented Chinese, the route `full` took, and the
answer `amsrag ask` gives with its citation.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from amsrag.cli.demo import demo_data_dir
from amsrag.config import amsrag_home
from amsrag.errors import AmsragError
from amsrag.progress import progress_for
from amsrag.types import RETRIEVERS


@dataclass(frozen=True, slots=True)
class ZhQuestion:
    id: str
    question: str
    answers: list[str]
    evidence: str


def default_zh_index() -> Path:
    return amsrag_home() / "demo-index-zh"


def zh_files() -> list[Path]:
    return sorted((demo_data_dir() / "zh").glob("*.txt"))


def load_zh_questions() -> list[ZhQuestion]:
    text = (demo_data_dir() / "zh" / "questions.jsonl").read_text("utf-8")
    return [ZhQuestion(r["id"], r["question"], r["answers"], r["evidence"])
            for r in (json.loads(line) for line in text.splitlines() if line.strip())]


def open_or_build_zh_index(index_dir: Path, fresh: bool, err: Console, quiet: bool = False):
    from amsrag.evaluate.cmrc import chinese_config
    from amsrag.ingest import iter_passages
    from amsrag.store import EmbeddedIndex

    if fresh and index_dir.exists():
        shutil.rmtree(index_dir)
    if index_dir.exists():
        try:
            return EmbeddedIndex.open(index_dir)
        except AmsragError as exc:  # built by another version: the demo index is ours to rebuild
            err.print(f"[yellow]rebuilding the Chinese demo index[/] ({escape(str(exc))})", highlight=False)
            shutil.rmtree(index_dir)
    from amsrag.embed.multilingual import package_version

    package_version()  # the multilingual extra: named before the build starts, not halfway through it
    passages = list(iter_passages(zh_files()))
    config = chinese_config()
    err.print(Text(f"building the Chinese demo index at {index_dir} from {len(passages)} passages of "
                   f"{len(zh_files())} articles (dense encoder {config.embedding.model}, BM25 {config.bm25.cjk})"))
    index = EmbeddedIndex.create(index_dir, config)
    with progress_for(err, quiet) as progress:
        index.add(passages, progress=progress)
    return index


def _old_bm25_hits(index, question: str) -> int:
    """Passages BM25 matches with the tokenizer amsrag had before (`cjk = "none"`)."""
    from amsrag.indexes.bm25 import BM25Index
    from amsrag.types import PassageRow

    rows = [PassageRow(i, p.id, p.title, p.text) for i, p in enumerate(index.iter_passages())]
    scores = BM25Index.build(rows, index.config.bm25.model_copy(update={"cjk": "none"})).scores(question)
    return int((scores > 0).sum())


def run_demo_zh(out: Console, err: Console, index_dir: Path | None = None, fresh: bool = False, k: int = 3,
                quiet: bool = False) -> None:
    from amsrag.generate.zh_metrics import char_em, char_f1
    from amsrag.pipeline import Engine
    from amsrag.retrievers import retriever_for

    index_dir = index_dir or default_zh_index()
    index = open_or_build_zh_index(index_dir, fresh, err, quiet)
    engine = Engine(index)
    right = 0
    questions = load_zh_questions()
    with engine:
        gold_of = {q.id: {p.id for p in index.iter_passages() if q.evidence in p.text} for q in questions}
        for q in questions:
            gold = gold_of[q.id]
            vec = index.encoder.encode_query(q.question)
            table = Table(title=f"[bold]{escape(q.question)}[/]\n[dim]answer: {escape(' / '.join(q.answers))}[/]",
                          title_justify="left")
            for column in ("retriever", "rank", "score", "passage", "gold"):
                table.add_column(column, justify="right" if column == "score" else "left")
            for name in RETRIEVERS:
                for h in retriever_for(index, name).search(q.question, k=k, query_vector=vec):
                    p = index.get(h.id)
                    snippet = (p.text[:40] + "…") if p is not None else h.id
                    table.add_row(name if h.rank == 1 else "", str(h.rank), f"{h.score:.3f}", Text(snippet),
                                  "[green]✓[/]" if h.id in gold else "")
            out.print(table)
            out.print(Text(f"  BM25 with the tokenizer amsrag had before (one token per run of Han characters): "
                           f"{_old_bm25_hits(index, q.question)} passages matched", style="dim"), highlight=False)
            a = engine.ask(q.question, system="full")
            cx = a.trace["complexity"] or {}
            ok = char_em(a.answer, q.answers) or char_f1(a.answer, q.answers) >= 0.5
            right += ok and not a.abstained
            mark = "" if a.abstained else (" [green]✓[/]" if ok else " [red]✗[/]")
            out.print(f"  route: {escape(str(cx.get('label')))} ({cx.get('alpha', 0):.2f}) · strategy "
                      f"{escape(str(a.trace['strategy']))} · {', '.join(r['name'] for r in a.trace['retrievers'])} · "
                      f"language {escape(str(a.trace['language']['code']))}", highlight=False)
            g = a.trace.generator
            out.print(f"  answer: [bold]{escape(a.answer)}[/]{mark} · reader {escape(str(g.name if g else None))}"
                      f" · confidence {g.confidence if g else None}", highlight=False)
            for c in a.citations:
                p = index.get(c)
                text = p.text[:60] if p is not None else ""
                out.print(Text(f"  cited [{c}] {text}…") + (Text(" (gold)", style="green") if c in gold else Text("")),
                          highlight=False)
            for warning in a.trace["language"]["warnings"]:
                err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
            out.print()
    out.print(f"[bold]{right}/{len(questions)}[/] answered right. index: {escape(str(index_dir))} "
              f"({len(index)} passages). Try: amsrag ask --index {escape(str(index_dir))} \"你的问题\"",
              highlight=False)
