"""Chinese entities for the entity graph: the language test, CJK title matching, jieba-based NER, routing.

The Chinese texts are short made-up sentences in the style of CMRC 2018 paragraphs (names of real places
and people, no copied text).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from types import SimpleNamespace

import numpy as np
import pytest

from amsrag.config import GraphConfig
from amsrag.indexes import entities
from amsrag.indexes.entities import (
    SurfaceMatcher,
    entity_key,
    extract_ner,
    is_matchable,
    is_mostly_han,
    ner_routes,
    title_surfaces,
)
from amsrag.indexes.entities_zh import extract_ner_zh, han_share, has_han, is_mixed, zh_entities
from amsrag.indexes.entity_graph import EntityGraph
from amsrag.types import PassageRow

LABELS = GraphConfig().ner_labels


# ---- the language test ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("江苏路街道是中国上海市长宁区下辖的一个街道办事处。", True),
    ("Boost C++ 函式库是一组扩充C++功能的程式库。", True),  # 11 Han of 24 non-space characters
    ("The Forbidden City (紫禁城) is a palace complex in Beijing.", False),
    ("Café Müller is a dance piece by Pina Bausch.", False),
    ("", False),
    ("   ", False),
])
def test_is_mostly_han(text: str, expected: bool) -> None:
    assert is_mostly_han(text) is expected


def test_han_share_counts_non_space_characters() -> None:
    assert han_share("北京 abc") == pytest.approx(2 / 5)
    assert han_share("ascii only") == 0.0
    assert has_han("Mao Zedong (毛泽东)") and not has_han("Mao Zedong")


def test_mixed_needs_both_scripts() -> None:
    assert is_mixed("由KML文件，在Google Earth作完整呈现")
    assert not is_mixed("江苏路街道是中国上海市长宁区下辖的一个街道办事处")
    assert not is_mixed("An English sentence with 北京 in it.")


# ---- title matching without spaces ------------------------------------------------------------------------------
def test_chinese_title_found_inside_chinese_text() -> None:
    m = SurfaceMatcher(["战国无双3", "江苏路街道", "鲁迅"], [0, 1, 2])
    text = "《战国无双3》由光荣开发。鲁迅曾住在江苏路街道附近。"
    assert [e for _, _, e in m.find(text)] == [0, 2, 1]
    assert m.find_in_texts(["无关", text])[0].tolist() == [1, 1, 1]


def test_latin_words_are_never_split() -> None:
    m = SurfaceMatcher(["Apple", "NGC 6231", "战国无双3"], [0, 1, 2])
    assert [e for _, _, e in m.find("NGC 6231是天蝎座的疏散星团，Apple公司")] == [1, 0]
    assert m.find("Applebee的餐厅") == []  # "Apple" inside a Latin word
    assert m.find("战国无双3D版") == []  # the digit run goes on into a Latin letter
    assert m.find("战国无双30") == []  # ... or a digit


def test_english_matching_unchanged() -> None:
    m = SurfaceMatcher(["Ed Wood", "Wood"], [0, 1])
    assert m.find("Ed Wood and Woodstock; Wood.") == [(0, 7, 0), (23, 27, 1)]


def test_two_han_characters_are_matchable() -> None:
    assert is_matchable("鲁迅", 3)
    assert not is_matchable("京", 3)
    assert is_matchable("Rome", 3) and not is_matchable("Ra", 3)  # English as before


def test_chinese_title_aliases_and_keys() -> None:
    assert title_surfaces("王栋 (1985年出生)") == ["王栋 (1985年出生)", "王栋"]
    assert title_surfaces("王栋（1985年出生）") == ["王栋（1985年出生）", "王栋"]
    assert entity_key("《战国无双3》") == "战国无双3"
    assert entity_key("ＮＧＣ　６２３１") == "ngc 6231"


# ---- Chinese NER -------------------------------------------------------------------------------------------------
def test_zh_entities_finds_the_kinds() -> None:
    found = dict(zh_entities("《战国无双3》在日本发售。莱昂德罗·内托效力于巴塞罗那足球俱乐部，也用Google Earth。"))
    assert found["战国无双3"] == "WORK_OF_ART"
    assert found["日本"] == "GPE"
    assert found["莱昂德罗·内托"] == "PERSON"  # parts joined at the interpunct
    assert found["巴塞罗那足球俱乐部"] == "ORG"  # proper noun + nouns ending in an organisation word
    assert found["Google Earth"] == "PRODUCT"


def test_zh_place_joined_with_its_suffix() -> None:
    assert ("江苏路街道", "GPE") in zh_entities("江苏路街道是上海市长宁区下辖的一个街道办事处。")


def test_extract_ner_zh_filters_labels_sorted_unique() -> None:
    text = "汪精卫和王伯群都住在上海，上海有《子夜》。"
    (all_found,) = extract_ner_zh([text], LABELS)
    assert all_found == tuple(sorted(set(all_found)))
    assert {"汪精卫", "王伯群", "上海", "子夜"} <= set(all_found)
    assert extract_ner_zh([text], ["WORK_OF_ART"]) == [("子夜",)]


def test_zh_entities_deterministic() -> None:
    text = "1965年考古发掘了位于辽宁北票西官营子村的冯素弗墓。"
    assert zh_entities(text) == zh_entities(text)


# ---- routing --------------------------------------------------------------------------------------------------------
class FakeNlp:
    """Stands in for spaCy: one PERSON entity "Ada Lovelace" per text, and a record of what it read."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def pipe(self, texts: Iterable[str], batch_size: int, n_process: int) -> Iterator[SimpleNamespace]:
        for t in texts:
            self.seen.append(t)
            yield SimpleNamespace(ents=[SimpleNamespace(text="Ada  Lovelace", label_="PERSON")])


@pytest.fixture
def fake_nlp(monkeypatch: pytest.MonkeyPatch) -> FakeNlp:
    nlp = FakeNlp()
    monkeypatch.setattr(entities, "ner_pipeline", lambda: nlp)
    return nlp


TEXTS = ["Ada Lovelace wrote notes.", "江苏路街道是上海市长宁区下辖的一个街道。", "由KML文件，在Google Earth作完整呈现"]


def test_ner_routes() -> None:
    assert ner_routes(TEXTS, chinese=True) == ([0, 2], [1, 2])
    assert ner_routes(TEXTS, chinese=False) == ([0, 1, 2], [])


def test_extract_ner_routes_by_language(fake_nlp: FakeNlp) -> None:
    ticks: list[int] = []
    out = extract_ner(TEXTS, LABELS, chunk=1, progress=ticks.append)
    assert fake_nlp.seen == [TEXTS[0], TEXTS[2]]  # the Chinese passage never reaches the English model
    assert out[0] == ("Ada Lovelace",)
    assert "江苏路街道" in out[1] and "Ada Lovelace" not in out[1]
    assert {"Ada Lovelace", "Google Earth", "KML"} <= set(out[2])  # mixed: both
    assert out[2] == tuple(sorted(out[2]))
    assert sum(ticks) == len(TEXTS)  # each text counted once


def test_extract_ner_english_only_is_spacy_only(fake_nlp: FakeNlp) -> None:
    english = ["Ada Lovelace wrote notes.", "Café Müller is a dance piece.", ""]
    assert extract_ner(english, LABELS) == [("Ada Lovelace",)] * 3
    assert fake_nlp.seen == english
    assert extract_ner([], LABELS) == []


def test_extract_ner_chinese_off_sends_all_to_spacy(fake_nlp: FakeNlp) -> None:
    assert extract_ner(TEXTS, LABELS, chinese=False) == [("Ada Lovelace",)] * 3
    assert fake_nlp.seen == TEXTS


# ---- the graph over Chinese passages --------------------------------------------------------------------------------
def _rows(items: Sequence[tuple[str, str]]) -> list[PassageRow]:
    return [PassageRow(i, f"p{i}", title, text) for i, (title, text) in enumerate(items)]


def test_graph_links_chinese_passages(fake_nlp: FakeNlp) -> None:
    rows = _rows([
        ("战国无双3", "《战国无双3》是由光荣和ω-force合作开发的动作游戏，于2010年发售。"),
        ("光荣特库摩", "光荣特库摩是日本的游戏公司，总部位于横滨。旗下作品有战国无双3等。"),
        ("横滨", "横滨是日本神奈川县的县厅所在地，人口约370万。"),
    ])
    graph = EntityGraph.build(rows, GraphConfig())
    assert fake_nlp.seen == []  # all passages are Chinese
    assert ("战国无双3", 1) in graph.entities_of(1)  # title mention inside Chinese text
    assert ("横滨", 1) in graph.entities_of(1)
    query = graph.query_entities("《战国无双3》的开发公司总部在哪里？")
    assert {graph.entity_key_of(e) for e in query} >= {"战国无双3"}
    ranked = graph.rank("《战国无双3》的开发公司总部在哪里？", [(0, 1.0)], 3)
    assert {pid for _, _, pid in ranked} >= {"p0", "p1"}


class TokenSource:
    """A `PassageSource` whose prefilter is the embedded store's: rows holding every BM25 token of the surface."""

    def __init__(self, rows: Sequence[PassageRow]) -> None:
        from amsrag.config import BM25Config
        from amsrag.indexes.bm25 import BM25Tokenizer

        self.tokenizer = BM25Tokenizer(BM25Config())
        self.by_row = {r.row: r for r in rows}

    def rows(self, numbers: Sequence[int]) -> list[PassageRow]:
        return [self.by_row[n] for n in numbers]

    def containing(self, surface: str) -> np.ndarray | None:
        want = set(self.tokenizer(surface))
        if not want:
            return None
        return np.asarray([r for r, p in self.by_row.items()
                           if want <= set(self.tokenizer(f"{p.title}\n{p.text}"))], dtype=np.int64)


def test_update_finds_a_new_chinese_title_in_old_passages(fake_nlp: FakeNlp) -> None:
    old = _rows([("光荣特库摩", "光荣特库摩是日本的游戏公司，旗下作品有战国无双3等。"),
                 ("横滨", "横滨是日本神奈川县的县厅所在地。")])
    new = [PassageRow(2, "p2", "战国无双3", "《战国无双3》是由光荣开发的动作游戏。")]
    config = GraphConfig()
    updated = EntityGraph.build(old, config).update(new, [], lambda: [*old, *new], source=TokenSource([*old, *new]))
    assert updated.entities_of(0) == EntityGraph.build([*old, *new], config).entities_of(0)


# ---- what the manifest records ---------------------------------------------------------------------------------------
def test_graph_params_record_the_chinese_settings() -> None:
    from amsrag.indexes.entities import CJK_MATCHING_VERSION
    from amsrag.indexes.entities_zh import ZH_NER_VERSION

    on = EntityGraph.expected_params(GraphConfig())
    assert on["ner_zh"] is True and on["zh_ner"] == ZH_NER_VERSION and on["jieba_version"]
    assert on["cjk_matching"] == CJK_MATCHING_VERSION
    off = EntityGraph.expected_params(GraphConfig(ner_zh=False))
    assert off["ner_zh"] is False and "zh_ner" not in off and "jieba_version" not in off
    assert EntityGraph.build([], GraphConfig(ner_zh=False)).with_config(GraphConfig()).config.ner_zh is False


def test_chinese_settings_never_refuse_an_index() -> None:
    from amsrag.indexes.entity_graph import ZH_PARAMS
    from amsrag.store.writes import param_differences, refusing_differences, zh_graph_problem

    expected = EntityGraph.expected_params(GraphConfig())
    legacy = {k: v for k, v in expected.items() if k not in ZH_PARAMS}  # as amsrag recorded before
    assert param_differences(legacy, expected) and not refusing_differences("graph", legacy, expected)
    assert refusing_differences("graph", {**legacy, "min_mention_chars": 4}, expected)  # the others still do
    assert refusing_differences("bm25", {"ner_zh": False}, {"ner_zh": True})
    assert zh_graph_problem(legacy, expected, lambda: 0) is None  # no Chinese text: nothing to rebuild
    assert zh_graph_problem(expected, expected, lambda: 3) is None
    problem = zh_graph_problem(legacy, expected, lambda: 3)
    assert problem is not None and "before amsrag recorded" in problem and "--component graph" in problem
    other = zh_graph_problem({**expected, "ner_zh": False}, expected, lambda: 3)
    assert other is not None and "ner_zh: index has False" in other


def test_update_config_still_refuses_a_new_ner_zh(tmp_path) -> None:
    from amsrag.config import AmsragConfig
    from amsrag.errors import InputError
    from amsrag.store import EmbeddedIndex

    with EmbeddedIndex.create(tmp_path / "idx") as idx, pytest.raises(InputError, match="ner_zh"):
        idx.update_config(AmsragConfig.model_validate({"graph": {"ner_zh": False}}))


# ---- the corrective evaluator's passage labels -------------------------------------------------------------------
def _english_labels(texts: list[str]) -> list[frozenset[str]]:
    """`passage_labels` as it was before Chinese texts had their own route: spaCy plus the patterns."""
    from amsrag.correct import text as t

    out = []
    for text, doc in zip(texts, entities.ner_pipeline().pipe(texts), strict=True):
        labels = {e.label_ for e in doc.ents}
        if t._YEAR.search(text) or t._MONTH.search(text):
            labels.add("DATE")
        if t._NUMBER.search(text):
            labels.add("CARDINAL")
        out.append(frozenset(labels))
    return out


def test_passage_labels_of_chinese_text() -> None:
    from amsrag.correct.text import passage_labels

    zh, mixed = "鲁迅1881年生于浙江绍兴，著有《呐喊》。", "由KML文件，在Google Earth作完整呈现，1990年"
    got = passage_labels([zh, mixed])
    assert got[0] == {"PERSON", "GPE", "WORK_OF_ART", "DATE", "CARDINAL"}
    assert {"PRODUCT", "DATE"} <= got[1] and _english_labels([mixed])[0] <= got[1]  # mixed: both
    assert _english_labels([zh])[0] != got[0]  # what spaCy's English model made of it


def test_ner_version_names_the_chinese_extractor() -> None:
    from amsrag.correct.text import ner_version
    from amsrag.indexes.entities_zh import ZH_NER_VERSION, zh_ner_info

    assert ZH_NER_VERSION in ner_version() and f"jieba=={zh_ner_info()['jieba_version']}" in ner_version()


@pytest.mark.slow
def test_passage_labels_of_english_unchanged_on_hotpotqa(shared_data) -> None:
    import json

    from amsrag.correct.text import passage_labels

    corpus = json.loads((shared_data / "hotpotqa" / "hipporag_hotpotqa_train_100_corpus.json").read_text("utf-8"))
    texts = ["".join(sentences) for sentences in corpus.values()][:400]
    assert sum(not t.isascii() for t in texts) > 50  # accents, and a few Han characters in English text
    assert passage_labels(texts) == _english_labels(texts)
