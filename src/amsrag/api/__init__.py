"""The Python API: one `Index` (an index directory or a postgresql:// URL with the engine over it) and the
typed results the CLI and the service use (`AnswerResult`, `RetrievalResult`, their `Trace`).

    import amsrag
    with amsrag.Index.open("my-index") as index:
        answer = index.ask("Who founded the company?")
        print(answer.answer, [c.source for c in index.citations(answer)], amsrag.route_of(answer.trace).strategy)

What this module and `amsrag.__all__` name is the promised surface; everything else stays importable but
may change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from amsrag.config import AmsragConfig
    from amsrag.filters import Where
    from amsrag.generate import Generator
    from amsrag.indexing.job import JobReport
    from amsrag.pipeline.engine import Engine
    from amsrag.pipeline.results import AnswerResult, RetrievalResult
    from amsrag.pipeline.trace import Trace
    from amsrag.progress import Progress
    from amsrag.store.base import Store
    from amsrag.types import Hit, Passage

    WhereLike = Where | Mapping[str, Any] | Sequence[str] | None  # a metadata filter in any of its spellings


@dataclass(frozen=True, slots=True)
class Route:
    """How a question was routed: the strategy (A/B/C single to all retrievers, `none`, `table`, `global`),
    why, the complexity class and confidence that decided it, and the retrievers that ran."""

    strategy: str
    reason: str
    complexity: str | None
    alpha: float | None
    retrievers: tuple[str, ...]


def route_of(trace: Trace) -> Route:
    """The route recorded in `trace` (of an `AnswerResult` or a `RetrievalResult`)."""
    label, alpha = trace.complexity.routed if trace.complexity is not None else (None, None)
    retrievers = tuple(dict.fromkeys(run.name for run in trace.runs))
    return Route(trace.strategy, trace.reason, label, alpha, retrievers)


@dataclass(frozen=True, slots=True)
class Citation:
    """A passage an answer cites, with where it came from when the ingest recorded it (`source`: the file or
    dataset, `page`, `section`: the heading above it, `anchor`: the fragment that opens the file at that section,
    an HTML heading's id or a Markdown heading's slug; the HTTP API's citation `url` ends in `#anchor`)."""

    id: str
    title: str
    text: str
    doc_id: str
    source: str | None = None
    page: int | None = None
    section: str | None = None
    anchor: str | None = None

    @classmethod
    def of(cls, passage: Passage) -> Citation:
        meta = passage.metadata
        page = meta.get("page")
        return cls(passage.id, passage.title, passage.text, passage.doc_id, _text_or_none(meta.get("source")),
                   int(page) if isinstance(page, int | str) and str(page).isdigit() else None,
                   _text_or_none(meta.get("section")), _text_or_none(meta.get("anchor")))


def _where(value: WhereLike) -> Where | None:
    from amsrag.filters import Where

    return Where.of(value) or None


def _text_or_none(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


class Index:
    """An open index and the engine over it. Open one with `Index.open`, build one with `Index.build`; close it
    (or use it as a context manager) to release its files."""

    def __init__(self, engine: Engine[Store]) -> None:
        self.engine = engine

    @classmethod
    def open(cls, location: str | Path, config: AmsragConfig | None = None) -> Index:
        """The index at `location` (a directory or a postgresql:// URL); `config`: other query-time settings
        (router, fusion, generator) than the ones stored with the index."""
        from amsrag.pipeline.engine import Engine

        return cls(Engine.open(location, config=config))

    @classmethod
    def build(cls, location: str | Path, inputs: Sequence[str | Path], config: AmsragConfig | None = None,
              fmt: str = "auto", progress: Progress | None = None, tags: Sequence[str] = ()) -> Index:
        """A new index at `location` over `inputs` (files or folders, a folder as NAME=PATH), as
        `amsrag index build` makes it (`tags`: its `--tag` values); bad input leaves no index behind."""
        from amsrag.indexing import ingest_inputs
        from amsrag.pipeline.engine import Engine
        from amsrag.store.open import create_index, remove_empty_index

        index = create_index(location, config)
        try:
            ingest_inputs(index, list(inputs), fmt, progress=progress, tags=tags)
        except Exception:
            index.close()
            remove_empty_index(location)
            raise
        return cls(Engine(index))

    # ------------------------------------------------------------------ reads
    def ask(self, question: str, system: str = "full", generator: Generator | None = None,
            where: WhereLike = None) -> AnswerResult:
        """The answer with its citations (passage ids), whether it abstained, and the trace (route, scores,
        audit). `generator`: another than the configured one (`amsrag.generate.make_generator`). `where`: only
        passages this metadata filter allows (`{"type": ["pdf"]}`, `["source=guides/*"]` or a `Where`)."""
        return self.engine.ask(question, system=system, generator=generator, where=_where(where))

    def retrieve(self, question: str, system: str = "full", k: int | None = None,
                 where: WhereLike = None) -> RetrievalResult:
        """The passages adaptive retrieval finds for `question`, best first, and the trace of how (`where`: as
        `ask`'s)."""
        return self.engine.retrieve(question, system=system, k=k, where=_where(where))

    def search(self, query: str, retriever: str = "bm25", k: int = 10, where: WhereLike = None) -> list[Hit]:
        """One retriever's ranked hits (bm25, dense or graph), without routing or fusion (`where`: as `ask`'s)."""
        from amsrag.retrieve.filtered import ranking_within
        from amsrag.retrievers import retriever_for
        from amsrag.types import RETRIEVERS

        if retriever not in RETRIEVERS:
            from amsrag.errors import InputError

            raise InputError(f"unknown retriever {retriever!r}; choose from {', '.join(RETRIEVERS)}")
        query = self.engine.check_question(query)
        scope = _where(where)
        found = retriever_for(self.engine.index, retriever)
        if scope is not None:
            found = ranking_within(self.engine.index.allowed_rows(scope), found)
        return found.search(query, k=k)

    def passage(self, passage_id: str) -> Passage | None:
        """The stored passage with this id (None when there is none)."""
        return self.engine.index.get(passage_id)

    def citations(self, answer: AnswerResult) -> list[Citation]:
        """The passages `answer` cites, in its order, with their source, page, section and anchor where known."""
        found = (self.engine.index.get(pid) for pid in answer.citations)
        return [Citation.of(p) for p in found if p is not None]

    def passages(self, result: RetrievalResult) -> list[Citation]:
        """The stored passages of `result`, in its order (an external source's passage is left out)."""
        found = (self.engine.index.get(p.id) for p in result.passages if p.row >= 0)
        return [Citation.of(p) for p in found if p is not None]

    def __len__(self) -> int:
        return len(self.engine.index)

    @property
    def location(self) -> str:
        return self.engine.index.location

    # ------------------------------------------------------------------ writes
    def add(self, inputs: Sequence[str | Path], replace: bool = False, fmt: str = "auto",
            progress: Progress | None = None, tags: Sequence[str] = ()) -> JobReport:
        """Add files or folders (only new content is embedded); `replace`: each input file's documents are
        replaced as a whole, as `amsrag index add --replace`; `tags`: `--tag`, for every document read."""
        from amsrag.indexing import ingest_inputs

        return ingest_inputs(self.engine.index, list(inputs), fmt, replace=replace, progress=progress, tags=tags)

    def sync(self, folders: Sequence[str | Path], delete: bool = True, fmt: str = "auto",
             progress: Progress | None = None, tags: Sequence[str] = ()) -> JobReport:
        """Bring the index in step with `folders`: new files added, changed ones replaced, and (with `delete`)
        documents whose file is gone deleted, as `amsrag index sync`; `tags`: `--tag`, for every document
        (an unchanged document whose tags change gets its row rewritten alone)."""
        from amsrag.indexing import sync_folders

        return sync_folders(self.engine.index, list(folders), fmt, delete=delete, progress=progress, tags=tags)

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Citation", "Index", "Route", "route_of"]
