"""The citation-support audit: its features on hand-made passages, the shipped artifact, and the audit in
`Engine.ask`'s trace (the extractive reader's answers, a scripted stand-in LLM's, and abstentions)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from amsrag.artifacts import file_sha256
from amsrag.audit import SupportAuditor, SupportModel
from amsrag.audit.features import FEATURE_NAMES, READER_FEATURES, audit_features, text_features
from amsrag.audit.model import FORMAT, shipped_artifact_dir
from amsrag.config import AmsragConfig
from amsrag.errors import InputError
from amsrag.generate.base import ABSTAIN, EvidencePassage, Generation
from amsrag.generate.span_reader import SpanReader
from amsrag.learn.audit.train import flag_threshold
from amsrag.pipeline import Engine
from amsrag.types import Passage

QUESTION = "When was the Eiffel Tower completed?"
TOWER = Passage("tower", "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
                "It was designed by the company of Gustave Eiffel and was completed in 1889 for the World's Fair.",
                "Eiffel Tower")
OTHER = Passage("bridge", "The Golden Gate Bridge is a suspension bridge spanning the Golden Gate strait. It "
                "opened to traffic in 1937 and was the longest suspension bridge in the world.", "Golden Gate Bridge")


def _named(values: np.ndarray) -> dict[str, float]:
    return dict(zip(FEATURE_NAMES, values.tolist(), strict=True))


@pytest.fixture(scope="module")
def reader() -> SpanReader:
    return SpanReader.load()


@pytest.fixture(scope="module")
def auditor(reader) -> SupportAuditor:
    return SupportAuditor(reader=reader)


def test_text_features_separate_supported_absent_and_wrong_answers() -> None:
    names = FEATURE_NAMES[len(READER_FEATURES):]
    ok = dict(zip(names, text_features(QUESTION, "1889", [TOWER], False), strict=True))
    absent = dict(zip(names, text_features(QUESTION, "1900", [TOWER], False), strict=True))
    wrong = dict(zip(names, text_features(QUESTION, "Gustave Eiffel", [TOWER], False), strict=True))
    elsewhere = dict(zip(names, text_features(QUESTION, "1889", [OTHER], False), strict=True))
    assert ok["ans_exact"] == 1.0 and ok["type_ok"] == 1.0 and ok["sent_cov"] > 0.5 and ok["ent_cov"] == 1.0
    assert absent["ans_exact"] == 0.0 and absent["sent_cov"] == 0.0
    assert wrong["ans_exact"] == 1.0 and wrong["type_ok"] == 0.0  # present, but a name for a "when" question
    assert elsewhere["ans_exact"] == 0.0 and elsewhere["ent_cov"] < ok["ent_cov"] and elsewhere["term_cov"] < 1.0


def test_bridge_feature_for_multi_hop_citations() -> None:
    designer = Passage("eiffel", "Gustave Eiffel was a French civil engineer. His company built the Eiffel Tower.",
                       "Gustave Eiffel")
    q = "In what year was the tower built by the company of Gustave Eiffel completed?"
    linked = _named(np.array([0.0] * len(READER_FEATURES) + text_features(q, "1889", [designer, TOWER], True)))
    single = _named(np.array([0.0] * len(READER_FEATURES) + text_features(q, "1889", [TOWER], True)))
    assert linked["bridge"] == 1.0 and single["bridge"] == 0.0 and linked["multi_hop"] == 1.0


def test_reader_scores_an_answer_string_inside_the_passage(reader) -> None:
    r = reader.answer_support(QUESTION, [TOWER], ["1889", "Gustave Eiffel", "1900", "yes"], candidates=3)
    right, wrong, absent, yes = r.answers
    assert right.found and right.passage_id == "tower" and right.prob > 0.3 and right.score > 0
    assert wrong.found and wrong.prob < 0.01 < right.prob
    assert not absent.found and absent.prob == 0.0
    assert yes.found and 0.0 <= yes.prob <= 1.0  # yes / no: the answer-type head
    assert r.candidates and "1889" in r.candidates[0].answer and r.top_prob >= right.prob
    assert reader.answer_support(QUESTION, [], ["1889"]).answers[0].found is False


def test_feature_sources(reader) -> None:
    r = reader.answer_support(QUESTION, [TOWER], ["1889", "1900"])
    assert audit_features(QUESTION, "1889", [TOWER], False, r.answers[0], r.top_prob).source == "reader-span"
    assert audit_features(QUESTION, "1900", [TOWER], False, r.answers[1], r.top_prob).source == "reader-absent"
    text = audit_features(QUESTION, "1889", [TOWER], False, None)
    assert text.source == "text" and not text.values[: len(READER_FEATURES)].any()


def test_the_audit_ranks_and_flags_hand_made_cases(auditor) -> None:
    ok = auditor.audit(QUESTION, "1889", [TOWER], False)
    absent = auditor.audit(QUESTION, "1900", [TOWER], False)
    elsewhere = auditor.audit(QUESTION, "1889", [OTHER], False)
    assert ok.support > max(absent.support, elsewhere.support)
    assert not ok.flagged and absent.flagged and elsewhere.flagged
    assert auditor.audit(QUESTION, "Paris", [TOWER], False).flagged  # named in the passage, but not the answer
    assert ok.head == "full" and ok.cited == ("tower",) and ok.located_in == "tower"
    d = ok.to_dict()
    assert d["verdict"] == "supported" and 0 <= d["support"] <= 1 and d["features_from"] == "reader-span"
    zh = auditor.audit(QUESTION, "1889", [TOWER], False, readable=False)
    assert zh.head == "text" and zh.source == "text" and not set(READER_FEATURES) & set(zh.features)


def test_a_wrong_answer_named_in_the_cited_passage_is_flagged(auditor) -> None:
    right = auditor.audit(QUESTION, "1889", [TOWER], False)
    wrong = auditor.audit(QUESTION, "Gustave Eiffel", [TOWER], False)
    assert wrong.flagged and wrong.support < right.support


def test_shipped_artifact_loads_and_its_card_matches_the_arrays(tmp_path) -> None:
    d = shipped_artifact_dir()
    card = json.loads((d / FORMAT.card).read_text(encoding="utf-8"))
    assert card["npz_sha256"] == file_sha256(d / FORMAT.arrays)
    assert card["features"]["names"] == list(FEATURE_NAMES) and card["rebuild"].startswith("OMP_NUM_THREADS=1 amsrag")
    assert card["metrics"]["full_test_roc_auc"] >= 0.85 and card["metrics"]["full_test_ece"] <= 0.05
    assert card["data_files"] and all(len(v) == 64 for v in card["data_files"].values())
    model = SupportModel.load()
    assert set(model.heads) == {"full", "text"} and 0 < model.heads["full"].threshold < 1
    broken = tmp_path / "audit"
    shutil.copytree(d, broken)
    raw = bytearray((broken / FORMAT.arrays).read_bytes())
    raw[-10] ^= 0xFF
    (broken / FORMAT.arrays).write_bytes(bytes(raw))
    with pytest.raises(InputError, match="sha256"):
        SupportModel.load(broken)


def test_flag_threshold_bounds_the_supported_answers_flagged() -> None:
    p = np.linspace(0.0, 1.0, 101)
    y = (p >= 0.4).astype(int)  # supported answers score 0.40..1.00
    assert flag_threshold(p, y, 0.2) == pytest.approx(0.52)  # 12 of 61 supported below 0.52
    assert flag_threshold(p, y, 0.0) == pytest.approx(0.40)
    assert flag_threshold(p, np.zeros_like(y), 0.2) == 0.0  # no supported answers: never flag


def test_audit_config_defaults() -> None:
    cfg = AmsragConfig()
    assert cfg.audit.enabled and cfg.audit.threshold is None and cfg.audit.reader
    assert AmsragConfig.from_toml("[audit]\nthreshold = 0.3\n").audit.threshold == 0.3
    with pytest.raises(InputError):
        AmsragConfig.from_toml("[audit]\nthreshold = 1.5\n")


# -- in the engine ------------------------------------------------------------------------------------------
class ScriptedLLM:
    """A stand-in LLM generator (outside the product): answers a fixed string and cites as scripted."""

    name = "scripted-llm"
    knows = False
    logprobs = False
    streaming = False

    def __init__(self, answer: str, cite: bool = True, abstain: bool = False) -> None:
        self.answer, self.cite, self.abstain = answer, cite, abstain

    def generate(self, question: str, passages: Sequence[EvidencePassage]) -> Generation:
        if self.abstain or not passages:
            return Generation(ABSTAIN, (), None, True, generator=self.name)
        return Generation(self.answer, (passages[0].id,) if self.cite else (), None, False, generator=self.name)

    def closed_book(self, question: str) -> Generation:
        return Generation(ABSTAIN, (), None, True, generator=self.name)


def test_ask_traces_the_audit_of_the_extractive_answer(built_index, slice_questions) -> None:
    engine = Engine(built_index)
    for q in slice_questions[:6]:
        a = engine.ask(q.question)
        audit = a.trace["audit"]
        if a.abstained:
            assert audit["support"] is None and audit["flagged"] is False and audit["reason"] == "abstained"
            continue
        assert 0.0 <= audit["support"] <= 1.0 and audit["flagged"] == (audit["support"] < audit["threshold"])
        assert audit["cited"] == a.citations and audit["against"] == "citations" and audit["model"] == "full"
        assert a.flagged == audit["flagged"] and a.to_dict()["trace"]["audit"]["flagged"] == a.flagged
        assert a.trace.audit is not None and a.trace["timings_ms"]["audit"] > 0
        return
    pytest.fail("every question abstained")


def test_ask_audits_an_llm_answer_and_skips_an_abstention(built_index, slice_questions) -> None:
    engine = Engine(built_index)
    q = slice_questions[0]
    cited = engine.ask(q.question, generator=ScriptedLLM(q.answers[0]))
    audit = cited.trace["audit"]
    assert isinstance(audit["support"], float) and audit["against"] == "citations" and len(audit["cited"]) == 1
    nonsense = engine.ask(q.question, generator=ScriptedLLM("purple elephant quartet"))
    assert nonsense.flagged and nonsense.trace["audit"]["support"] < audit["support"]
    signals = nonsense.trace["signals"]  # the proxy signals read the audit of the answer they ship with
    assert signals["support"] == nonsense.trace["audit"]["support"] and signals["flagged"] is True
    assert signals["route_alpha"] == nonsense.trace["complexity"]["route_alpha"]
    uncited = engine.ask(q.question, generator=ScriptedLLM(q.answers[0], cite=False))
    assert uncited.trace["audit"]["against"] == "evidence" and len(uncited.trace["audit"]["cited"]) >= 1
    abstained = engine.ask(q.question, generator=ScriptedLLM("x", abstain=True))
    assert abstained.abstained and abstained.trace["audit"] == {"support": None, "flagged": False,
                                                                "verdict": "not audited", "reason": "abstained",
                                                                "ms": 0.0}
    assert abstained.flagged is False


def test_the_audit_can_be_switched_off(built_index, slice_questions) -> None:
    cfg = built_index.config.model_copy(deep=True)
    cfg.audit.enabled = False
    a = Engine(built_index, config=cfg).ask(slice_questions[0].question, generator=ScriptedLLM("x"))
    assert a.trace["audit"]["support"] is None and "disabled" in a.trace["audit"]["reason"] and not a.flagged


@pytest.mark.slow
def test_training_rows_of_real_questions(reader, shared_data: Path) -> None:
    from amsrag.learn.audit.data import AuditDataConfig, load_pools_for, question_rows

    pools, stats = load_pools_for(shared_data, AuditDataConfig())
    assert stats["dropped_reader_training"] > 0
    multi = next(q for q in pools if q.multi_hop and q.split == "test")
    rows = question_rows(multi, reader, AuditDataConfig())
    kinds = {k: label for k, label, _ in rows}
    assert kinds["gold"] == 1 and kinds["distractors"] == 0
    assert all(f.values.shape == (len(FEATURE_NAMES),) for _, _, f in rows)


def test_cli_audit_check(tmp_path) -> None:
    from typer.testing import CliRunner

    from amsrag.cli.main import app

    passages = tmp_path / "cited.jsonl"
    passages.write_text(json.dumps({"id": "tower", "title": TOWER.title, "text": TOWER.text}) + "\n",
                        encoding="utf-8")
    runner = CliRunner()
    ok = runner.invoke(app, ["train", "audit", "check", QUESTION, "--answer", "1889", "--passages", str(passages),
                             "--json"])
    assert ok.exit_code == 0, ok.output
    body = json.loads(ok.stdout)
    assert body["verdict"] == "supported" and body["cited"] == ["tower"] and not body["flagged"]
    bad = runner.invoke(app, ["train", "audit", "check", QUESTION, "--answer", " ", "--passages", str(passages)])
    assert bad.exit_code == 2 and "--answer" in bad.output
