"""Generator plumbing: citations, prompt budget, metrics, answer types, config, factory, TARG calibration."""

from __future__ import annotations

import math

import pytest

from amsrag.config import AmsragConfig, GeneratorConfig
from amsrag.errors import InputError
from amsrag.generate import Generation, GeneratorError, make_generator, parse_citations
from amsrag.generate.answer_types import question_type
from amsrag.generate.confidence import logprob_confidence, mean_entropy
from amsrag.generate.metrics import exact_match, normalize_answer, token_f1
from amsrag.generate.prompt import SYSTEM_RAG, build_prompt, parse_answer
from amsrag.generate.targ import TargGate, calibrate_threshold, gate_stats
from amsrag.types import Passage

PASSAGES = [Passage(id="p1", title="Paris", text="Paris is the capital of France."),
            Passage(id="p2", title="Berlin", text="Berlin is the capital of Germany."),
            Passage(id="p3", title="Rome", text="Rome is the capital of Italy.")]


def test_citations_parsed_and_checked_against_the_passages_given() -> None:
    answer, cited, invalid = parse_citations("Berlin [2] and Rome [3, 2] [7] [0]", PASSAGES)
    assert answer == "Berlin and Rome"
    assert cited == ("p2", "p3")  # order of first mention, no repeats
    assert invalid == [7, 0]  # passages the model was never given
    assert parse_citations("no markers at all", PASSAGES) == ("no markers at all", (), [])


def test_parse_answer_first_line_abstention_and_match_fallback() -> None:
    p = parse_answer("Answer: Berlin [2].\nBecause passage 2 says so.", PASSAGES)
    assert (p.answer, p.citations, p.citation_source, p.abstained) == ("Berlin", ("p2",), "model", False)
    p = parse_answer("rome", PASSAGES)  # no marker: the passage containing the answer is cited
    assert (p.citations, p.citation_source) == (("p3",), "match")
    p = parse_answer("Insufficient evidence.", PASSAGES)
    assert p.abstained and p.answer == "insufficient evidence" and not p.citations
    p = parse_answer("Madrid [9]", PASSAGES)
    assert p.citations == () and p.invalid_citations == [9] and p.citation_source == "none"


def _words(text: str) -> int:
    return len(text.split())


def _cut(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def test_prompt_truncates_passages_to_the_budget() -> None:
    long = [Passage(id=f"d{i}", title=f"T{i}", text=" ".join(f"w{i}_{j}" for j in range(400))) for i in range(4)]
    budget = 300
    prompt = build_prompt("what is w2_5?", long, budget, _words, _cut)
    total = sum(_words(m["content"]) for m in prompt.messages)
    assert total <= budget
    assert prompt.truncated == 4 and prompt.dropped == 0
    user = prompt.messages[1]["content"]
    assert all(f"[{i}] T{i - 1}:" in user for i in range(1, 5)) and "w0_0" in user and "w0_399" not in user
    # passages that fit are kept whole; room a short passage leaves passes to the next ones
    short = [Passage(id="s", title="S", text="tiny text"), *long[:1]]
    prompt = build_prompt("q?", short, budget, _words, _cut)
    assert "tiny text" in prompt.messages[1]["content"] and prompt.truncated == 1
    assert sum(_words(m["content"]) for m in prompt.messages) <= budget


def test_prompt_drops_passages_when_no_room_and_rejects_an_impossible_budget() -> None:
    many = [Passage(id=f"d{i}", title="", text=" ".join(["x"] * 50)) for i in range(40)]
    fixed = _words(SYSTEM_RAG) + _words("Passages:\n\n\nQuestion: q?\nAnswer:")
    prompt = build_prompt("q?", many, fixed + 60, _words, _cut)
    assert prompt.dropped > 0 and len(prompt.passages) == 40 - prompt.dropped
    with pytest.raises(GeneratorError, match="prompt budget"):
        build_prompt("q?", many, fixed + 3, _words, _cut)


def test_squad_metrics() -> None:
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert exact_match("the eiffel tower", ["Eiffel Tower", "tour Eiffel"]) == 1.0
    assert token_f1("Eiffel", ["Eiffel Tower"]) == pytest.approx(2 / 3)
    assert token_f1("nothing", ["Eiffel Tower"]) == 0.0 and exact_match("x", []) == 0.0


@pytest.mark.parametrize(("question", "kind"), [
    ("Who directed Jaws?", "person"), ("when was the eiffel tower built", "date"),
    ("Where is Tulsa?", "place"), ("How many moons does Mars have?", "number"),
    ("In what year did the war end?", "date"), ("Which band released Tinted Windows?", "org"),
    ("Are Local H and For Against both from the United States?", "yesno"),
    ("What government position was held by the woman who portrayed Corliss Archer?", "other"),
    ("The band who released the album had their first performance in what city?", "place"),
])
def test_answer_types(question: str, kind: str) -> None:
    assert question_type(question).kind == kind


def test_choice_questions_name_their_options_and_order() -> None:
    qt = question_type("Which magazine was started first, Arthur's Magazine or First for Women?")
    assert qt.kind == "choice" and qt.options == ("Arthur's Magazine", "First for Women") and qt.order == "early"


def test_logprob_confidence_and_entropy() -> None:
    assert logprob_confidence([math.log(0.5), math.log(0.5)]) == pytest.approx(0.5)
    assert logprob_confidence([]) is None
    assert mean_entropy([[math.log(0.5), math.log(0.5)]]) == pytest.approx(math.log(2))


def test_generator_config_defaults_and_validation() -> None:
    cfg = AmsragConfig()
    assert cfg.generator.name == "extractive" and cfg.generator.n_threads == 1 and cfg.generator.temperature == 0
    again = AmsragConfig.from_toml(cfg.to_toml())
    assert again.generator == cfg.generator
    with pytest.raises(InputError, match="generator"):
        AmsragConfig.from_toml('[generator]\nname = "gpt5"\n')
    with pytest.raises(InputError, match="unknown generator"):
        make_generator(GeneratorConfig(), name="gpt5")
    with pytest.raises(GeneratorError, match="base_url"):
        make_generator(GeneratorConfig(name="openai", base_url="localhost:1"))


class _Scripted:
    """A scripted stand-in generator (outside the product): fixed closed-book confidence."""

    name = "scripted"
    knows = True
    logprobs = True
    streaming = False

    def __init__(self, confidence: float | None, abstained: bool = False) -> None:
        self.c, self.abstained = confidence, abstained

    def generate(self, question, passages):  # pragma: no cover - unused here
        raise NotImplementedError

    def closed_book(self, question: str) -> Generation:
        return Generation("Paris", (), self.c, self.abstained, generator=self.name)


def test_targ_gate_decides_by_threshold() -> None:
    assert TargGate(_Scripted(0.95), 0.9).decide("capital of France?")[0] is True
    skip, conf, g = TargGate(_Scripted(0.5), 0.9).decide("capital of France?")
    assert skip is False and conf == 0.5 and g is not None and g.answer == "Paris"
    assert TargGate(_Scripted(0.99, abstained=True), 0.9).decide("q")[0] is False
    assert TargGate(_Scripted(None), 0.1).decide("q")[0] is False  # no logprobs, no skip
    assert TargGate(_Scripted(0.99), 1.0).decide("q") == (False, None, None)  # threshold 1: gate off
    with pytest.raises(InputError):
        TargGate(_Scripted(0.5), 1.5)


def test_targ_calibration_picks_the_lowest_threshold_meeting_the_precision() -> None:
    conf = [0.1 * i for i in range(1, 11)] * 3  # 30 questions
    right = [c >= 0.65 for c in conf]  # confident answers are right
    cal = calibrate_threshold(conf, right, target_precision=0.9, min_fired=5)
    assert cal.threshold == pytest.approx(0.7) and cal.precision == 1.0 and cal.fire_rate == pytest.approx(0.4)
    never = calibrate_threshold(conf, [False] * 30, target_precision=0.5)
    assert never.threshold == 1.0 and never.fire_rate == 0.0 and math.isnan(never.precision)
    stats = gate_stats(conf, right, 0.7)
    assert stats["fired"] == 12 and stats["accuracy_when_fired"] == 1.0
