"""Issue 39's reproductions: inputs and faults that gave a 500, a traceback, a lost batch or a stored
secret. Each test sends the input of the fault run and checks the clear outcome: a 4xx with a code, an
error naming the input, a warning in the report; nothing stored is lost."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from json import dumps

import httpx
import pytest

import faults
from amsrag.config import QueryLogConfig, ReviewConfig, ServeConfig
from amsrag.pipeline import Engine
from amsrag.querylog import Redactor, entry_from_answer
from amsrag.serve import Service, create_app
from amsrag.serve.background import BackgroundServer
from test_serve_api import copy_index, error_of

AMSRAG = [sys.executable, "-m", "amsrag.cli"]
SURROGATE_QUESTION = "who \ud800 wrote Tinted Windows"


def send(client: httpx.Client, method: str, path: str, json: object) -> httpx.Response:
    """A JSON request written with `\\u` escapes, so lone surrogates travel as a browser sends them."""
    return client.request(method, path, content=dumps(json), headers={"Content-Type": "application/json"})


@pytest.fixture(scope="module")
def keyless(built_index, tmp_path_factory):
    """A keyless service on loopback with the review queue on (as `amsrag serve --review` runs it)."""
    index_dir = copy_index(built_index, tmp_path_factory.mktemp("hostile") / "index")
    service = Service(Engine.open(index_dir), ServeConfig(), review_config=ReviewConfig(enabled=True))
    server = BackgroundServer(create_app(service))
    server.start()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client, service
    server.stop()
    service.close()


# ---------------------------------------------------------------- 2: lone surrogates in questions
@pytest.mark.parametrize(("path", "body", "status", "code"), [
    ("/v1/retrieve", {"query": SURROGATE_QUESTION}, 422, "invalid_text"),
    ("/v1/ask", {"question": SURROGATE_QUESTION}, 422, "invalid_text"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": SURROGATE_QUESTION}]}, 422, "invalid_text"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text",
                                                                         "text": SURROGATE_QUESTION}]}]},
     422, "invalid_text"),
    # the library names the query of the batch, as for its other refusals
    ("/v1/route/library", {"queries": [{"question": SURROGATE_QUESTION, "hop": "one_hop"}]}, 400, "invalid_input"),
])
def test_lone_surrogate_question_is_refused(keyless, path: str, body: dict, status: int, code: str) -> None:
    client, _ = keyless
    message = error_of(send(client, "POST", path, json=body), status, code)
    assert "U+D800" in message


def test_lone_surrogate_in_a_passage_is_refused_naming_the_field(keyless) -> None:
    client, service = keyless
    before = len(service.engine.index)
    r = send(client, "POST", "/v1/documents", json={"passages": [{"id": "ok", "text": "fine"},
                                                        {"id": "bad", "text": "x \udfff y"}]})
    assert "passages[1]: `text`" in error_of(r, 400, "invalid_input")
    r = send(client, "PUT", "/v1/documents/doc-s", json={"text": "a \ud834 b"})
    assert "`text`" in error_of(r, 400, "invalid_input")
    r = send(client, "POST", "/v1/documents",
             json={"passages": [{"id": "m", "text": "fine", "metadata": {"k": "\ud800"}}]})
    assert r.status_code < 500, r.text
    assert len(service.engine.index) == before + (1 if r.status_code == 200 else 0)


def test_cli_question_with_a_byte_that_is_not_utf8(built_index) -> None:
    proc = subprocess.run([*AMSRAG, "retrieve", "--index", str(built_index.path), b"who \xff wrote"],
                          capture_output=True, timeout=300, env=os.environ)
    stderr = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2 and "Traceback" not in stderr, stderr
    assert "0xFF" in stderr and "not UTF-8" in stderr


# ---------------------------------------------------------------- 7: other 500s
def test_content_part_text_that_is_not_a_string(keyless) -> None:
    client, _ = keyless
    for text in (42, None, ["a"], {"t": 1}):
        r = send(client, "POST", "/v1/chat/completions",
                        json={"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]})
        assert "must be a string" in error_of(r, 422, "invalid_request")


@pytest.mark.parametrize("item", ["99999999999999999999999", "9223372036854775808", "-1"])
def test_review_id_out_of_range_is_a_422(keyless, item: str) -> None:
    client, _ = keyless
    for r in (client.get(f"/v1/review/{item}"), send(client, "POST", f"/v1/review/{item}", json={"verdict": "right"}),
              send(client, "POST", f"/v1/review/{item}/dismiss", json={})):
        error_of(r, 422, "invalid_request")
    error_of(client.get("/v1/review", params={"offset": item}), 422, "invalid_request")
    error_of(client.get("/v1/review/9223372036854775807"), 404, "not_found")


# ---------------------------------------------------------------- 10: ids
@pytest.mark.parametrize("bad_id", ["a\x00b", "line\nbreak", "tab\there"])
def test_ids_with_control_characters_are_refused(keyless, bad_id: str) -> None:
    client, service = keyless
    before = len(service.engine.index)
    r = send(client, "POST", "/v1/documents", json={"passages": [{"id": bad_id, "text": "some text"}]})
    assert "control character" in error_of(r, 400, "invalid_input")
    r = send(client, "POST", "/v1/documents", json={"passages": [{"id": "fine-id", "doc_id": bad_id, "text": "more"}]})
    assert "`doc_id`" in error_of(r, 400, "invalid_input")
    assert len(service.engine.index) == before


# ---------------------------------------------------------------- 4 and 9: redaction
SERVICE_KEY = "svc-key-ABCDEFGH12345678"


def test_query_log_redacts_before_it_cuts() -> None:
    query = "why does " + SERVICE_KEY + " and sk-ABCDEFGHIJKLMNOPQRSTUV fail"
    answer = {"query": query, "answer": "because", "citations": [], "abstained": False, "trace": {}}
    for cut in range(8, len(query)):
        entry = entry_from_answer(answer, QueryLogConfig(max_query_chars=cut), redactor=Redactor([SERVICE_KEY]))
        assert len(entry.query) <= cut
        assert "svc-key" not in entry.query and "sk-ABCD" not in entry.query, (cut, entry.query)
        assert entry.signals.get("query_truncated", False) is (cut < len(Redactor([SERVICE_KEY]).text(query)))


@pytest.mark.parametrize(("text", "secret"), [
    ("my session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U ok",
     "eyJhbGciOiJIUzI1NiJ9"),
    ("aws key AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    ("aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY end", "wJalrXUtnFEMI"),
    ("use SK-PROJ0123456789ABCDEFGH please", "PROJ0123456789"),
    ("the password is hunter2 for the wiki", "hunter2"),
    ("my API key is Zq81bbxQ", "Zq81bbxQ"),
    ("PASSWORD=letmein9", "letmein9"),
])
def test_broader_secret_patterns_are_redacted(text: str, secret: str) -> None:
    redacted = Redactor().text(text)
    assert secret not in redacted and "[redacted]" in redacted


@pytest.mark.parametrize("text", ["what is a token bucket", "who reset the password for the wiki",
                                  "sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709", "Tinted Windows first show"])
def test_ordinary_questions_are_not_redacted(text: str) -> None:
    assert Redactor().text(text) == text


# ---------------------------------------------------------------- 8: Host allow-list, docs behind the key
def test_a_foreign_host_header_reaches_no_endpoint(keyless) -> None:
    client, service = keyless
    before = len(service.engine.index)
    foreign = {"Host": "attacker.example"}
    r = client.post("/v1/documents", json={"passages": [{"id": "rebound", "text": "planted"}]}, headers=foreign)
    assert "attacker.example" in error_of(r, 400, "host_not_allowed")
    for path in ("/healthz", "/", "/openapi.json", "/v1/config"):
        error_of(client.get(path, headers=foreign), 400, "host_not_allowed")
    assert len(service.engine.index) == before and service.engine.index.get("rebound") is None
    for host in ("localhost", "127.0.0.1:8000", "[::1]:1234", "LOCALHOST:80"):
        assert client.get("/healthz", headers={"Host": host}).status_code == 200


def test_allowed_host_names() -> None:
    from amsrag.access.limits import allowed_host_names

    assert allowed_host_names([], "127.0.0.1", False) == {"localhost", "127.0.0.1", "::1"}
    assert allowed_host_names([], "10.0.0.5", True) is None  # keys on every endpoint: any name
    assert allowed_host_names(["rag.internal:8000"], "0.0.0.0", True) == {"rag.internal"}
    assert allowed_host_names(["*"], "127.0.0.1", False) is None


def test_api_docs_need_the_key_when_keys_are_set(built_index, tmp_path) -> None:
    index_dir = copy_index(built_index, tmp_path / "index")
    service = Service(Engine.open(index_dir), ServeConfig(api_keys=["k-0123456789abcdef"]))
    server = BackgroundServer(create_app(service, warm=False))
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for path in ("/docs", "/redoc", "/openapi.json"):
                error_of(client.get(path), 401, "unauthorized")
                assert client.get(path, headers={"X-API-Key": "k-0123456789abcdef"}).status_code == 200
            schema = client.get("/openapi.json", headers={"X-API-Key": "k-0123456789abcdef"}).json()
            assert "/v1/retrieve" in schema["paths"] and "/docs" not in schema["paths"]
    finally:
        server.stop()
        service.close()


# ---------------------------------------------------------------- 3: a passage over 1,000,000 characters
@pytest.mark.slow
def test_a_passage_over_a_million_characters_is_stored_with_its_entities(built_index, tmp_path) -> None:
    from amsrag.store.open import open_index
    from amsrag.types import Passage

    index_dir = copy_index(built_index, tmp_path / "index")
    sentence = "Ada Lovelace wrote to Charles Babbage from London about the engine. "
    huge = Passage.make(id="huge", title="Long letter", text=sentence * (1_000_001 // len(sentence) + 1))
    small = Passage.make(id="small", title="Short", text="Grace Hopper worked at Harvard.")
    assert len(huge.text) > 1_000_000
    with open_index(index_dir) as index:
        before = len(index)
        report = index.add([huge, small])
        assert report.added == 2 and len(index) == before + 2
        assert index.get("huge").text == huge.text and index.get("small") is not None
    from amsrag.indexes.entities import extract_ner

    [surfaces] = extract_ner([huge.text], ["PERSON"])
    assert "Charles Babbage" in surfaces


# ---------------------------------------------------------------- 5 and 10: file names, links, special files
def _folder_with(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("Grace Hopper worked at Harvard on the Mark I computer.\n")
    return folder


@pytest.mark.parametrize("command", ["add", "sync"])
def test_a_file_name_that_is_not_utf8_is_named(built_index, tmp_path, command: str) -> None:
    index_dir = copy_index(built_index, tmp_path / "index")
    folder = _folder_with(tmp_path)
    with open(os.path.join(os.fsencode(folder), b"bad\xff name.txt"), "wb") as fh:
        fh.write(b"Some text about Ada Lovelace.\n")
    proc = subprocess.run([*AMSRAG, "index", command, str(folder), "--index", str(index_dir)],
                          capture_output=True, timeout=300, env=os.environ)
    stderr = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2 and "Traceback" not in stderr, stderr
    assert "bad\\xff name.txt" in stderr and "not UTF-8" in stderr


def test_links_outside_the_folder_and_special_files_are_skipped_and_named(tmp_path, caplog) -> None:
    from amsrag.ingest.formats import directory_files

    folder = _folder_with(tmp_path)
    secret = tmp_path / "outside.txt"
    secret.write_text("private notes")
    (folder / "leak.txt").symlink_to(secret)
    (folder / "inside.txt").symlink_to(folder / "good.txt")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "far.txt").write_text("far away")
    (folder / "linked-dir").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    os.mkfifo(folder / "pipe.txt")
    with caplog.at_level("WARNING", logger="amsrag.ingest"):
        files = directory_files(folder)
    assert [f.name for f in files] == ["good.txt", "inside.txt"]
    assert "leak.txt" in caplog.text and "outside" in caplog.text and "pipe.txt" in caplog.text
    assert "far.txt" not in [f.name for f in files]


# ---------------------------------------------------------------- 6: reads on a full disk
def _fill(directory) -> None:
    """Writes until the file system is full (unbuffered: every block that fits is written)."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for block in (1 << 16, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * block)
            except OSError:
                pass
    finally:
        os.close(fd)


@pytest.mark.skipif(not faults.can_mount_tmpfs(), reason="needs root and tmpfs to fill a real file system")
def test_read_commands_work_on_a_full_disk(built_index, tmp_path) -> None:
    size_kb = sum(p.stat().st_size for p in built_index.path.rglob("*") if p.is_file()) // 1024 + 4096
    with faults.tmpfs(tmp_path / "disk", size_kb) as disk:
        index_dir = copy_index(built_index, disk / "index")
        for db in index_dir.glob("*.sqlite"):  # as a finished command leaves it: the WAL merged into the file
            with closing(sqlite3.connect(db)) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        _fill(disk)
        for args in (["index", "stats"], ["index", "check"], ["search", "Tinted Windows"],
                     ["retrieve", "Who formed Tinted Windows?"]):
            proc = subprocess.run([*AMSRAG, *args, "--index", str(index_dir)], capture_output=True, text=True,
                                  timeout=300, env=os.environ)
            assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
