"""Dataset loaders on small real slices of ../shared/data (tests/fixtures, see SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amsrag.errors import InputError
from amsrag.ingest import answers_of, dataset_from_name, detect_format, load_qa
from amsrag.types import QASet, content_hash, passage_id_for

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str, **kwargs) -> QASet:
    return load_qa(FIXTURES / name, **kwargs)


def assert_consistent(qa: QASet) -> None:
    """Gold ids resolve, passages are unique by id and by content, ids are content ids."""
    ids = [p.id for p in qa.passages]
    assert len(ids) == len(set(ids))
    assert len({p.content_hash for p in qa.passages}) == len(ids)
    assert all(p.id == passage_id_for(p.title, p.text) for p in qa.passages)
    assert all(p.text and p.text == p.text.strip() for p in qa.passages)
    known = set(ids)
    for q in qa.questions:
        assert set(q.gold_passage_ids) <= known, q.id
        assert len(q.gold_passage_ids) == len(set(q.gold_passage_ids))
        assert q.question == q.question.strip() and q.question
        assert all(isinstance(a, str) and a for a in q.answers)
    assert len({q.id for q in qa.questions}) == len(qa.questions)


def by_id(qa: QASet) -> dict:
    return {p.id: p for p in qa.passages}


# ---------------------------------------------------------------- HotpotQA layouts


def test_hotpot_hugging_face_layout() -> None:
    qa = load("hotpot_hf_dev_3.jsonl")
    assert_consistent(qa)
    assert len(qa.questions) == 3
    assert len(qa.passages) == 30
    first = qa.questions[0]
    assert first.id == "5a8ce55f554299441c6b9f62"
    assert first.answers == ["Tulsa"]
    assert (first.dataset, first.complexity, first.qtype) == ("hotpotqa", "multi_hop", "bridge")
    assert first.metadata == {"level": "hard"}
    gold_titles = sorted(by_id(qa)[g].title for g in first.gold_passage_ids)
    assert gold_titles == ["Tinted Windows (album)", "Tinted Windows (band)"]
    assert {q.qtype for q in qa.questions} == {"bridge", "comparison"}
    assert all(len(q.gold_passage_ids) == 2 for q in qa.questions)
    assert all(p.metadata == {"source": "hotpotqa"} for p in qa.passages)


def test_hotpot_paragraph_text_is_joined_sentences() -> None:
    raw = json.loads((FIXTURES / "hotpot_hf_dev_3.jsonl").read_text("utf-8").splitlines()[0])
    title, sentences = raw["context"]["title"][0], raw["context"]["sentences"][0]
    text = "".join(sentences).strip()
    qa = load("hotpot_hf_dev_3.jsonl")
    assert by_id(qa)[passage_id_for(title, text)].text == text
    assert "  " not in text and text.count(". ") >= 1  # sentences carry their own leading space


def test_hotpot_original_layout_jsonl_and_json_list() -> None:
    for name in ("hotpot_migres_original_3.jsonl", "hotpot_hipporag_original_3.json"):
        qa = load(name)
        assert_consistent(qa)
        assert len(qa.questions) == 3
        assert all(q.dataset == "hotpotqa" and q.complexity == "multi_hop" for q in qa.questions)
        assert all(len(q.gold_passage_ids) == 2 for q in qa.questions)
        assert all(q.qtype in ("bridge", "comparison") for q in qa.questions)
    migres = load("hotpot_migres_original_3.jsonl")
    assert migres.questions[0].id == "5a7f6fd75542992e7d278cfa"
    assert migres.questions[0].answers == ["Rush"]
    gold = sorted(by_id(migres)[g].title for g in migres.questions[0].gold_passage_ids)
    assert gold == ["Neil Peart", "Nobody's Hero"]


def test_hotpot_ircot_layout() -> None:
    qa = load("hotpot_ircot_3.jsonl")
    assert_consistent(qa)
    assert len(qa.questions) == 3
    q = qa.questions[0]
    assert q.id == "5a8c7595554299585d9e36b6"
    assert q.answers == ["Chief of Protocol"]
    assert (q.dataset, q.complexity, q.qtype) == ("hotpotqa", "multi_hop", None)
    assert sorted(by_id(qa)[g].title for g in q.gold_passage_ids) == ["Kiss and Tell (1945 film)", "Shirley Temple"]


def test_same_paragraph_gets_the_same_id_in_two_layouts() -> None:
    """Content ids: a paragraph shared by two files is one passage id (dedup across files)."""
    hf, hippo_corpus = load("hotpot_hipporag_original_3.json"), load("hotpot_hipporag_corpus_2.json")
    assert {p.id for p in hippo_corpus.passages} <= {p.id for p in hf.passages}


def test_2wikimultihopqa_layout_joins_sentences_with_spaces() -> None:
    qa = load("2wikimultihopqa_migres_3.json")
    assert detect_format(FIXTURES / "2wikimultihopqa_migres_3.json") == "hotpotqa"
    assert_consistent(qa)
    assert len(qa.questions) == 3
    q = qa.questions[0]
    assert (q.dataset, q.complexity, q.qtype) == ("2wikimultihopqa", "multi_hop", "compositional")
    assert q.answers == ["October 5, 1987"]
    assert len(q.gold_passage_ids) == 2
    theodred = next(p for p in qa.passages if p.title == "Theodred II (Bishop of Elmham)")
    assert "Elmham. The date" in theodred.text  # 2Wiki sentences have no leading space


# ---------------------------------------------------------------- MuSiQue


def test_musique() -> None:
    qa = load("musique_migres_3.jsonl")
    assert_consistent(qa)
    assert [q.qtype for q in qa.questions] == ["2hop", "3hop", "4hop"]
    assert [len(q.gold_passage_ids) for q in qa.questions] == [2, 3, 4]
    q = qa.questions[0]
    assert q.id == "2hop__574419_270105"
    assert q.answers == ["Stanley"]
    assert (q.dataset, q.complexity) == ("musique", "multi_hop")
    assert len(qa.passages) <= 60
    raw = [json.loads(line) for line in (FIXTURES / "musique_migres_3.jsonl").read_text("utf-8").splitlines()]
    assert qa.questions[1].answers == answers_of(raw[1]["answer"], raw[1]["answer_aliases"])


def test_musique_corpus_json_list() -> None:
    qa = load("musique_hipporag_corpus_3.json")
    assert detect_format(FIXTURES / "musique_hipporag_corpus_3.json") == "corpus"
    assert (len(qa.passages), len(qa.questions)) == (3, 0)
    assert qa.passages[0].title == "Journal of Mathematical Physics"
    assert qa.passages[0].metadata == {"source": "musique"}


# ---------------------------------------------------------------- NQ, TriviaQA, PopQA


def test_nq_oracle_gz() -> None:
    qa = load("nq_oracle_5.jsonl.gz")
    assert_consistent(qa)
    assert len(qa.questions) == 5
    assert all(len(q.gold_passage_ids) == 1 for q in qa.questions)
    assert all((q.dataset, q.complexity) == ("nq", "one_hop") for q in qa.questions)
    q = qa.questions[0]
    assert q.question == "who got the first nobel prize in physics"
    assert q.answers == ["Wilhelm Conrad Röntgen"]
    assert by_id(qa)[q.gold_passage_ids[0]].title == "List of Nobel laureates in Physics"
    assert q.id == "nq_oracle_5:1"


def test_question_only_flashrag_files() -> None:
    nq, trivia, pop = (
        load("flashrag_nq_test_3.jsonl"),
        load("flashrag_triviaqa_test_3.jsonl"),
        load("flashrag_popqa_test_3.jsonl"),
    )
    for qa, dataset in ((nq, "nq"), (trivia, "triviaqa"), (pop, "popqa")):
        assert len(qa.questions) == 3 and not qa.passages
        assert all(q.dataset == dataset and q.complexity == "one_hop" and q.answers for q in qa.questions)
        assert all(q.id.startswith(f"{dataset}-test_") for q in qa.questions)
    assert pop.questions[0].answers == ["Ralph Rainger", "Ralph Reichenthal"]
    assert pop.questions[0].metadata == {"prop": "composer", "s_pop": 1381, "o_pop": 922}
    assert len(trivia.questions[0].answers) > 1  # aliases


def test_migres_odqa_mixed_rows() -> None:
    qa = load("migres_odqa_nq_trivia_3.jsonl")
    assert_consistent(qa)
    assert [q.dataset for q in qa.questions] == ["nq", "nq", "triviaqa"]
    assert [len(q.gold_passage_ids) for q in qa.questions] == [1, 1, 0]  # NQ rows carry their paragraph
    assert qa.questions[1].answers == ["Tessa Peake - Jones"]
    trivia = qa.questions[2]
    assert trivia.answers == ["Cassini's Division", "Cassini's division"]  # a list serialised into a string
    assert trivia.id == "migres_odqa_nq_trivia_3:3"


def test_question_list() -> None:
    qa = load("honesty_hq_dev_5.jsonl")
    assert detect_format(FIXTURES / "honesty_hq_dev_5.jsonl") == "questions"
    assert len(qa.questions) == 5 and not qa.passages
    q = qa.questions[0]
    assert q.question == "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert q.answers == ["yes"]
    assert (q.dataset, q.complexity, q.gold_passage_ids) == ("hotpotqa", "multi_hop", [])
    assert q.id == "honesty_hq_dev_5:1"


def test_retrievalqa_snippets_are_passages_not_gold() -> None:
    qa = load("retrievalqa_2.jsonl")
    assert_consistent(qa)
    assert [q.metadata["data_source"] for q in qa.questions] == ["realtimeqa", "toolqa"]
    assert all(q.dataset == "retrievalqa" and not q.gold_passage_ids for q in qa.questions)
    assert qa.questions[0].answers == ["15%"]
    assert any(p.title == "" for p in qa.passages)  # ToolQA snippets are bare strings


# ---------------------------------------------------------------- SQuAD


def test_squad_original_layout() -> None:
    qa = load("squad_v1.1_1article_2paragraphs.json")
    assert_consistent(qa)
    raw = json.loads((FIXTURES / "squad_v1.1_1article_2paragraphs.json").read_text("utf-8"))
    n_questions = sum(len(p["qas"]) for p in raw["data"][0]["paragraphs"])
    assert len(qa.passages) == 2 and len(qa.questions) == n_questions
    assert all(p.title == "American Idol" for p in qa.passages)  # underscores replaced
    q = qa.questions[0]
    assert (q.id, q.answers, q.dataset, q.complexity) == (
        "56d21eb1e7d4791d00902667",
        ["Simon Fuller"],
        "squad",
        "one_hop",
    )
    assert all(len(q.gold_passage_ids) == 1 for q in qa.questions)
    assert all(len(q.answers) == len(set(q.answers)) for q in qa.questions)


def test_squad_routerlens_layout() -> None:
    qa = load("squad_routerlens_5.json")
    assert_consistent(qa)
    assert len(qa.questions) == 5 and len(qa.passages) <= 5
    assert all(p.title == "" for p in qa.passages)
    assert qa.questions[0].answers == ["July, August, and September"]
    assert qa.questions[0].id == "squad_routerlens_5:1"


# ---------------------------------------------------------------- corpora, amsrag QA JSONL, limits


def test_flashrag_corpus() -> None:
    qa = load("flashrag_wiki_corpus_20.jsonl")
    assert (len(qa.passages), len(qa.questions)) == (20, 0)
    assert qa.passages[0].title == "Evan Morris"
    assert qa.passages[0].text.startswith("Evan Morris Evan L. Morris")
    assert qa.passages[-1].title == "Absalon"  # a title without quotes
    assert all(p.metadata == {"source": "wiki"} for p in qa.passages)


def test_hotpot_corpus_title_map() -> None:
    qa = load("hotpot_hipporag_corpus_2.json")
    assert [p.title for p in qa.passages] == ["Demon Dice", "Demon algorithm"]
    assert qa.passages[0].metadata == {"source": "hotpotqa"}


def test_amsrag_qa_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    rows = [
        {
            "id": "q1",
            "question": "Who wrote it?",
            "answers": ["Ann", "Ann B."],
            "gold_passages": [{"title": "Book", "text": "Ann wrote the book."}],
            "paragraphs": [{"title": "Book", "text": "Ann wrote the book."}, {"title": "Other", "text": "Noise."}],
            "complexity": "one_hop",
            "dataset": "custom",
            "qtype": "who",
        },
        {"question": "What is 2+2?", "answers": "4", "gold_passage_ids": ["external-7"]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert detect_format(path) == "qa-jsonl"
    qa = load_qa(path)
    assert len(qa.passages) == 2
    first, second = qa.questions
    assert first.gold_passage_ids == [passage_id_for("Book", "Ann wrote the book.")]
    assert (first.complexity, first.dataset, first.qtype, first.answers) == (
        "one_hop",
        "custom",
        "who",
        ["Ann", "Ann B."],
    )
    assert (second.id, second.answers, second.gold_passage_ids, second.complexity) == (
        "mine:2",
        ["4"],
        ["external-7"],
        None,
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"question": "q", "answers": [], "complexity": "two_hop"}, "complexity"),
        ({"question": " ", "answers": []}, "question"),
        ({"question": "q", "answers": [], "gold_passages": [{"title": "t"}]}, "gold_passages"),
        ({"question": "q", "answers": [], "metadata": [1]}, "metadata"),
        ({"question": "q", "answers": [], "gold_passage_ids": "p1"}, "gold_passage_ids"),
    ],
)
def test_amsrag_qa_jsonl_errors(tmp_path: Path, row: dict, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question": "fine", "answers": ["a"]}) + "\n" + json.dumps(row) + "\n", "utf-8")
    with pytest.raises(InputError, match=rf"bad\.jsonl:2: .*{message}"):
        load_qa(path, fmt="qa-jsonl")


def test_limit_caps_questions_and_keeps_their_passages() -> None:
    qa = load("hotpot_hf_dev_3.jsonl", limit=1)
    assert len(qa.questions) == 1 and len(qa.passages) == 10
    assert_consistent(qa)
    assert len(load("squad_v1.1_1article_2paragraphs.json", limit=2).questions) == 2
    assert len(load("flashrag_wiki_corpus_20.jsonl", limit=4).passages) == 4
    with pytest.raises(InputError, match="limit"):
        load("hotpot_hf_dev_3.jsonl", limit=-1)


def test_explicit_format_overrides_detection() -> None:
    qa = load("hotpot_hf_dev_3.jsonl", fmt="questions")
    assert len(qa.questions) == 3 and not qa.passages and qa.questions[0].answers == ["Tulsa"]


def test_malformed_dataset_record_names_the_place(tmp_path: Path) -> None:
    path = tmp_path / "musique_bad.jsonl"
    path.write_text(
        json.dumps({"id": "2hop__1", "question": "q", "paragraphs": [{"paragraph_text": "x"}]})
        + "\n"
        + json.dumps({"id": "2hop__2", "question": "q"})
        + "\n",
        "utf-8",
    )
    expected = r"musique_bad\.jsonl:2: not a valid musique record \(missing field 'paragraphs'\)"
    with pytest.raises(InputError, match=expected):
        load_qa(path, fmt="musique")


def test_duplicate_question_ids_first_wins(tmp_path: Path) -> None:
    path = tmp_path / "dups.jsonl"
    path.write_text(
        "".join(json.dumps({"id": "x", "question": q, "answers": ["a"]}) + "\n" for q in ("one", "two")), "utf-8"
    )
    qa = load_qa(path)
    assert [q.question for q in qa.questions] == ["one"]


def test_answers_of() -> None:
    assert answers_of(" a ", ["a", "b", ""], None) == ["a", "b"]
    assert answers_of("['x', \"y's\"]") == ["x", "y's"]
    assert answers_of('["j"]', 3) == ["j", "3"]
    assert answers_of([{"text": "t"}, {"text": "t"}]) == ["t"]
    assert answers_of("[not a list") == ["[not a list"]


def test_dataset_from_name() -> None:
    cases = {
        "honesty_hq_dev.jsonl": "hotpotqa",
        "honesty_2wikimultihopqa_dev.jsonl": "2wikimultihopqa",
        "honesty_squad_dev.jsonl": "squad",
        "honesty_nq_test.jsonl": "nq",
        "honesty_popqa_test.jsonl": "popqa",
        "flashrag_triviaqa_test_sub1000.jsonl": "triviaqa",
        "hipporag_musique_train_100_corpus.json": "musique",
        "something.jsonl": "",
    }
    assert {name: dataset_from_name(Path(name)) for name in cases} == cases


def test_passage_ids_are_content_ids() -> None:
    qa = load("nq_oracle_5.jsonl.gz")
    p = qa.passages[0]
    assert p.id == content_hash(p.title, p.text)[:16]
