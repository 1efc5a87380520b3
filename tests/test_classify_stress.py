"""The classifier's stress set: templated surface-simple multi-hop questions (amsrag.learn.classifier.stress)."""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from amsrag.errors import InputError
from amsrag.ingest.datasets import MUSIQUE_FILES
from amsrag.learn.classifier.stress import (
    WIKI_FILE,
    StressQuestion,
    clean_name,
    musique_questions,
    possessive,
    stress_set,
    wiki_questions,
)
from amsrag.text.normalise import normalise_question

GET_LOW: dict[str, Any] = {
    "_id": "w1", "type": "compositional", "answer": "October 5, 1987",
    "question": "What is the date of birth of the performer of song Get Low (Dillon Francis And Dj Snake Song)?",
    "evidences": [["Get Low", "performer", "Dillon Francis"], ["Dillon Francis", "date of birth", "October 5, 1987"]],
}
GRANDFATHER: dict[str, Any] = {
    "_id": "w2", "type": "inference", "answer": "Haytham II Shirvanshah",
    "question": "Who is Abbas Shirvanshah's paternal grandfather?",
    "evidences": [["Abbas Shirvanshah", "father", "Shirvanshah Ali"],
                  ["Shirvanshah Ali", "father", "Haytham II Shirvanshah"]],
}
BORN_FIRST: dict[str, Any] = {
    "_id": "w3", "type": "comparison", "answer": "John R. Gunn",
    "question": "Was Diego Lugano or John R. Gunn born first?",
    "evidences": [["Diego Lugano", "date of birth", "2 November 1980"],
                  ["John R. Gunn", "date of birth", "August 17, 1877"]],
}
DIRECTORS: dict[str, Any] = {
    "_id": "w4", "type": "bridge_comparison", "answer": "no",
    "question": "Are both director of film Sacro Gra and director of film Das Boot from the same country?",
    "evidences": [["Sacro GRA", "director", "Gianfranco Rosi"], ["Das Boot", "director", "Wolfgang Petersen"],
                  ["Gianfranco Rosi (director)", "country of citizenship", "Italian"],
                  ["Wolfgang Petersen", "country of citizenship", "German"]],
}
VAN_HOOK: dict[str, Any] = {
    "id": "2hop__574419_270105", "answer": "Stanley", "answer_aliases": [],
    "question": "What is the seat of the county where Van Hook Township is located?",
    "question_decomposition": [
        {"id": 574419, "question": "Van Hook Township >> located in the administrative territorial entity",
         "answer": "Mountrail County"},
        {"id": 270105, "question": "#1 >> capital", "answer": "Stanley"}],
}
DAMERJOG: dict[str, Any] = {
    "id": "2hop__1_2", "answer": "Hassan Gouled Aptidon", "answer_aliases": [],
    "question": "Who was the first president of Damerjog's country?",
    "question_decomposition": [
        {"id": 1, "question": "Damerjog >> country", "answer": "Djibouti"},
        {"id": 2, "question": "Who was the first president of #1 ?", "answer": "Hassan Gouled Aptidon"}],
}


def _texts(items: list[StressQuestion]) -> dict[str, str]:
    return {s.template: s.question for s in items}


# ---------------------------------------------------------------- templates on in-memory records


def test_composition_templates_hide_the_bridge():
    got = _texts(wiki_questions(GET_LOW))
    assert got["when-born(performer-of)"] == "When was the performer of Get Low born?"
    assert got["birth-date-fragment(performer-of)"] == "Date of birth of the performer of Get Low?"
    assert got["when-born(performer-poss)"] == "When was Get Low's performer born?"
    assert got["birth-date(artist-behind)"] == "What is the date of birth of the artist behind Get Low?"
    items = wiki_questions(GET_LOW)
    assert {(s.kind, s.dataset, s.source_id, s.hop, s.synthetic) for s in items} == {
        ("2wiki composition", "2wikimultihopqa", "w1", "multi_hop", True)}


def test_evidences_as_a_python_literal_string_read_like_the_list():
    as_string = {**GET_LOW, "evidences": repr(GET_LOW["evidences"])}
    assert wiki_questions(as_string) == wiki_questions(GET_LOW)
    assert wiki_questions({**GET_LOW, "evidences": "[['broken'"}) == []


def test_unchained_or_unphrasable_records_give_nothing():
    unchained = {**GET_LOW, "evidences": [["Get Low", "performer", "Dillon Francis"],
                                          ["Someone Else", "date of birth", "1990"]]}
    assert wiki_questions(unchained) == []
    unknown = {**GET_LOW, "evidences": [["Get Low", "sponsor", "Dillon Francis"],
                                        ["Dillon Francis", "date of birth", "October 5, 1987"]]}
    assert wiki_questions(unknown) == []


def test_kinship_words_for_two_family_hops():
    got = _texts(wiki_questions(GRANDFATHER))
    assert got["kin-of"] == "Who is the paternal grandfather of Abbas Shirvanshah?"
    assert got["kin-poss"] == "Who is Abbas Shirvanshah's paternal grandfather?"
    assert got["father(father-of)"] == "Who is the father of the father of Abbas Shirvanshah?"
    assert {s.kind for s in wiki_questions(GRANDFATHER)} == {"2wiki inference"}


def test_comparison_templates():
    got = _texts(wiki_questions(BORN_FIRST))
    assert got["born-first"] == "Who was born first, Diego Lugano or John R. Gunn?"
    assert got["older"] == "Who is older, Diego Lugano or John R. Gunn?"
    got = _texts(wiki_questions(DIRECTORS))  # the bridge is spelt "Gianfranco Rosi (director)" the second time
    assert got["roles-share-nationality"] == "Did the directors of Sacro GRA and Das Boot share a nationality?"
    assert got["roles-same-country"] == "Are the directors of Sacro GRA and Das Boot from the same country?"


def test_musique_relation_chain_templates():
    got = _texts(musique_questions(VAN_HOOK))
    assert got["capital-of(unit-containing)"] == "What is the capital of the county that contains Van Hook Township?"
    assert got["capital-fragment(unit-where-located)"] == "Capital of the county where Van Hook Township is located?"
    assert {s.kind for s in musique_questions(VAN_HOOK)} == {"musique composition"}


def test_musique_natural_last_step_takes_the_noun_phrase():
    got = _texts(musique_questions(DAMERJOG))
    assert got == {"substituted(country-of)": "Who was the first president of the country of Damerjog?",
                   "substituted(country-poss)": "Who was the first president of Damerjog's country?"}
    vague = {**DAMERJOG, "question_decomposition": [
        DAMERJOG["question_decomposition"][0], {"question": "What percentage was #1 ?", "answer": "5.1"}]}
    assert musique_questions(vague) == []


def test_questions_naming_the_answer_or_the_bridge_are_dropped():
    # The album's title names its performer: every template would show the bridge.
    self_titled = {"_id": "w5", "type": "compositional", "answer": "1981", "question": "When was Beyoncé born?",
                   "evidences": [["Beyoncé (album)", "performer", "Beyoncé"], ["Beyoncé", "date of birth", "1981"]]}
    assert wiki_questions(self_titled) == []
    answer_in_title = {**VAN_HOOK, "answer": "Van Hook"}
    assert musique_questions(answer_in_title) == []


def test_name_cleaning_and_possessives():
    assert clean_name("Man Alive (1945 film)") == "Man Alive"
    assert clean_name("Paul Davis (basketball)") == "Paul Davis"
    assert clean_name("Country Girl (Shake It for Me)") == "Country Girl (Shake It for Me)"
    assert clean_name('Mary "May" Morris') == "Mary Morris"
    assert clean_name("Charles (953–993) was the Duke of Lower Lorraine") is None
    assert clean_name("Herova? Zerova?") is None
    assert possessive("Inception") == "Inception's"
    assert possessive("Two Sergeants of General Custer") is None
    assert possessive("O Valencia!") is None


def test_a_missing_file_skips_its_source(tmp_path: Path):
    (tmp_path / "musique").mkdir()
    (tmp_path / MUSIQUE_FILES[0]).write_text(json.dumps(VAN_HOOK) + "\n", "utf-8")
    got = stress_set(tmp_path, per_record=5)
    assert got and {s.dataset for s in got} == {"musique"}
    assert stress_set(tmp_path, per_record=1) == stress_set(tmp_path, per_record=1)
    assert len(stress_set(tmp_path, per_record=1)) == 1


def test_no_source_at_all_is_an_input_error(tmp_path: Path):
    with pytest.raises(InputError, match=str(tmp_path)):
        stress_set(tmp_path)
    with pytest.raises(InputError):
        stress_set(tmp_path / "nowhere")


# ---------------------------------------------------------------- the set built from ../shared/data


@cache
def _built(data_dir: Path, per_record: int = 1, seed: int = 13) -> tuple[StressQuestion, ...]:
    return tuple(stress_set(data_dir, per_record=per_record, seed=seed))


def _records(data_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    wiki = data_dir / WIKI_FILE
    if wiki.is_file():
        out |= {("2wikimultihopqa", r["_id"]): r for r in json.loads(wiki.read_text("utf-8"))}
    for name in MUSIQUE_FILES:
        path = data_dir / name
        if path.is_file():
            text = path.read_text("utf-8")
            rows = json.loads(text) if path.suffix == ".json" else [json.loads(x) for x in text.splitlines() if x]
            out |= {("musique", r["id"]): r for r in rows}
    return out


def _words(text: str) -> str:
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return f" {normalise_question(folded)} "


def test_shared_set_is_deterministic_deduplicated_and_sorted(shared_data: Path):
    items = list(_built(shared_data))
    assert items == stress_set(shared_data)
    assert len(items) >= 400
    keys = [normalise_question(s.question) for s in items]
    assert len(keys) == len(set(keys))
    assert items == sorted(items, key=lambda s: (s.dataset, s.kind, s.question, s.source_id))
    assert max(Counter((s.dataset, s.source_id) for s in items).values()) == 1
    assert [s.template for s in stress_set(shared_data, seed=14)] != [s.template for s in items]
    more = _built(shared_data, per_record=2)
    assert len(more) > len(items) and max(Counter((s.dataset, s.source_id) for s in more).values()) == 2


def test_shared_set_reads_as_questions_from_both_data_sets(shared_data: Path):
    items = _built(shared_data)
    assert all(s.question.endswith("?") and s.question[:1].isupper() and "#" not in s.question for s in items)
    assert all(s.hop == "multi_hop" and s.synthetic for s in items)
    kinds = Counter(s.kind for s in items)
    assert {"2wiki composition", "2wiki comparison", "2wiki bridge comparison", "musique composition"} <= set(kinds)
    assert {s.dataset for s in items} == {"2wikimultihopqa", "musique"}


def test_shared_set_never_names_the_answer_or_a_bridge(shared_data: Path):
    records = _records(shared_data)
    for s in _built(shared_data, per_record=3):
        record = records[(s.dataset, s.source_id)]
        q = _words(s.question)
        if s.dataset == "musique":
            hidden = [step["answer"] for step in record["question_decomposition"]]
            hidden += [record["answer"], *record.get("answer_aliases", [])]
        else:
            ev = record["evidences"]
            hidden = [t[2] for t in ev]  # every looked-up value: the bridges of chains, the facts compared
            if record["type"] in ("compositional", "inference"):
                hidden += [record["answer"], ev[1][0]]
            elif record["type"] == "bridge_comparison":
                hidden += [ev[2][0].split(" (")[0], ev[3][0].split(" (")[0]]
        assert not [h for h in hidden if _words(h).strip() and _words(h) in q], s
