"""One question limit, one message: the CLI, the engine and the HTTP API refuse a 100 kB question (and an
empty one) with the same text; the classifier and the span reader read a bounded prefix when called directly."""

from __future__ import annotations

import numpy as np
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from amsrag.classify import features as features_module
from amsrag.classify.features import EMPTY_QUESTION, MAX_QUESTION_CHARS, question_features
from amsrag.classify.model import ComplexityClassifier
from amsrag.cli.main import app
from amsrag.config import ServeConfig
from amsrag.errors import InputError
from amsrag.pipeline import Engine
from amsrag.pipeline.results import QuestionError, check_question
from amsrag.serve import Service, create_app

HUGE = ("word " * 20_000)[:100_000]  # the slow case: 100 kB of words without a "?" (14.6 s in the classifier before)
TOO_LONG = "the question is 100000 characters long; the limit is 2000 (serve.max_question_chars)"
BLANK = " \x00\x01\u200b\t\n "  # white space, NUL, control and zero-width characters only


def test_check_question() -> None:
    with pytest.raises(QuestionError) as exc:
        check_question(HUGE, 2000)
    assert str(exc.value) == TOO_LONG and exc.value.code == "question_too_long"
    assert isinstance(exc.value, InputError)
    for blank in ("", "   ", BLANK):
        with pytest.raises(QuestionError, match="query is empty") as exc:
            check_question(blank, 2000)
        assert str(exc.value) == EMPTY_QUESTION and exc.value.code == "invalid_request"
    assert check_question("  Who wrote Dune? ", 2000) == "Who wrote Dune?"
    assert check_question("x" * 2000, 2000) == "x" * 2000


@pytest.fixture(scope="module")
def engine(built_index):
    with Engine.open(built_index.path) as e:
        yield e


def test_the_engine_refuses(engine) -> None:
    calls = [lambda q: engine.retrieve(q), lambda q: engine.ask(q),
             lambda q: engine.complexity_of(q, np.zeros(384, dtype=np.float32))]
    for call in calls:
        with pytest.raises(QuestionError) as exc:
            call(HUGE)
        assert str(exc.value) == TOO_LONG
        with pytest.raises(QuestionError) as exc:
            call(BLANK)
        assert str(exc.value) == EMPTY_QUESTION


@pytest.mark.parametrize("command", ["ask", "retrieve", "search"])
def test_the_cli_refuses(built_index, command) -> None:
    runner = CliRunner()
    for question, message in ((HUGE, TOO_LONG), (BLANK, EMPTY_QUESTION)):
        res = runner.invoke(app, [command, question, "--index", str(built_index.path)])
        assert res.exit_code == 2, res.output
        assert res.stderr.strip() == f"error: {message}"
        assert res.stdout == ""


def test_the_cli_classifier_refuses() -> None:
    res = CliRunner().invoke(app, ["train", "classifier", "predict", HUGE])
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {TOO_LONG}"


def test_http_refuses_with_the_same_message(built_index) -> None:
    service = Service(Engine.open(built_index.path), ServeConfig())
    try:
        client = TestClient(create_app(service, warm=False), base_url="http://localhost")
        for path, body in (("/v1/retrieve", {"query": HUGE}), ("/v1/ask", {"question": HUGE}),
                           ("/v1/chat/completions", {"messages": [{"role": "user", "content": HUGE}]})):
            r = client.post(path, json=body)
            assert r.status_code == 422, r.text
            assert r.json() == {"error": {"code": "question_too_long", "message": TOO_LONG}}
        for path, body in (("/v1/retrieve", {"query": BLANK}), ("/v1/ask", {"question": BLANK}),
                           ("/v1/chat/completions", {"messages": [{"role": "user", "content": BLANK}]})):
            r = client.post(path, json=body)
            assert r.status_code == 422, r.text
            assert r.json() == {"error": {"code": "invalid_request", "message": EMPTY_QUESTION}}
        # the engine enforces the service's limit too (one limit), whoever calls it
        assert service.engine.max_question_chars == service.config.max_question_chars
    finally:
        service.close()


def test_a_lower_service_limit_reaches_the_engine(built_index) -> None:
    service = Service(Engine.open(built_index.path), ServeConfig(max_question_chars=10))
    try:
        with pytest.raises(QuestionError, match=r"is 11 characters long; the limit is 10 \(serve"):
            service.retrieve("a" * 11, "full", None)
        client = TestClient(create_app(service, warm=False), base_url="http://localhost")
        r = client.post("/v1/retrieve", json={"query": "a" * 11})
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("the question is 11 characters")
    finally:
        service.close()


class CountingEncoder:
    """Records what the classifier asks it to embed."""

    model_id = "fake"

    def __init__(self) -> None:
        self.lengths: list[int] = []

    def encode(self, texts, progress=None):
        self.lengths += [len(t) for t in texts]
        return np.zeros((len(texts), 384), dtype=np.float32)


def test_the_classifier_reads_a_bounded_prefix(monkeypatch) -> None:
    encoder = CountingEncoder()
    clf = ComplexityClassifier.load(encoder=encoder)
    seen: list[int] = []
    real = features_module.question_features

    def counting(question: str):
        seen.append(len(question))
        return real(question)

    import amsrag.classify.model as model_module

    monkeypatch.setattr(features_module, "question_features", counting)
    monkeypatch.setattr(model_module, "features_batch",
                        lambda qs: np.stack([features_module.question_features(q) for q in qs]))
    pred = clf.predict(HUGE)  # embedded by the classifier itself
    assert pred.label in ("one_hop", "multi_hop")
    [n] = encoder.lengths  # the stripped prefix of MAX_QUESTION_CHARS, not 100,000 characters
    assert MAX_QUESTION_CHARS - 5 <= n <= MAX_QUESTION_CHARS and seen == [n]
    clf.predict(HUGE, query_vector=np.zeros(384, dtype=np.float32))
    assert seen == [n, n]
    # the features themselves cut a long question (callers that bypass the classifier: training, benchmarks)
    np.testing.assert_array_equal(real(HUGE), real(HUGE[:MAX_QUESTION_CHARS]))
    with pytest.raises(InputError, match="empty question"):
        clf.predict(BLANK)


def test_features_of_a_huge_question_are_cheap() -> None:
    # a regression guard on the work done, not the clock: the patterns see the bounded prefix only
    calls: list[int] = []

    class Spy:
        def __init__(self, pattern) -> None:
            self.pattern = pattern

        def findall(self, text, *a):
            calls.append(len(text))
            return self.pattern.findall(text, *a)

        def search(self, text, *a):
            calls.append(len(text))
            return self.pattern.search(text, *a)

    names = [n for n in dir(features_module) if n.startswith("_") and hasattr(getattr(features_module, n), "pattern")]
    with pytest.MonkeyPatch.context() as mp:
        for n in names:
            mp.setattr(features_module, n, Spy(getattr(features_module, n)))
        question_features(HUGE)
        features_module.is_comparison(HUGE)
    assert calls and max(calls) <= MAX_QUESTION_CHARS + 1  # +1: the possessive pattern sees question + " "


def test_the_span_reader_reads_a_bounded_question() -> None:
    from amsrag.generate.span_reader import SpanReader
    from amsrag.types import Passage

    reader = SpanReader.load()
    seen: list[int] = []
    real = reader.maker.question_ids

    def counting(question: str) -> list[int]:
        seen.append(len(question))
        return real(question)

    reader.maker.question_ids = counting  # type: ignore[method-assign]
    passage = Passage(id="p", title="Tulsa", text="Tulsa is a city in the state of Oklahoma.")
    result = reader.read(HUGE, [passage])
    assert seen == [reader.max_question_chars] and reader.max_question_chars <= 16 * 64
    assert result.features["windows"] >= 1
