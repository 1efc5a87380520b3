"""`Engine.ask`'s answer path: the reader reads the first pass and, by its calibrated confidence, accepts
the evidence, widens the route once, or hands over to the evaluator's corrective step."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from amsrag.correct import Strip
from amsrag.generate.base import ABSTAIN, CalibratedReader, EvidencePassage, Generation
from amsrag.pipeline import Engine
from amsrag.pipeline.results import reading_evidence

# `full` without the decomposer's chains, which read each hop again: these tests count the answer path's reads
PATH = "full-plain"


class ScriptedReader:
    """A stand-in reader (not part of the product) whose confidence is scripted per call."""

    name = "scripted"
    knows = False
    logprobs = False
    streaming = False
    calibrated_confidence = True

    def __init__(self, confidences: Sequence[float]) -> None:
        self.confidences = list(confidences)
        self.reads: list[list[str]] = []

    def generate(self, question: str, passages: Sequence[EvidencePassage]) -> Generation:
        self.reads.append([p.id for p in passages])
        conf = self.confidences[min(len(self.reads), len(self.confidences)) - 1]
        if not passages:
            return Generation(ABSTAIN, (), conf, True, generator=self.name)
        return Generation(passages[0].title, (passages[0].id,), conf, False, generator=self.name)

    def closed_book(self, question: str) -> Generation:
        return Generation(ABSTAIN, (), 0.0, True, generator=self.name)


def _engine(index, **corrective) -> Engine:
    cfg = index.config.model_copy(deep=True)
    for k, v in corrective.items():
        setattr(cfg.corrective, k, v)
    return Engine(index, config=cfg)


def test_scripted_reader_is_a_calibrated_reader() -> None:
    assert isinstance(ScriptedReader([0.5]), CalibratedReader)


def test_confident_reader_accepts_the_first_pass_without_the_evaluator(built_index, slice_questions) -> None:
    engine = _engine(built_index, reader_gate=0.5)
    q = slice_questions[0]
    reader = ScriptedReader([0.9])
    a = engine.ask(q.question, system=PATH, generator=reader)
    c = a.trace["corrective"]
    assert c["action"] == "reader-accepted" and c["assessed_by"] == "reader" and "0.900 >= 0.5" in c["reason"]
    assert (c["confidence"], c["gate"]) == (0.9, 0.5)
    assert len(reader.reads) == 1 and a.trace["escalations"] == []
    assert engine.corrective._step is None  # the evaluator model was never loaded
    first = engine.retrieve(q.question, system=PATH, corrective=False)
    assert reader.reads[0] == [p.id for p in first.passages] and a.citations == [first.passages[0].id]


def test_unsure_reader_widens_the_route_once_and_reads_again(built_index, slice_questions) -> None:
    engine = _engine(built_index, reader_gate=0.5, below_gate="escalate")
    q = next(q for q in slice_questions if q.dataset == "nq")
    reader = ScriptedReader([0.1, 0.7])
    a = engine.ask(q.question, system=PATH, generator=reader)
    c = a.trace["corrective"]
    assert c["action"] in ("reader-escalated", "reader-kept")
    if c["action"] == "reader-escalated":
        assert len(reader.reads) == 2
        (esc,) = a.trace["escalations"]
        assert esc["reason"].startswith("reader: confidence 0.100 < 0.5")
        first_ids = reader.reads[0]
        assert reader.reads[1][: len(first_ids)] != [] and set(first_ids) & set(reader.reads[1])
        assert "corrective" in a.trace["timings_ms"]
    assert engine.corrective._step is None


def test_below_gate_evaluate_runs_the_corrective_step(built_index, slice_questions) -> None:
    engine = _engine(built_index, reader_gate=0.5, below_gate="evaluate")
    q = slice_questions[0]
    reader = ScriptedReader([0.1, 0.1])
    a = engine.ask(q.question, system=PATH, generator=reader)
    assert a.trace["corrective"]["action"] in ("correct", "ambiguous", "incorrect")
    assert 1 <= len(reader.reads) <= 2


def test_gate_off_always_runs_the_evaluator(built_index, slice_questions) -> None:
    engine = _engine(built_index, reader_gate=1.0)
    a = engine.ask(slice_questions[0].question, system=PATH, generator=ScriptedReader([0.99]))
    assert a.trace["corrective"]["action"] in ("correct", "ambiguous", "incorrect")


@pytest.mark.parametrize("strips", [False, True])
def test_reading_evidence_uses_strips_only_when_asked(built_index, slice_questions, strips: bool) -> None:
    engine = Engine(built_index)
    r = engine.retrieve(slice_questions[0].question, corrective=True)
    assert r.passages
    if not r.strips:  # the step judged the list incorrect: nothing to strip
        assert reading_evidence(r, strips) == r.passages
        return
    ev = reading_evidence(r, strips)
    assert [p.id for p in ev] == [p.id for p in r.passages]
    by_id = {s.passage_id: s for s in r.strips}
    for p, orig in zip(ev, r.passages, strict=True):
        want = by_id[p.id].text if strips and p.id in by_id else orig.text
        assert p.text == want and p.score == orig.score


def test_reading_evidence_strip_replaces_the_passage_text() -> None:
    from amsrag.pipeline.results import RetrievalResult
    from amsrag.pipeline.scored import ScoredPassage
    from amsrag.pipeline.trace import Trace

    ps = [ScoredPassage("a", "A", "one. two. three.", 0.9, 0), ScoredPassage("b", "B", "four.", 0.5, 1)]
    strip = Strip("a", "A", "two.", [1], 0.8, 2)
    r = RetrievalResult("q", ps, Trace(system="full", complexity=None, strategy="A", reason=""), (strip,))
    assert [p.text for p in reading_evidence(r, True)] == ["two.", "four."]
    assert [p.text for p in reading_evidence(r, False)] == ["one. two. three.", "four."]


def test_default_ask_reads_with_the_span_reader(built_index, slice_questions) -> None:
    q = next(q for q in slice_questions if q.dataset == "nq")
    a = Engine(built_index).ask(q.question)
    g = a.trace["generator"]
    assert g["name"] == "extractive" and 0.0 <= g["confidence"] <= 1.0 and g["answer_type"] in (
        "span", "yes", "no", "option")
    assert a.trace["corrective"]["action"].startswith("reader-")
    assert a.abstained == (a.answer == ABSTAIN)
    if not a.abstained:
        assert a.citations and set(a.citations) <= {h["id"] for r in a.trace["retrievers"] for h in r["hits"]}


def test_cli_ask_prints_the_answer_its_citation_and_the_readers_check(built_index, slice_questions) -> None:
    import subprocess
    import sys

    q = next(q for q in slice_questions if q.dataset == "nq")
    proc = subprocess.run([sys.executable, "-m", "amsrag.cli", "ask", "--index", str(built_index.path), q.question],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "corrective: reader-" in proc.stdout and "generator extractive" in proc.stdout
    a = Engine(built_index).ask(q.question)
    assert a.answer in proc.stdout
    for cid in a.citations:
        assert f"[{cid}] " in proc.stdout  # the cited passage, shown with its title and text
    flat = " ".join(proc.stdout.split())  # rich wraps long lines
    if a.abstained:
        assert "audit: not audited (abstained)" in flat
    else:
        assert f"support {a.trace['audit']['support']:.2f}" in flat
        assert ("flagged as likely wrong" in flat) == a.trace["signals"]["flagged"]


def test_a_question_routed_multi_hop_is_read_with_the_lower_threshold(built_index, slice_questions) -> None:
    """The real span reader: on a question routed multi-hop the reader abstains only below
    `generator.multi_hop_threshold`; a one-hop question keeps the card's threshold; unset, both keep it."""
    from amsrag.generate.span_reader import SpanReaderGenerator

    reader = SpanReaderGenerator()
    card = reader.threshold
    lowered = _engine(built_index)
    lowered.config.generator.multi_hop_threshold = 0.0
    same = _engine(built_index)
    same.config.generator.multi_hop_threshold = None
    seen = {"multi_hop": 0, "one_hop": 0}
    gained = 0
    for q in slice_questions:
        low = lowered.ask(q.question, system=PATH, generator=reader)
        base = same.ask(q.question, system=PATH, generator=reader)
        routed = low.trace["complexity"]["route_label"]
        seen[routed] = seen.get(routed, 0) + 1
        assert base.trace["generator"]["threshold"] == card
        assert low.trace["generator"]["threshold"] == (0.0 if routed == "multi_hop" else card)
        if not base.abstained:
            assert low.answer == base.answer  # a lower threshold only answers what was abstained on
        elif routed == "multi_hop" and not low.abstained:  # (the reader's own "no answer" still abstains)
            assert low.answer == base.trace["generator"]["candidate"]
            gained += 1
        else:
            assert low.abstained
    assert seen["multi_hop"] and seen["one_hop"], seen
    print(f"routed {seen}, abstentions answered at threshold 0: {gained}")


def test_a_reader_view_at_a_lower_threshold_answers_what_it_abstained_on(slice_questions, slice_passages) -> None:
    from amsrag.generate.span_reader import SpanReaderGenerator

    reader = SpanReaderGenerator()
    view = reader.at_threshold(0.10)
    assert view is reader.at_threshold(0.10) and view.reader is reader.reader and reader.at_threshold(
        reader.threshold) is reader
    by_id = {p.id: p for p in slice_passages}
    distractors = [p for p in slice_passages if p.id.startswith("noise")] or slice_passages[-2:]
    answered_lower = 0
    for q in slice_questions:
        gold = [by_id[i] for i in q.gold_passage_ids]
        for evidence in (gold, gold + distractors[:2]):
            base, low = reader.generate(q.question, evidence), view.generate(q.question, evidence)
            assert base.confidence == low.confidence and base.details["threshold"] == reader.threshold
            if not base.abstained:
                assert (low.answer, low.citations, low.abstained) == (base.answer, base.citations, False)
            elif 0.10 <= base.confidence < reader.threshold:
                assert not low.abstained and low.answer == base.details["candidate"]
                answered_lower += 1
    assert answered_lower, "no read of the slice lies between the two thresholds"
