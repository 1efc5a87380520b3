"""The Chinese reader (amsrag.generate.zh_reader), its CMRC metrics and the pieces of its training."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from amsrag.embed.e5_weights import dequantize_q4
from amsrag.generate.base import ABSTAIN
from amsrag.generate.zh_metrics import char_em, char_f1, longest_common_run, normalize_zh, segments
from amsrag.generate.zh_reader import (
    BOS,
    CARD_FILE,
    EOS,
    ZhReader,
    ZhReaderArtifactError,
    ZhReaderGenerator,
    ZhTokenizer,
    best_spans,
    default_directory,
    make_windows,
)
from amsrag.learn.reader_zh.data import locate
from amsrag.types import Passage

# A CMRC 2018 cal question (DEV_0_QUERY_0, CC BY-SA 4.0) and the part of its gold paragraph that answers it.
QUESTION = "《战国无双3》是由哪两个公司合作开发的？"
PARAGRAPH = ("《战国无双3》（）是由光荣和ω-force开发的战国无双系列的正统第三续作。本作以三大故事为主轴，"
             "分别是以武田信玄等人为主的《关东三国志》，织田信长等人为主的《战国三杰》，"
             "石田三成等人为主的《关原的年轻武者》，丰富游戏内的剧情。")
UNRELATED = ("黄河是中国第二长河，发源于青海省巴颜喀拉山脉，流经九个省区，最后注入渤海，"
             "全长约5464公里，流域面积约75万平方公里。")


# -- metrics ---------------------------------------------------------------------------------------------
def test_normalize_and_segments() -> None:
    assert normalize_zh(" 《战国 无双3》！") == "战国无双3"
    assert segments("光荣和ω-force，2009年") == ["光", "荣", "和", "ω", "force", "2009", "年"]
    assert longest_common_run(list("abcde"), list("xbcdy")) == 3
    assert longest_common_run([], list("abc")) == 0


def test_char_em_f1_hand_cases() -> None:
    assert char_em("光荣和ω-force", ["光荣和ω-force"]) == 1.0
    assert char_em("“光荣和ω-force”。", ["光荣和ω-force"]) == 1.0  # punctuation is removed
    assert char_em("光荣", ["光荣和ω-force"]) == 0.0
    # prediction 北京市 vs reference 北京: common run 2, precision 2/3, recall 1 → F1 0.8
    assert char_f1("北京市", ["北京"]) == pytest.approx(0.8)
    # max over references
    assert char_f1("北京市", ["上海", "北京市"]) == 1.0
    # the common part must be contiguous (CMRC's longest common substring)
    assert char_f1("甲乙丙丁", ["甲丙"]) == pytest.approx(2 * (1 / 4) * (1 / 2) / (1 / 4 + 1 / 2))
    assert char_f1("", ["北京"]) == 0.0
    assert char_f1("北京", []) == 0.0
    # a run of Latin letters is one unit
    assert char_f1("ω-force公司", ["force"]) == pytest.approx(2 * (1 / 4) * 1 / (1 / 4 + 1))


# -- decoding with a scripted model (no artifact) -----------------------------------------------------------
class _CharTok:
    """One token per character (ids 10+ordinal position), offsets the characters."""

    def encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        return [10 + i for i in range(len(text))], [(i, i + 1) for i in range(len(text))]

    def encode_batch(self, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        return [self.encode(t) for t in texts]


def _scripted_reader(text: str, answer: str, threshold: float = 0.5) -> ZhReader:
    a = text.index(answer)

    def infer(ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = np.zeros(ids.shape, dtype=np.float32)
        e = np.zeros(ids.shape, dtype=np.float32)
        for r in range(ids.shape[0]):
            row = ids[r].tolist()
            ctx0 = row.index(EOS) + 1
            s[r, 0] = e[r, 0] = 1.0
            if ctx0 + a < ids.shape[1] and row[ctx0 + a] == 10 + a:
                s[r, ctx0 + a] = 8.0
                e[r, ctx0 + a + len(answer) - 1] = 8.0
        return s, e

    card = {"windows": {"max_len": 64, "stride": 16}, "calibration": {"coef": {"score": 1.0}, "intercept": -3.0,
                                                                       "threshold": threshold}}
    return ZhReader(infer, _CharTok(), card)  # type: ignore[arg-type]


def test_scripted_reader_span_citation_and_abstention() -> None:
    text = "甲乙丙丁戊己庚辛" * 6 + "答案在这里" + "壬癸" * 10
    reader = _scripted_reader(text, "答案在这里")
    r = reader.read("问题是什么", [Passage(id="x", title="", text="无关的段落"), Passage(id="g", title="", text=text)])
    assert r.answer == "答案在这里" and r.passage_id == "g"
    assert text[r.char_start:r.char_end] == "答案在这里"
    assert r.confidence > 0.9 and not r.abstained
    assert r.features["windows"] > 0
    empty = reader.read("问题", [])
    assert empty.abstained and empty.answer == ABSTAIN


def test_windows_cover_the_context_and_best_spans() -> None:
    ids = list(range(100, 400))
    offs = [(i, i + 1) for i in range(300)]
    ws = make_windows([5, 6, 7], ids, offs, 0, max_len=64, stride=16)
    assert all(len(w.ids) <= 64 for w in ws) and ws[0].ids[:5] == [BOS, 5, 6, 7, EOS]
    covered = {o for w in ws for o in w.offsets}
    assert covered == set(offs)
    w = ws[0]
    s = np.zeros(len(w.ids), dtype=np.float32)
    e = np.zeros(len(w.ids), dtype=np.float32)
    s[w.ctx_start + 3], e[w.ctx_start + 5] = 5.0, 5.0
    top = best_spans(s, e, w, max_answer=10)
    assert top[0][2:] == (3, 6) and top[0][0] == pytest.approx(10.0)
    e[w.ctx_start + 30] = 9.0  # too far from the start for max_answer=10
    assert best_spans(s, e, w, max_answer=10)[0][2:] != (3, 31)


# -- training pieces ----------------------------------------------------------------------------------------
def test_dequantize_q4_block() -> None:
    scale = np.float16(0.5).tobytes()
    nibbles = bytes(((j % 16) | (((15 - j) % 16) << 4)) for j in range(16))
    w = dequantize_q4(scale + nibbles, 1, 32)
    assert w.shape == (1, 32)
    assert w[0, :16].tolist() == [(j - 8) * 0.5 for j in range(16)]
    assert w[0, 16:].tolist() == [(15 - j - 8) * 0.5 for j in range(16)]
    assert struct.calcsize("<e") == 2


def test_locate_answer_start() -> None:
    ctx = "abc北京def北京"
    assert locate(ctx, "北京", 3) == 3
    assert locate(ctx, "北京", 4) == 3  # off by one
    assert locate(ctx, "北京", 9) == 8
    assert locate(ctx, "上海", 0) == -1


# -- the shipped artifact -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reader() -> ZhReader:
    return ZhReader.load()


def test_card_and_tokenizer_offsets(reader: ZhReader) -> None:
    card = json.loads((default_directory() / CARD_FILE).read_text(encoding="utf-8"))
    assert card["artifact"]["sha256"] and card["calibration"]["threshold"] > 0
    text = "《战国无双３》是由光荣和ω-force开发的"  # a full-width digit: normalised, offsets still original
    ids, offs = reader.tok.encode(text)
    assert ids and all(0 <= a < b <= len(text) for a, b in offs)
    assert "".join(text[a:b] for a, b in offs).replace(" ", "") == text
    assert isinstance(reader.tok, ZhTokenizer)


def test_answers_a_cmrc_question_with_span_and_citation(reader: ZhReader) -> None:
    r = reader.read(QUESTION, [Passage(id="other", title="", text=UNRELATED),
                               Passage(id="DEV_0", title="战国无双3", text=PARAGRAPH)])
    assert r.passage_id == "DEV_0"
    assert char_f1(r.answer, ["光荣和ω-force"]) >= 0.8, r.answer
    assert PARAGRAPH[r.char_start:r.char_end] == r.answer
    g = ZhReaderGenerator(reader).generate(QUESTION, [Passage(id="DEV_0", title="", text=PARAGRAPH)])
    assert not g.abstained and g.citations == ("DEV_0",) and g.confidence is not None


def test_unrelated_paragraph_gets_low_confidence(reader: ZhReader) -> None:
    right = reader.read(QUESTION, [Passage(id="g", title="", text=PARAGRAPH)])
    wrong = reader.read(QUESTION, [Passage(id="u", title="", text=UNRELATED)])
    assert wrong.confidence < right.confidence
    assert wrong.abstained or wrong.confidence < 0.3
    g = ZhReaderGenerator(reader).generate(QUESTION, [Passage(id="u", title="", text=UNRELATED)])
    assert g.abstained == wrong.abstained


def test_missing_or_damaged_artifact_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ZhReaderArtifactError, match="card not found"):
        ZhReader.load(tmp_path)
    card = json.loads((default_directory() / CARD_FILE).read_text(encoding="utf-8"))
    (tmp_path / CARD_FILE).write_text(json.dumps(card), encoding="utf-8")
    with pytest.raises(ZhReaderArtifactError, match="model not found"):
        ZhReader.load(tmp_path)
    (tmp_path / "reader_zh.onnx").write_bytes(b"not a model")
    with pytest.raises(ZhReaderArtifactError, match="does not match its card"):
        ZhReader.load(tmp_path)
