"""Classifier features of Chinese questions: the same slots as English, filled from Chinese cues; English
questions bit-identical to the English-only features."""

from __future__ import annotations

import json

import numpy as np
import pytest

from amsrag.classify.features import (
    FEATURE_NAMES,
    N_FEATURES,
    english_features,
    english_is_comparison,
    features_batch,
    is_comparison,
    question_features,
)
from conftest import SHARED_DATA

ENGLISH = [
    "Who is the mother of the director of film Polish-Russian War (Film)?",
    "Which film came out first, Blind Shaft or The Mask Of Fu Manchu?",
    "Are Café Tacuba and Maná both Mexican bands?",
    "what is the capital of france",
    "Who was born first, Zoë Kravitz or Björk?",
    "In which year was the University of São Paulo founded?",
    "Is the Forbidden City (紫禁城) in Beijing?",  # a few Han characters: still English
    "How many children did Ōkubo Toshimichi's father have?",
]


def f(question: str) -> dict[str, float]:
    return {n: float(v) for n, v in zip(FEATURE_NAMES, question_features(question), strict=True)}


@pytest.mark.parametrize("question", ENGLISH)
def test_english_questions_unchanged(question: str) -> None:
    assert np.array_equal(question_features(question), english_features(question))
    assert is_comparison(question) == english_is_comparison(question)


def test_english_bit_identical_on_shared_data() -> None:
    path = SHARED_DATA / "question_lists" / "honesty_2wikimultihopqa_dev.jsonl"
    if not path.is_file():
        pytest.skip("shared data not present")
    with open(path, encoding="utf-8") as fh:
        questions = [json.loads(line)["question"] for line, _ in zip(fh, range(300), strict=False)]
    assert np.array_equal(features_batch(questions), np.stack([english_features(q) for q in questions]))


def test_chinese_row_has_the_same_shape() -> None:
    row = question_features("《战国无双3》是由哪两个公司合作开发的？")
    assert row.shape == (N_FEATURES,) and row.dtype == np.float32
    assert features_batch(["于乐的职业是什么？", "Who is Yu Le?"]).shape == (2, N_FEATURES)


@pytest.mark.parametrize(("question", "wh"), [
    ("莱昂德罗·内托的职业是什么？", "what"),
    ("男女主角亦有专属声优这一模式是由谁改编的？", "who"),
    ("《战国无双3》的开发公司是在哪一年成立的？", "when"),
    ("拉脱维亚大学是什么时候成立的？", "when"),
    ("于乐在哪里出生？", "where"),
    ("于乐在哪出身？", "where"),
    ("莱昂德罗·内托的国籍是哪个国家？", "which"),
    ("江苏路街道的户籍人口有多少？", "how"),
    ("为什么他被称为文学家？", "why"),
    ("周杰伦是台湾歌手吗？", "yesno"),
    ("江苏路街道是否属于长宁区？", "yesno"),
    ("请介绍江苏路街道。", "other"),
])
def test_chinese_wh_type(question: str, wh: str) -> None:
    row = f(question)
    assert [w for w in ("what", "who", "when", "where", "which", "how", "why", "yesno", "other")
            if row[f"wh_{w}"]] == [wh]


def test_chinese_comparison() -> None:
    assert is_comparison("周杰伦和林俊杰谁更早出道？")
    assert is_comparison("北京大学和清华大学哪个更早成立？")
    assert is_comparison("《红楼梦》和《三国演义》的作者都是明朝人吗？")
    assert not is_comparison("莱昂德罗·内托的国籍是哪个国家？")
    assert not is_comparison("北京大学哪一年成立？")  # one entity
    row = f("周杰伦和林俊杰谁更早出道？")
    assert row["two_entity_comparison"] == 1.0 and row["comparative"] >= 1 and row["conjunctions"] == 1


def test_chinese_bridge_cues() -> None:
    row = f("执导《霸王别姬》的导演的妻子是谁？")
    assert row["names"] >= 1 and row["quoted_or_paren"] == 1  # the 《》 title
    assert row["possessive"] == 2 and row["of_of"] == 1  # "X的Y的Z"
    assert row["relation_chains"] >= 1 and row["relation_words"] >= 1
    one_hop = f("于乐的职业是什么？")
    assert one_hop["of_of"] == 0 and one_hop["relation_chains"] == 0


def test_chinese_length_and_years() -> None:
    row = f("2013年于乐状态有了什么变化？")
    assert row["years"] == 1
    # 11 Han characters at 1.6 per word, and the number "2013" as a word
    assert row["log_words"] == pytest.approx(np.log1p(11 / 1.6 + 1), rel=1e-6)
    assert f("Google Earth是哪家公司开发的？")["names"] >= 1  # Latin-script name inside Chinese


def test_a_chinese_question_is_classified_with_a_neutral_embedding() -> None:
    """MiniLM cannot read Chinese: the classifier ignores the vector it gets and the features decide."""
    from amsrag.classify.model import ComplexityClassifier

    clf = ComplexityClassifier.load()
    rng = np.random.default_rng(0)
    q = "冯素弗的哥哥建立的国家的都城在哪里？"
    a, b = (v / np.linalg.norm(v) for v in rng.normal(size=(2, 384)).astype(np.float32))
    pa, pb = clf.predict(q, query_vector=a), clf.predict(q, query_vector=b)
    assert pa.probs == pb.probs and not pa.embedding
    assert pa.label == "multi_hop"  # its bridge cues (的…的…) decide; with the [UNK]-ridden vector it was one_hop
    assert clf.predict("长江的长度是多少公里？", query_vector=a).label == "one_hop"
    assert pa.to_dict()["embedding"] is False
    english = "Who is the mother of the director of film Polish-Russian War (Film)?"
    ea, eb = clf.predict(english, query_vector=a), clf.predict(english, query_vector=b)
    assert ea.embedding and "embedding" not in ea.to_dict()
    assert ea.probs != eb.probs  # an English question still reads its embedding
