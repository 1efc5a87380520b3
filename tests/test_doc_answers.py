"""Answers on documentation (issue 37): the quote of an answer, default values read from documentation
structure, the sentence answer when the span is unsure; on slices of the MkDocs and Cargo docs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from amsrag.generate.base import ABSTAIN, Quote
from amsrag.generate.doc_cues import default_answers
from amsrag.generate.quote import find_quote, quote_at, quote_spans
from amsrag.generate.span_reader import CARD_FILE, MODEL_FILE, SpanReader, SpanReaderGenerator, default_directory
from amsrag.ingest.documents import read_document
from amsrag.learn.reader.doc_data import doc_items, doc_passages
from amsrag.types import Passage

DOCS = Path(__file__).parent / "fixtures" / "docs"
COMMANDS = Path(__file__).parent / "fixtures" / "docs_commands"  # MkDocs' getting-started page (BSD-2-Clause)


def _passages(name: str, file: str, root: Path = DOCS) -> list[Passage]:
    return list(read_document(root / name / file, f"{name}/{file}", "markdown"))


@pytest.fixture(scope="module")
def mkdocs() -> list[Passage]:
    return _passages("mkdocs", "configuration.md")


@pytest.fixture(scope="module")
def cargo() -> list[Passage]:
    return _passages("cargo", "config.md")


@pytest.fixture(scope="module")
def reader() -> SpanReader:
    return SpanReader.load()


def _reader_with(tmp_path: Path, **card_changes: object) -> SpanReader:
    """The shipped reader with its card changed (the model file is the same)."""
    for f in (MODEL_FILE, CARD_FILE):
        shutil.copy(default_directory() / f, tmp_path / f)
    card = json.loads((tmp_path / CARD_FILE).read_text(encoding="utf-8"))
    for key, value in card_changes.items():
        if value is None:
            card.pop(key, None)
        else:
            card[key] = value
    (tmp_path / CARD_FILE).write_text(json.dumps(card), encoding="utf-8")
    return SpanReader.load(tmp_path)


def test_quote_spans_cut_list_items_and_lines_of_a_settings_block(cargo: list[Passage]) -> None:
    p = next(p for p in cargo if p.title.endswith("http.timeout"))
    quotes = [p.text[a:b] for a, b in quote_spans(p.text)]
    assert "Default: 30" in quotes
    assert any(q.startswith("Environment: CARGO_HTTP_TIMEOUT") for q in quotes)


def test_quote_at_maps_a_span_of_the_read_context_to_its_sentence(cargo: list[Passage]) -> None:
    p = next(p for p in cargo if p.title.endswith("net.retry"))
    context = f"{p.title}: {p.text}"
    i = context.index("Default: 3") + len("Default: ")
    q = quote_at(p.title, p.text, i, i + 1, p.id)
    assert q is not None and q.text == "Default: 3" and q.span == "3" and q.passage_id == p.id
    assert q.marked() == "Default: «3»"
    title = quote_at(p.title, p.text, 0, 5, p.id)
    assert title is not None and title.text == p.title.strip() and title.span == p.title[:5]
    assert quote_at(p.title, p.text, 5, 5, p.id) is None


def test_find_quote_locates_an_answer_in_the_cited_passage_first(cargo: list[Passage]) -> None:
    q = find_quote("CARGO_NET_RETRY", cargo, [cargo[-1].id])
    assert q is not None and q.span == "CARGO_NET_RETRY" and "Environment" in q.text
    assert find_quote("nowhere in these docs", cargo) is None


def test_default_answers_tie_the_stated_default_to_the_setting_named(mkdocs: list[Passage],
                                                                      cargo: list[Passage]) -> None:
    best = default_answers("What is the default value of the remote_branch setting?", mkdocs)[0]
    assert (best.value, best.level) == ("gh-pages", "heading")
    assert default_answers("What is the default remote_name that gh-deploy pushes to?", mkdocs)[0].value == "origin"
    assert default_answers("What is the default http.low-speed-limit?", cargo)[0].value == "10"
    assert default_answers("What is the default of build.jobs?", cargo)[0].value == "number of logical CPUs"
    assert default_answers("Which environment variable sets http.timeout?", cargo) == []  # not a default question
    unnamed = default_answers("What is the default colour of the sky?", mkdocs)
    assert unnamed and not unnamed[0].level  # statements found, none named: the reader answers instead


def test_the_reader_answers_a_default_question_with_the_stated_default_and_its_quote(
        reader: SpanReader, mkdocs: list[Passage]) -> None:
    assert reader.default_confidence, "the shipped card calibrates the documentation defaults (doc_cues)"
    g = SpanReaderGenerator(reader).generate("What is the default value of the remote_branch setting?", mkdocs)
    assert g.answer == "gh-pages" and not g.abstained and g.details["answer_type"] == "default"
    assert g.confidence == pytest.approx(reader.default_confidence["heading"], abs=1e-4)
    assert g.quote is not None and g.quote.span == "gh-pages" and g.quote.text == "default: gh-pages"
    assert g.citations == (g.quote.passage_id,)


def test_without_the_card_calibration_the_default_rule_stays_off(tmp_path: Path, mkdocs: list[Passage]) -> None:
    plain = _reader_with(tmp_path, doc_cues=None)
    r = plain.read("What is the default value of the remote_branch setting?", mkdocs)
    assert r.kind != "default"


def test_every_span_answer_carries_the_sentence_it_was_read_from(reader: SpanReader, cargo: list[Passage]) -> None:
    g = SpanReaderGenerator(reader, threshold=0.0).generate(
        "How many times does Cargo retry spurious network errors?", cargo)
    assert g.quote is not None and g.quote.span == g.answer
    p = next(p for p in cargo if p.id == g.quote.passage_id)
    assert g.quote.text in p.text
    assert g.to_dict()["quote"] == g.quote.to_dict()


def test_an_unsure_span_is_answered_with_its_sentence_only_above_the_quote_threshold(
        tmp_path: Path, reader: SpanReader, cargo: list[Passage]) -> None:
    question = "How many times does Cargo retry spurious network errors?"
    cal = {"coef": {"sentence_mass": 1.0}, "intercept": 0.0, "threshold": 0.0}
    sure_quote = _reader_with(tmp_path, quote_calibration=cal)
    g = SpanReaderGenerator(sure_quote, threshold=1.0).generate(question, cargo)  # the span always unsure
    assert not g.abstained and g.details["answer_type"] == "sentence"
    assert g.quote is not None and g.answer == g.quote.text and (g.quote.start, g.quote.end) == (0, len(g.answer))
    assert g.confidence is not None and g.confidence >= 0.5 and g.details["span_confidence"] < 1.0
    never = tmp_path / "never"
    never.mkdir()
    strict = _reader_with(never, quote_calibration={**cal, "threshold": 1.0})
    g2 = SpanReaderGenerator(strict, threshold=1.0).generate(question, cargo)
    assert g2.abstained and g2.answer == ABSTAIN and g2.quote is None


def test_structure_derived_items_hold_their_answer_in_the_gold_passage() -> None:
    items = doc_items(doc_passages(DOCS / "cargo", "cargo"), "cargo")
    by_q = {it.question: it for it in items}
    assert by_q["What is the default value of http.timeout?"].answers == ["30"]
    assert by_q["Which environment variable sets net.retry?"].answers == ["CARGO_NET_RETRY"]
    for it in items:
        gold = it.paras[it.answer_para]
        assert gold.gold and it.answers[0].lower() in f"{gold.title}: {gold.text}".lower()
        assert all(it.answers[0] not in p.text for p in it.paras if not p.gold)


def test_quote_round_trips_through_its_dict() -> None:
    q = Quote("Default: 30", 9, 11, "cargo/config.md#3")
    assert q.to_dict() == {"text": "Default: 30", "start": 9, "end": 11, "passage_id": "cargo/config.md#3"}
    assert q.marked("[", "]") == "Default: [30]"


def test_option_names_keep_their_dashes_and_stop_at_the_line_break() -> None:
    from amsrag.generate.span_reader import SpanCandidate, first_line, option_dashes

    text = "Manifest Options\n--frozen\nEquivalent to specifying both --locked and --offline, or -q; well-known."
    assert option_dashes(text, text.index("frozen")) == 2
    assert option_dashes(text, text.index("q;")) == 1
    assert option_dashes(text, text.index("known")) == 0  # a hyphenated word is not an option
    c = first_line(SpanCandidate("--frozen\nEquivalent", 0, 1.0, 0.5, 17, 36))
    assert (c.text, c.char_start, c.char_end) == ("--frozen", 17, 25)
    c = first_line(SpanCandidate("--strict.\n\ndefault", 0, 1.0, 0.5, 40, 58))  # a name closing its sentence
    assert (c.text, c.char_start, c.char_end) == ("--strict", 40, 48)


def test_a_heading_path_is_never_the_answer_and_a_flag_closing_its_sentence_is(reader: SpanReader,
                                                                                mkdocs: list[Passage]) -> None:
    # the reader's best span was the passage title "Configuration › strict"; the flag ends the sentence
    strict = next(p for p in mkdocs if p.title.endswith("› strict"))
    result = reader.read("Which command line flag halts processing when a warning is raised?", [strict])
    assert result.answer == "--strict"
    result = reader.read("How are warnings handled?", [strict])
    assert "›" not in result.answer


def test_which_option_questions_ask_for_a_name_and_default_questions_do_not() -> None:
    from amsrag.generate.doc_cues import asks_for_name, is_name

    assert asks_for_name("Which search plugin option sets the minimum length for a search query?")
    assert asks_for_name("The --all flag of cargo build is a deprecated alias for which flag?")
    assert not asks_for_name("What is the default value of the remote_branch setting?")
    assert not asks_for_name("Who wrote the novel?")
    assert is_name("min_search_length", "Which option sets the minimum length?")
    assert is_name("--workspace", "The --all flag is an alias for which flag?")
    assert not is_name("--all", "The --all flag is an alias for which flag?")  # the question's own name
    assert not is_name("the minimum length", "Which option?")


def test_a_question_about_something_else_that_mentions_flags_is_not_a_name_question() -> None:
    from amsrag.generate.doc_cues import asks_for_name

    assert not asks_for_name("What character separates the flags in CARGO_ENCODED_RUSTFLAGS?")


def test_which_command_questions_ask_for_a_command_line() -> None:
    from amsrag.generate.doc_cues import asks_for_command, command_line

    assert asks_for_command("What command creates a new MkDocs project?")
    assert asks_for_command("Which cargo subcommand publishes a crate?")
    assert not asks_for_command("Which command line flag halts processing when a warning is raised?")  # a name
    assert not asks_for_command("Which command-line option overrides install.root?")
    assert not asks_for_command("What is the default command?")
    assert not asks_for_command("Who commanded the fleet at Trafalgar?")
    ctx = "To create a project, run:\nmkdocs new my-project\ncd my-project\n$ mkdocs serve\nThe build command runs."
    start = ctx.index("mkdocs new")
    assert command_line(ctx, start) == (start, start + len("mkdocs new my-project"))  # extended to the line
    serve = ctx.index("mkdocs serve")
    assert command_line(ctx, serve) == (serve, serve + len("mkdocs serve"))  # after a shell prompt
    assert command_line(ctx, ctx.index("cd my-project")) is None  # a shell built-in
    assert command_line(ctx, ctx.index("build command")) is None  # not where a line starts
    assert command_line(ctx, ctx.index("To create")) is None  # a sentence, not two to four lower-case words


def test_the_reader_answers_which_command_with_the_command_line(reader: SpanReader, tmp_path: Path) -> None:
    passages = _passages("mkdocs", "getting-started.md", COMMANDS)
    by_heading = {p.title.rsplit(" › ", 1)[-1]: p for p in reversed(passages)}  # each section's first passage
    evidence = [by_heading[h] for h in ("Building the site", "Other Commands and Options", "Creating a new project")]
    question = "Which command builds the documentation?"
    g = SpanReaderGenerator(reader).generate(question, evidence)
    assert g.answer == "mkdocs build" and not g.abstained
    assert g.quote is not None and g.quote.span == "mkdocs build"
    plain = _reader_with(tmp_path, doc_cues={**reader.card["doc_cues"], "name_cue": False})
    assert SpanReaderGenerator(plain).generate(question, evidence).answer != "mkdocs build"  # the cue's doing


def test_a_which_command_question_stays_on_the_text_path(tmp_path: Path) -> None:
    """The task head reads "Which command displays …?" (Poetry's docs) as corpus-wide (p 0.78 on its own); it asks
    for one thing a passage states, so it is retrieved and read."""
    from amsrag.pipeline import Engine
    from amsrag.store import EmbeddedIndex

    index = EmbeddedIndex.create(tmp_path / "index")
    index.add(_passages("mkdocs", "getting-started.md", COMMANDS))
    with Engine(index) as engine:
        trace = engine.retrieve("Which command displays information about the current environment?").trace
    taxonomy = trace.to_dict()["taxonomy"]
    assert taxonomy["route"] == "retrieval"
    assert taxonomy["probs"]["aggregation"] >= engine.taxonomy.thresholds["aggregation"]  # the head alone: global
    assert "asks which command" in taxonomy["reason"]
