"""Metadata filters on the OpenAI-compatible endpoint (`where`, as OpenAI clients send it in `extra_body`) and on
`amsrag eval --where`, on real indexes: the document fixtures' index of test_filters.py and the slice index."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from amsrag.retrievers import retriever_for
from test_filters import doc_index  # noqa: F401  (the module's index of the document fixtures)
from test_serve_api import AUTH, KEY, error_of, start_server

QUESTION = "What is the root account password?"


@pytest.fixture(scope="module")
def chat(doc_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:  # noqa: F811
    copy = tmp_path_factory.mktemp("chat") / "served"
    shutil.copytree(doc_index, copy, ignore=shutil.ignore_patterns("*-shm", ".write.lock"))
    server, service = start_server(copy)
    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
            yield client
    finally:
        server.stop()
        service.close()


def completion(client: httpx.Client, question: str, **more: object) -> httpx.Response:
    return client.post("/v1/chat/completions", json={"model": "amsrag",
                                                     "messages": [{"role": "user", "content": question}], **more})


def stream_events(client: httpx.Client, question: str, **more: object) -> list[dict]:
    with client.stream("POST", "/v1/chat/completions", json={
            "model": "amsrag", "messages": [{"role": "user", "content": question}], "stream": True, **more}) as r:
        assert r.status_code == 200, r.read()
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


@pytest.mark.parametrize(("question", "where", "allowed"), [
    (QUESTION, {"type": ["pdf"]}, lambda pid: ".pdf#" in pid),
    ("How do I set the build target directory?", {"source": "docs/*", "type": "markdown"},
     lambda pid: pid.startswith("kb/docs/")),
    ("What does the handbook say about styles?", {"doc": ["kb/guides/*.docx"]},
     lambda pid: pid.startswith("kb/guides/") and ".docx#" in pid),
])
def test_chat_completion_keeps_to_the_filter(chat: httpx.Client, question: str, where: dict, allowed) -> None:
    r = completion(chat, question, where=where)
    assert r.status_code == 200, r.text
    body = r.json()
    shown = body["amsrag"]["filter"]
    assert shown == body["amsrag"]["trace"]["filter"] and shown["allowed"] > 0
    assert {k: v if isinstance(v, list) else [v] for k, v in where.items()} == shown["where"]
    cited = [c["id"] for c in body["citations"]]
    assert cited and all(allowed(c) for c in cited), cited
    assert all(allowed(e) for e in body["amsrag"]["trace"]["evidence"])
    # the same answer as /v1/ask with the same filter
    asked = chat.post("/v1/ask", json={"query": question, "where": where}).json()
    assert asked["citations"] == cited and body["choices"][0]["message"]["content"].startswith(asked["answer"])
    # streamed: the final chunk carries the filtered citations and the filter
    chunks = stream_events(chat, question, where=where)
    last = chunks[-1]
    assert [c["id"] for c in last["citations"]] == cited and last["amsrag"]["filter"]["where"] == shown["where"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == body["choices"][0]["message"]["content"]


def test_chat_completion_without_a_filter_is_unchanged(chat: httpx.Client) -> None:
    question = "What is a diversion of a package file?"  # answered from the HTML page
    plain = completion(chat, question).json()
    assert "filter" not in plain["amsrag"] and "filter" not in plain["amsrag"]["trace"]
    assert set(plain["amsrag"]) == {"abstained", "trace"}
    assert plain["citations"] and all(".html#" in c["id"] for c in plain["citations"])
    for empty in (None, {}):  # null or {} filters nothing
        same = completion(chat, question, where=empty).json()
        assert same["citations"] == plain["citations"] and "filter" not in same["amsrag"]
        assert same["choices"] == plain["choices"]
    # kept to the PDFs, the page is out of reach: no HTML passage is read or cited
    pdf = completion(chat, question, where={"type": "pdf"}).json()
    assert all(".pdf#" in c["id"] for c in pdf["citations"])
    assert pdf["amsrag"]["trace"]["evidence"] and all(".pdf#" in e for e in pdf["amsrag"]["trace"]["evidence"])


@pytest.mark.parametrize(("where", "message"), [
    ({"colour": ["red"]}, "`where.colour`: unknown field 'colour'"),
    ({"type": ["docs"]}, "unknown type 'docs'"),
    ({"type": []}, "empty value for type"),
    ({"source": [3]}, "must be a string or a list of strings"),
])
def test_chat_completion_refuses_a_bad_filter(chat: httpx.Client, where: dict, message: str) -> None:
    for stream in (False, True):  # refused before the answer, streaming or not
        assert message in error_of(completion(chat, QUESTION, where=where, stream=stream), 400, "invalid_input")


def test_chat_completion_refuses_a_filter_that_is_not_an_object(chat: httpx.Client) -> None:
    message = error_of(completion(chat, QUESTION, where="type=pdf"), 422, "invalid_request")
    assert "where" in message


def test_openai_client_sends_the_filter_in_extra_body(chat: httpx.Client) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{chat.base_url}/v1", api_key=KEY, max_retries=0)
    done = client.chat.completions.create(model="amsrag", messages=[{"role": "user", "content": QUESTION}],
                                          extra_body={"where": {"type": ["pdf"]}})
    extra = done.model_extra or {}
    assert extra["amsrag"]["filter"]["where"] == {"type": ["pdf"]}
    assert extra["citations"] and all(".pdf#" in c["id"] for c in extra["citations"])
    with pytest.raises(openai.BadRequestError, match="unknown field 'kind'"):
        client.chat.completions.create(model="amsrag", messages=[{"role": "user", "content": QUESTION}],
                                       extra_body={"where": {"kind": ["pdf"]}})


# ---------------------------------------------------------------------------------------------- amsrag eval --where
SLICE = Path(__file__).parent / "fixtures" / "retrieval_slice"


def predictions(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text("utf-8").splitlines()]


def test_eval_where_scores_only_questions_inside_the_filter(built_index, slice_passages, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The slice's passages carry their data set as metadata `source` (nq: 10, hotpotqa: 60, wiki noise: 20);
    `source=nq` keeps the 10 NQ questions, whose gold passages are NQ passages, and every answer reads only
    NQ passages, in this process and in the answer workers alike."""
    from amsrag.evaluate import answering
    from amsrag.evaluate.harness import EvalOptions, run_eval
    from amsrag.filters import Where

    source = {p.id: p.metadata["source"] for p in slice_passages}
    base = {"index": built_index.path, "qa": [SLICE / "questions.jsonl"], "systems": "bm25,full",
            "cache_dir": tmp_path / "cache", "data_dir": tmp_path / "no-data", "bootstrap": 100}
    monkeypatch.setattr(answering, "CHUNK", 3)  # so 10 questions go to the worker processes in chunks
    reports = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        reports[workers] = run_eval(EvalOptions(out=out, where=Where.parse(["source=nq"]), workers=workers, **base))
        cited = [c for row in predictions(out) for c in row["citations"]]
        assert cited and all(source[c] == "nq" for c in cited), cited
        assert {row["dataset"] for row in predictions(out)} == {"nq"}
        rows = predictions(out)  # the reader's best answer and its confidence, kept for threshold sweeps
        assert all(r["candidate"] == r["prediction"] for r in rows if not r["abstained"])
        assert all(r["candidate"] and r["candidate"] != r["prediction"] for r in rows if r["abstained"])
        assert all(0.0 <= r["confidence"] <= 1.0 for r in rows if r["system"] == "full"), rows
    report = reports[2]
    assert report["n_queries"] == 10 and report["config"]["answer_workers"] == 2
    assert report["config"]["where"] == {"where": {"source": ["nq"]}, "allowed": 10, "passages": 90,
                                         "questions": 16, "kept": 10, "gold_outside": 6, "no_gold": 0}
    assert all(s["n"] == 10 for s in report["systems"].values())
    for name in ("bm25", "full"):
        one, two = reports[1]["systems"][name], reports[2]["systems"][name]
        assert (one["em"], one["f1"], one["ndcg@5"]) == (two["em"], two["f1"], two["ndcg@5"]), name
    assert "Filter `--where source=nq`" in (tmp_path / "w2" / "report.md").read_text("utf-8")

    assert "where" not in run_eval(EvalOptions(out=tmp_path / "plain", no_answers=True, **base))["config"]


def test_eval_where_retrieves_within_the_filter(built_index, slice_questions, tmp_path: Path) -> None:
    """A question whose gold passages BM25 does not rank first over the whole slice: kept to its gold passages
    (`doc=` globs over passage ids), BM25 ranks exactly them first, so every retrieval metric is perfect."""
    from typer.testing import CliRunner

    from amsrag.cli import app

    bm25 = retriever_for(built_index, "bm25")
    question = next(q for q in slice_questions if {h.id for h in bm25.search(q.question, k=len(
        q.gold_passage_ids))} != set(q.gold_passage_ids))
    out = tmp_path / "cli"
    result = CliRunner().invoke(app, [
        "eval", "--index", str(built_index.path), "--qa", str(SLICE / "questions.jsonl"), "--out", str(out),
        "--systems", "bm25", "--cache", str(tmp_path / "cache"), "--data", str(tmp_path / "no-data"),
        "--bootstrap", "100", "--no-answers", "--where", f"doc={','.join(question.gold_passage_ids)}"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text("utf-8"))
    assert report["n_queries"] == 1 and report["config"]["where"]["allowed"] == len(question.gold_passage_ids)
    assert report["config"]["where"]["kept"] == 1 and report["config"]["where"]["gold_outside"] == 15
    got = report["systems"]["bm25"]
    assert (got["ndcg@5"], got["recall@5"], got["mrr@10"]) == (1.0, 1.0, 1.0)


def test_eval_where_refuses_a_bad_filter_or_one_that_keeps_nothing(built_index, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from amsrag.cli import app

    args = ["eval", "--index", str(built_index.path), "--qa", str(SLICE / "questions.jsonl"), "--out",
            str(tmp_path / "out"), "--systems", "bm25", "--cache", str(tmp_path / "cache"), "--data",
            str(tmp_path / "no-data"), "--no-answers"]
    result = CliRunner().invoke(app, [*args, "--where", "kind=pdf"])
    assert result.exit_code == 2 and "--where 'kind=pdf': unknown field 'kind'" in " ".join(result.output.split())
    result = CliRunner().invoke(app, [*args, "--where", "type=pdf"])  # the slice has no file types
    message = " ".join(result.output.split())
    assert result.exit_code == 2 and "no question has all its gold passages among the 0 of 90 passages" in message
    assert "16 have gold passages outside it" in message
    assert not (tmp_path / "out" / "report.json").exists()
    help_text = " ".join(CliRunner().invoke(app, ["eval", "--help"], terminal_width=200).output.split())
    assert "score only the questions whose gold passages all match" in help_text
