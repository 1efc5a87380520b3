"""Drift references (`amsrag ops monitor baseline`): from the routing of a question file, or from the query log.

Routing needs the class and alpha only, so a question costs one routing embedding (batched) and one
classifier call (`Engine.complexity_of`, with the index's query library and hop temperature): no retrieval.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from amsrag.errors import InputError
from amsrag.monitor.drift import (
    DriftReference,
    RouteObservation,
    classifier_identity,
    observation_from_entry,
)
from amsrag.pipeline import Engine
from amsrag.querylog.entry import QueryLogEntry

BATCH = 64


def read_questions(path: Path) -> list[str]:
    """The questions of a QA file (any data set format `index build` reads) or of a JSONL of {"question"}
    objects (or strings), or of a text file with one question per line."""
    from amsrag.ingest import load_qa
    from amsrag.ingest.readers import iter_jsonl

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix in (".txt", ".text"):
        questions = [line.strip() for line in path.read_text("utf-8").splitlines() if line.strip()]
    else:
        found = load_qa(path).questions
        if found:
            questions = [q.question for q in found]
        else:
            questions = []
            for n, rec in iter_jsonl(path):
                q = rec.get("question") if isinstance(rec, dict) else rec
                if not isinstance(q, str) or not q.strip():
                    raise InputError(f"{path}:{n}: expected an object with a non-empty string `question`")
                questions.append(q)
    if not questions:
        raise InputError(f"{path}: no questions found")
    return questions


def route_questions(engine: Engine, questions: Sequence[str],
                    advance: Callable[[int], None] | None = None) -> list[RouteObservation]:
    """The class and alpha routing acts on for each question, as `engine` would route it."""
    out: list[RouteObservation] = []
    for start in range(0, len(questions), BATCH):
        batch = [engine.check_question(q) for q in questions[start:start + BATCH]]
        vectors = engine.routing_encoder.encode(batch)
        for q, v in zip(batch, vectors, strict=True):
            label, alpha = engine.complexity_of(q, v).routed
            out.append(RouteObservation(label, alpha))
        if advance is not None:
            advance(len(batch))
    return out


def reference_from_questions(engine: Engine, questions: Sequence[str], source: str,
                             advance: Callable[[int], None] | None = None) -> DriftReference:
    band = (engine.config.monitor.gray_zone_low, engine.config.monitor.gray_zone_high)
    observations = route_questions(engine, questions, advance)
    return DriftReference.from_observations(observations, band, source, classifier_identity(engine.config.classifier),
                                            settings={"questions": len(questions)})


def reference_from_log(entries: Iterable[QueryLogEntry], band: tuple[float, float], source: str,
                       classifier: str) -> DriftReference:
    observations = [o for o in map(observation_from_entry, entries) if o is not None]
    if not observations:
        raise InputError("the query log has no routed answers in the range: no reference can be taken from it")
    return DriftReference.from_observations(observations, band, source, classifier)
