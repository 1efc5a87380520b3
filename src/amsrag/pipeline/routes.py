"""The routes beside retrieval: the five-way decision, the table route and the global route.

`Taxonomy.decide` runs the task head on the shared query vector (and the index's best table matches)
and combines it with the hop classifier's prediction into the taxonomy's distribution. `TableRoute`
answers a structured question with the semantic parser over the best-matching tables, through the
guarded read-only runner; `GlobalRoute` answers a corpus-wide question from the index's themes. Each
returns None when it cannot answer, and the engine then takes the text path (the trace says why).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from amsrag.classify.task import TaskHead, five_way
from amsrag.config import AmsragConfig
from amsrag.errors import InputError
from amsrag.generate import Completes, Generation, Generator
from amsrag.generate.doc_cues import asks_for_command
from amsrag.pipeline.context import ms_since
from amsrag.pipeline.scored import ScoredPassage
from amsrag.pipeline.trace import ComplexityTrace
from amsrag.pipeline.trace_parts import (
    GlobalRouteTrace,
    RouteFallback,
    TableAttempt,
    TableRouteTrace,
    TableTrace,
    ThemesTrace,
)
from amsrag.route.taxonomy import TaxonomyDecision, decide, thresholds_of
from amsrag.store.base import PassageIndex, QueryIndex
from amsrag.tables.base import StructuredAnswer, TableHit, TableSource

if TYPE_CHECKING:
    from amsrag.structured.parser import SemanticParser


RouteTraceT = TypeVar("RouteTraceT", TableRouteTrace, GlobalRouteTrace)


@dataclass(frozen=True, slots=True)
class RouteAnswer(Generic[RouteTraceT]):
    """What a non-retrieval route hands the engine: the answer, the evidence shown for it, and its trace."""

    generation: Generation  # an empty answer: the route did not answer (the trace says why)
    passages: list[ScoredPassage]
    trace: RouteTraceT

    @property
    def answered(self) -> bool:
        return bool(self.generation.answer)


class Taxonomy:
    """The five-way decision over one index (the task head loads on first use)."""

    def __init__(self, index: QueryIndex, config: AmsragConfig) -> None:
        self.index, self.config = index, config
        self._head: TaskHead | None = None

    @property
    def active(self) -> bool:
        return bool(self.config.router.taxonomy.task_classes)

    @property
    def head(self) -> TaskHead:
        if self._head is None:
            self._head = TaskHead.load(self.config.router.taxonomy.artifact or None)
        return self._head

    @property
    def thresholds(self) -> dict[str, float]:
        """min_confidence per class: the configuration's, else the task head card's."""
        return thresholds_of(self.config.router.taxonomy, dict(self.head.card.get("min_confidence", {})))

    def table_hits(self, query: str) -> list[TableHit]:
        tables = self.tables()
        if tables is None or not len(tables):
            return []
        return tables.search(query, k=max(self.config.tables.search_k, 2))

    def tables(self) -> TableSource | None:
        if not self.config.tables.enabled:
            return None
        return self.index.tables()

    def decide(self, query: str, vector: np.ndarray, hop: ComplexityTrace) -> tuple[TaxonomyDecision, list[TableHit]]:
        cfg = self.config.router.taxonomy
        hits = self.table_hits(query)
        task = self.head.predict(query, vector, hits, has_tables=bool(hits))
        probs = five_way(task.probs, hop.probs, cfg.classes)
        if hop.route_label is not None and hop.route_label != hop.label:
            # the hop classifier's zero_hop folds into the hop class retrieval is configured by
            text = sum(probs[c] for c in ("zero_hop", "one_hop", "multi_hop"))
            probs.update({c: 0.0 for c in ("zero_hop", "one_hop", "multi_hop")})
            probs[hop.routed[0]] = text
        label, route, alpha, reason = decide(probs, cfg, self.thresholds)
        if label == "aggregation" and asks_for_command(query):
            # "Which command builds the site?" asks for one thing a passage states, whatever the head says
            label, route, alpha, reason = decide(probs, cfg, {**self.thresholds, "aggregation": float("inf")})
            reason = f"asks which command (one thing a passage states), not corpus-wide; {reason}"
        hits = hits[: self.config.tables.search_k]
        return TaxonomyDecision(label, probs, alpha, route, reason, task.to_dict(),
                                tuple((h.table_id, h.score) for h in hits)), hits


def _row_passage(hit: TableHit, columns: tuple[str, ...], row: tuple[Any, ...], row_id: int) -> ScoredPassage:
    names = [c.name for c in hit.profile.columns]
    cells = "; ".join(f"{n}: {v}" for n, v in zip(names, row, strict=False) if v not in ("", None))
    return ScoredPassage(f"{hit.table_id}#row={row_id}", hit.profile.title or hit.table_id, cells, hit.score, -1)


class TableRoute:
    """Structured questions: the semantic parser over the best-matching tables, read-only and bounded."""

    def __init__(self, index: PassageIndex, config: AmsragConfig) -> None:
        self.index, self.config = index, config
        self._parser: SemanticParser | None = None

    @property
    def parser(self) -> SemanticParser:
        if self._parser is None:
            from amsrag.structured.parser import SemanticParser

            artifact = self.config.tables.parser
            self._parser = SemanticParser.load(Path(artifact) if artifact else None)
        return self._parser

    def answer(self, query: str, hits: list[TableHit], tables: TableSource,
               generator: Generator | None = None) -> RouteAnswer[TableRouteTrace]:
        """The best table answer over the best-matching tables: the semantic parser's, or with an LLM
        generator its text-to-SQL (the parser's when the model's statement is refused or finds nothing)."""
        from amsrag.structured.text_to_sql import llm_answer

        cfg = self.config.tables
        t0 = time.perf_counter()
        runner = tables.runner(timeout_s=cfg.timeout_s, row_limit=cfg.row_limit)
        best: tuple[StructuredAnswer, TableHit] | None = None
        tried: list[TableAttempt] = []
        for hit in hits[: cfg.search_k]:
            try:
                sa = None
                if isinstance(generator, Completes):
                    try:
                        sa = llm_answer(query, hit.profile, runner, generator.complete)
                    except InputError as exc:
                        tried.append(TableAttempt(hit.table_id, llm_error=str(exc)))
                if sa is None or not sa.answer:
                    sa = self.parser.answer(query, hit.profile, runner, self.index.encoder)
            except InputError as exc:  # a refused or timed-out statement: the next table
                tried.append(TableAttempt(hit.table_id, error=str(exc)))
                continue
            tried.append(TableAttempt(hit.table_id, round(sa.confidence, 4), sa.answer))
            if sa.answer and (best is None or sa.confidence > best[0].confidence):
                best = (sa, hit)
        ms = ms_since(t0)
        if best is None or best[0].confidence < cfg.min_confidence:
            why = "no program answered" if best is None else (
                f"confidence {best[0].confidence:.3f} < tables.min_confidence {cfg.min_confidence}")
            return RouteAnswer(Generation(""), [], RouteFallback(why, tuple(tried), ms))
        sa, hit = best
        passages = self._cited_rows(sa, hit, runner)
        g = Generation(" | ".join(sa.answer), tuple(p.id for p in passages), sa.confidence, False, ms=ms,
                       generator="table", details={"program": sa.program, "sql": sa.sql})
        trace = TableTrace(sa.table_id, sa.sql, sa.program, round(sa.confidence, 4), sa.row_ids, sa.candidates,
                           tuple(tried), ms, tuple(passages))
        return RouteAnswer(g, passages, trace)

    def _cited_rows(self, sa: StructuredAnswer, hit: TableHit, runner: Any) -> list[ScoredPassage]:
        ids = list(sa.row_ids[:10])
        if not ids:
            return []
        cols = ", ".join(c.sql_name for c in hit.profile.columns)
        marks = ", ".join("?" for _ in ids)
        rows = runner.run(f"SELECT row_id, {cols} FROM {hit.profile.sql_name} WHERE row_id IN ({marks}) "
                          f"ORDER BY row_id LIMIT {len(ids)}", ids)
        return [_row_passage(hit, rows.columns[1:], r[1:], int(r[0])) for r in rows.rows]


class GlobalRoute:
    """Corpus-wide questions: the themes the question asks about (or all of them), their key terms and
    sizes, their representative passages as citations; with an LLM generator, a map-reduce summary over
    the selected themes (GraphRAG's global search shape)."""

    def __init__(self, index: QueryIndex, config: AmsragConfig) -> None:
        self.index, self.config = index, config

    def answer(self, query: str, vector: np.ndarray, generator: Generator | None) -> RouteAnswer[GlobalRouteTrace]:
        from amsrag.themes.search import compose_answer, global_search, map_reduce

        t0 = time.perf_counter()
        themes = self.index.themes()
        if themes is None or themes.k == 0:
            why = "the index has no themes (fewer passages than themes.min_passages, or themes off)"
            return RouteAnswer(Generation(""), [], RouteFallback(why, (), ms_since(t0)))
        result = global_search(query, vector, themes, k=self.config.themes.search_k)
        if not result.themes:
            why = f"no theme matches the question ({result.selection})"
            return RouteAnswer(Generation(""), [], RouteFallback(why, (), ms_since(t0)))
        score_of = {pid: t.score for t in result.themes for pid in t.representatives}
        rows = self.index.rows_for_ids(list(score_of))
        found = self.index.passages_by_rows(list(rows.values()))
        passages = [ScoredPassage(p.id, p.title, p.text, float(score_of.get(p.id, 0.0)), rows[p.id], p) for p in found]
        if isinstance(generator, Completes):
            text = map_reduce(query, result, {p.id: p for p in found}, generator.complete)
            citations = tuple(p.id for p in passages)
            name = getattr(generator, "name", "llm")
        else:
            text, citations = compose_answer(result, passages_by_id={p.id: p for p in found})
            name = "themes"
        confidence = float(np.mean([t.score for t in result.themes])) if result.mode != "corpus" else 1.0
        ms = ms_since(t0)
        g = Generation(text, tuple(citations), min(max(confidence, 0.0), 1.0), False, ms=ms, generator=name,
                       details={"mode": result.mode})
        trace = ThemesTrace(result.mode, result.selection, result.focus_terms, result.n_themes, result.n_passages,
                            result.themes, ms)
        return RouteAnswer(g, passages, trace)
