"""Chinese text: language detection, BM25 segmentation + bigrams, mixed scripts, and the manifest's
record of the tokenizer (an index built otherwise is refused; one built before Chinese support still opens
with the tokenizer it was built with)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from amsrag.config import AmsragConfig, BM25Config
from amsrag.errors import IndexMismatchError
from amsrag.indexes.bm25 import BM25Index, BM25Tokenizer
from amsrag.indexes.cjk_tokens import BIGRAM_MARK, chinese_stopwords
from amsrag.retrievers import retriever_for
from amsrag.store import EmbeddedIndex
from amsrag.text.language import detect_language, is_chinese
from amsrag.types import Passage, PassageRow

ZH = "TARG 使用什么信号来决定是否需要检索？"


@pytest.mark.parametrize(("text", "code"), [
    ("Who wrote the novel Hamlet?", "en"),
    ("《战国无双3》是由哪两个公司合作开发的？", "zh"),
    (ZH, "zh"),
    ("Le chat est assis sur la table de la cuisine.", "fr"),
    ("東京タワーはどこにありますか", "ja"),
    ("12 34 !!", "und"),
])
def test_language_of_passages_and_queries(text: str, code: str) -> None:
    assert detect_language(text).code == code


@pytest.mark.parametrize("text", ["Who wrote the novel Hamlet?", "《战国无双3》是由哪两个公司合作开发的？", ZH,
                                  "東京タワーはどこにありますか", "12 34 !!", "When was 北京 founded, and by whom?",
                                  "北京 Beijing", "서울은 어디에 있나요", "粤语 is spoken in Hong Kong 香港"])
def test_is_chinese_agrees_with_detect_language(text: str) -> None:
    assert is_chinese(text) == (detect_language(text).code == "zh")


def test_mixed_script_is_marked() -> None:
    lang = detect_language(ZH)
    assert lang.code == "zh" and lang.mixed and lang.is_cjk
    assert not detect_language("Who wrote the novel Hamlet?").mixed
    assert detect_language("When was 北京 founded, and by whom was the city planned?").code == "en"


def test_han_runs_are_segmented_with_bigrams_and_stop_words_out() -> None:
    tokens = BM25Tokenizer(BM25Config())(ZH)
    assert tokens[0] == "targ"  # the Latin run: lowercased, as in English
    words = [t for t in tokens if not t.startswith(BIGRAM_MARK)]
    assert {"使用", "信号", "决定", "检索"} <= set(words)
    assert not set(words) & chinese_stopwords()  # 什么 / 是否 / 需要 are stop words
    bigrams = [t[1:] for t in tokens if t.startswith(BIGRAM_MARK)]
    assert bigrams[:3] == ["使用", "用什", "什么"] and len(bigrams) == len("使用什么信号来决定是否需要检索") - 1


def test_modes_and_the_old_tokenizer() -> None:
    assert BM25Tokenizer(BM25Config(cjk="none"))(ZH) == ["targ", "使用什么信号来决定是否需要检索"]
    assert all(t.startswith(BIGRAM_MARK) or t == "targ" for t in BM25Tokenizer(BM25Config(cjk="bigram"))(ZH))
    assert not any(t.startswith(BIGRAM_MARK) for t in BM25Tokenizer(BM25Config(cjk="jieba"))(ZH))


def test_mixed_text_is_tokenised_per_script() -> None:
    tokens = BM25Tokenizer(BM25Config())("runners使用BM25和dense检索systems")
    assert tokens[0] == "runner" and "bm25" in tokens and "dens" in tokens and tokens[-1] == "system"
    assert "检索" in tokens and "使用" in tokens


@pytest.mark.parametrize("cjk", ["jieba+bigram", "jieba", "bigram", "none"])
def test_text_without_han_is_tokenised_as_before(cjk: str) -> None:
    text = "The Eiffel Tower, completed in 1889, was the world's tallest structure; naïve café-goers ran."
    assert BM25Tokenizer(BM25Config(cjk=cjk))(text) == BM25Tokenizer(BM25Config(cjk="none"))(text)


def test_chinese_question_finds_its_passage() -> None:
    passages = ["TARG 在生成前读取模型的不确定性信号，据此决定是否需要检索外部证据。",
                "混合检索把 BM25 和向量检索的结果用倒数排名融合合并。",
                "路由器根据分类器的置信度在三种策略之间选择。"]
    rows = [PassageRow(i, f"p{i}", "", t) for i, t in enumerate(passages)]
    for cjk, found in (("jieba+bigram", True), ("none", False)):
        scores = BM25Index.build(rows, BM25Config(cjk=cjk)).scores("用什么信号决定检索？")
        assert bool(scores.max() > 0 and int(np.argmax(scores)) == 0) is found


def _index(tmp_path, cjk: str) -> EmbeddedIndex:
    config = AmsragConfig()
    config = config.model_copy(update={"bm25": config.bm25.model_copy(update={"cjk": cjk})})
    index = EmbeddedIndex.create(tmp_path / f"index-{cjk}", config)
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(2, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.add([Passage.make("混合检索把 BM25 和向量检索的结果合并。", id="a"),
               Passage.make("路由器根据分类器的置信度选择策略。", id="b")], vectors=vectors)
    index.close()
    return index


def _edit_bm25_params(path, edit) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    edit(manifest["components"]["bm25"]["params"])
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_index_built_with_another_tokenizer_is_refused(tmp_path) -> None:
    path = _index(tmp_path, "jieba+bigram").path
    assert EmbeddedIndex.open(path).config.bm25.cjk == "jieba+bigram"
    _edit_bm25_params(path, lambda p: p.update(cjk="bigram"))
    with pytest.raises(IndexMismatchError, match="cjk: index has 'bigram'"):
        EmbeddedIndex.open(path)
    _edit_bm25_params(path, lambda p: p.update(cjk="jieba+bigram", segmenter_lib="jieba==0.1"))
    with pytest.raises(IndexMismatchError, match="segmenter_lib"):
        EmbeddedIndex.open(path)


def test_index_from_before_chinese_support_keeps_its_tokenizer(tmp_path) -> None:
    path = _index(tmp_path, "none").path
    assert "cjk" not in json.loads((path / "manifest.json").read_text())["components"]["bm25"]["params"]
    config_file = path / "config.toml"  # an older amsrag's config has no `cjk`: it reads as today's default
    config_file.write_text(config_file.read_text().replace('cjk = "none"\n', ""))
    assert AmsragConfig.load(config_file).bm25.cjk == "jieba+bigram"
    index = EmbeddedIndex.open(path)
    assert index.config.bm25.cjk == "none"
    assert retriever_for(index, "bm25").search("混合检索把", 2)[0].id == "a"  # the old one-token-per-run match
    index.close()


def test_question_language_warns_what_the_index_cannot_read() -> None:
    from amsrag.pipeline.language import question_language

    english_only = AmsragConfig()
    got = question_language(ZH, english_only)
    assert (got.code, got.mixed) == ("zh", True)
    assert len(got.warnings) == 1 and "reads English only" in got.warnings[0]
    legacy = english_only.model_copy(update={"bm25": english_only.bm25.model_copy(update={"cjk": "none"})})
    assert len(question_language(ZH, legacy).warnings) == 2
    assert question_language("Who wrote Hamlet?", english_only).warnings == ()
    assert question_language("12 34", english_only).code == "und"


def test_ingest_warns_when_chinese_meets_an_english_encoder() -> None:
    from amsrag.pipeline.language import index_language_warnings

    config = AmsragConfig()
    assert index_language_warnings(config, {"en": 1000}) == []
    assert index_language_warnings(config, {"en": 990, "pcm": 10}) == []  # detector noise on English text
    warning = index_language_warnings(config, {"en": 900, "zh": 100})
    assert len(warning) == 1 and "100 of 1000 passages" in warning[0] and "Chinese 100" in warning[0]


def test_prefilter_finds_a_chinese_title_inside_a_longer_run() -> None:
    text = "光荣特库摩是日本的游戏公司，旗下作品有战国无双3等。"
    rows = [PassageRow(0, "p0", "", text), PassageRow(1, "p1", "", "混合检索把结果合并。")]
    for cjk, want in (("jieba+bigram", [0]), ("bigram", [0])):
        got = BM25Index.build(rows, BM25Config(cjk=cjk)).rows_with_words("特库摩")  # cut otherwise by jieba
        assert got is not None and sorted(got.tolist()) == want
    assert BM25Index.build(rows, BM25Config(cjk="jieba")).rows_with_words("特库摩") is None  # nothing certain
