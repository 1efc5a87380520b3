"""The query log: the conformance suite on SQLite and PostgreSQL, the entry of an answer, the service's
logging (on, off, broken) and the `amsrag ops querylog` commands."""

from __future__ import annotations

import json
import logging
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from amsrag.cli.common import out
from amsrag.cli.main import app
from amsrag.config import AmsragConfig, QueryLogConfig, ServeConfig
from amsrag.pipeline import Engine
from amsrag.querylog import SqliteQueryLog, entry_from_answer
from amsrag.querylog.sqlite import FILE
from amsrag.serve import Service, create_app
from amsrag.serve.background import BackgroundServer
from amsrag.testing.querylog import QueryLogConformance, sample_entry


class TestSqliteQueryLog(QueryLogConformance):
    backend = "sqlite"

    def create_log(self, request, directory, retention_days, clock):
        directory.mkdir(parents=True)
        (directory / "config.toml").write_text("")  # what makes the directory an index to `open_query_log`
        return SqliteQueryLog(directory / FILE, retention_days, clock)

    def spec(self, log):
        return str(log.path.parent)

    def stored_text(self, log):
        return "".join(p.read_bytes().decode("utf-8", "replace") for p in log.path.parent.glob(FILE + "*"))


class TestPostgresQueryLog(QueryLogConformance):
    backend = "postgres"

    def create_log(self, request, directory, retention_days, clock):
        from amsrag.querylog.postgres import PostgresQueryLog
        from pg_server import new_database

        return PostgresQueryLog(new_database(request.getfixturevalue("pg_server")), retention_days, clock)

    def spec(self, log):
        return log.dsn

    def stored_text(self, log):
        import psycopg

        with psycopg.connect(log.dsn) as conn:
            return "\n".join(r[0] for r in conn.execute("SELECT q::text FROM amsrag.query_log q"))


# ---------------------------------------------------------------------------- the service
KEY = "test-key-0123456789abcdef"


def copy_index(built_index, dest: Path) -> Path:
    """A private copy of the session index (the shared one must never be written)."""
    shutil.copytree(built_index.path, dest, ignore=shutil.ignore_patterns("*-shm", ".write.lock", FILE + "*"))
    return dest


@pytest.fixture(scope="module")
def logged_dir(built_index, tmp_path_factory) -> Path:
    return copy_index(built_index, tmp_path_factory.mktemp("querylog") / "index")


@pytest.fixture(scope="module")
def logging_service(logged_dir):
    service = Service(Engine.open(logged_dir), ServeConfig(api_keys=[KEY]), log_config=QueryLogConfig(enabled=True))
    with BackgroundServer(create_app(service, warm=False)) as url:
        yield url, service
    service.close()


def test_the_service_logs_answers_and_no_secrets(logging_service, logged_dir, slice_questions) -> None:
    url, service = logging_service
    q = slice_questions[1].question
    headers = {"Authorization": f"Bearer {KEY}", "X-Forwarded-For": "203.0.113.77", "User-Agent": "agent-007"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        body = client.post("/v1/ask", json={"question": q}).json()
        chat = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": q}]})
        assert chat.status_code == 200, chat.text
        assert client.post("/v1/retrieve", json={"query": q}).status_code == 200  # retrieval is not logged
    service.query_log.flush()
    with SqliteQueryLog(logged_dir / FILE) as log:
        entries = log.query()
    assert [e.source for e in entries] == ["api", "openai"]
    e = entries[0]
    trace = body["trace"]
    assert (e.query, e.answer, e.citations, e.abstained) == (q, body["answer"], body["citations"], body["abstained"])
    assert (e.system, e.strategy, e.label, e.route_label) == (
        "full", trace["strategy"], trace["complexity"]["label"], trace["complexity"]["route_label"])
    assert e.route_alpha == trace["complexity"]["route_alpha"] and e.language == trace["language"]["code"]
    assert e.retriever_calls == trace["retriever_calls"] and e.escalations == len(trace["escalations"])
    assert e.retrievers == list(dict.fromkeys(r["name"] for r in trace["retrievers"]))
    assert e.total_ms == trace["timings_ms"]["total"] and e.timings == trace["timings_ms"]
    assert e.generator == trace["generator"]["name"] and e.corrective_action == trace["corrective"]["action"]
    assert e.signals["probs"] == trace["complexity"]["probs"]
    assert e.audit is not None and e.audit["support"] == trace["audit"]["support"]  # the citation-support audit
    assert e.flagged == bool(trace["signals"]["flagged"])  # the proxy flag (audit.signals)
    assert entries[1].query == q and entries[1].answer == body["answer"]
    stored = "".join(p.read_bytes().decode("utf-8", "replace") for p in logged_dir.glob(FILE + "*"))
    for secret in (KEY, "203.0.113.77", "127.0.0.1", "agent-007", "Bearer"):
        assert secret not in stored


def test_entry_keeps_the_audit_and_its_flag(built_index, slice_questions) -> None:
    result = Engine(built_index).ask(slice_questions[0].question).to_dict()
    result["trace"]["audit"] = {"support": 0.25, "flagged": ["the second sentence"], "sentences": 2}
    entry = entry_from_answer(result, QueryLogConfig(store_answers=False, max_query_chars=10), source="cli")
    assert entry.flagged and entry.audit == result["trace"]["audit"]  # the audit flagged a sentence
    proxy_flag = bool(result["trace"]["signals"]["flagged"])
    unflagged = {**result, "trace": {**result["trace"], "audit": {"support": 0.9, "flagged": [], "sentences": 2}}}
    assert entry_from_answer(unflagged, QueryLogConfig(), source="cli").flagged == proxy_flag  # the proxy's flag
    del result["trace"]["signals"]  # a trace without the proxy signals: the audit's flag
    assert entry_from_answer(result, QueryLogConfig(), source="cli").flagged
    del unflagged["trace"]["signals"]
    assert not entry_from_answer(unflagged, QueryLogConfig(), source="cli").flagged
    assert entry.answer is None and entry.citations == result["citations"]  # store_answers = false
    assert entry.query == slice_questions[0].question[:10] and entry.signals["query_truncated"]
    assert entry.signals["query_chars"] == len(slice_questions[0].question)


def test_the_service_does_not_log_when_disabled(built_index, tmp_path, slice_questions) -> None:
    index_dir = copy_index(built_index, tmp_path / "index")
    service = Service(Engine.open(index_dir), ServeConfig())
    try:
        assert service.query_log is None
        assert service.ask(slice_questions[0].question, "full")["answer"]
    finally:
        service.close()
    assert not (index_dir / FILE).exists()


def test_a_broken_log_never_fails_an_answer(built_index, tmp_path, slice_questions, caplog) -> None:
    index_dir = copy_index(built_index, tmp_path / "index")
    (index_dir / FILE).mkdir()  # the log file cannot be opened
    engine = Engine.open(index_dir)
    q = slice_questions[0].question
    with caplog.at_level(logging.WARNING, logger="amsrag"):
        service = Service(engine, ServeConfig(api_keys=[KEY]), log_config=QueryLogConfig(enabled=True))
        assert service.query_log is None and "query log cannot be opened" in caplog.text
        with BackgroundServer(create_app(service, warm=False)) as url:
            r = httpx.post(f"{url}/v1/ask", json={"query": q}, headers={"X-API-Key": KEY}, timeout=120)
            assert r.status_code == 200 and r.json()["answer"]
        # a log that fails on every append (closed under the service): the answers still come back
        closed = SqliteQueryLog(tmp_path / "other.sqlite")
        closed.close()
        broken = Service(engine, ServeConfig(), query_log=closed)
        assert broken.ask(q, "full")["answer"]
        broken.query_log.flush()
        assert broken.query_log.failures == 1 and "an entry was not written" in caplog.text
        assert b"amsrag_query_log_failures_total 1.0" in broken.metrics.render()
    service.writer.close()
    broken.writer.close()
    engine.close()


# ---------------------------------------------------------------------------- the CLI
def test_querylog_commands(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(out, "width", 200)  # the table's question column in full
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    AmsragConfig(query_log=QueryLogConfig(retention_days=10)).save(index_dir / "config.toml")
    runner = CliRunner()
    missing = runner.invoke(app, ["ops", "querylog", "show", "--index", str(index_dir)])
    assert missing.exit_code == 2 and "enabled = true" in missing.output
    now = datetime.now(UTC)
    with SqliteQueryLog(index_dir / FILE) as log:
        log.append(sample_entry(now - timedelta(days=20), query="old one", abstained=True))
        log.append(sample_entry(now - timedelta(hours=2), query="[bold]recent[/] one", route_label="one_hop",
                                strategy="A", audit=None, flagged=False))
        log.append(sample_entry(now, query="newest"))
    shown = runner.invoke(app, ["ops", "querylog", "show", "--index", str(index_dir), "--limit", "2", "--json"])
    assert shown.exit_code == 0, shown.output
    assert [json.loads(line)["query"] for line in shown.output.splitlines()] == ["[bold]recent[/] one", "newest"]
    table = runner.invoke(app, ["ops", "querylog", "show", "--index", str(index_dir),
                                "--since", (now - timedelta(days=1)).date().isoformat()])
    assert "[bold]recent[/] one" in table.output and "old one" not in table.output  # data, not markup
    stats = json.loads(runner.invoke(app, ["ops", "querylog", "stats", "--index", str(index_dir), "--json"]).output)
    assert stats["entries"] == 3 and stats["by_route_label"] == {"multi_hop": 2, "one_hop": 1}
    assert stats["by_strategy"] == {"C": 2, "A": 1} and stats["abstention_rate"] == round(1 / 3, 4)
    assert (stats["audited"], stats["flagged"], stats["flagged_rate"]) == (2, 2, 1.0)
    text = runner.invoke(app, ["ops", "querylog", "stats", "--index", str(index_dir)])
    assert text.exit_code == 0 and "multi_hop" in text.output
    bad = runner.invoke(app, ["ops", "querylog", "show", "--index", str(index_dir), "--since", "yesterday"])
    assert bad.exit_code == 2 and "ISO 8601" in bad.output
    pruned = runner.invoke(app, ["ops", "querylog", "prune", "--index", str(index_dir), "--json"])
    assert json.loads(pruned.output) == {"deleted": 1, "entries": 2, "retention_days": 10.0}


def test_ask_log_appends_to_the_index_log(built_index, tmp_path, slice_questions) -> None:
    index_dir = copy_index(built_index, tmp_path / "index")
    q = slice_questions[2].question
    runner = CliRunner()
    assert runner.invoke(app, ["ask", q, "--index", str(index_dir), "--json"]).exit_code == 0
    assert not (index_dir / FILE).exists()  # off by default
    r = runner.invoke(app, ["ask", q, "--index", str(index_dir), "--log", "--json"])
    assert r.exit_code == 0, r.output
    answer = json.loads(r.output.splitlines()[-1])
    with SqliteQueryLog(index_dir / FILE) as log:
        (entry,) = log.query()
    assert (entry.source, entry.query, entry.answer) == ("cli", q, answer["answer"])
