"""Cited source files served read-only (issue 38): `GET /v1/sources/NAME/PATH`, citations' `url`, every way out of
a served folder refused, API keys, and `amsrag serve --sources` with a missing folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from amsrag.cli.main import app as cli
from amsrag.config import ServeConfig
from amsrag.errors import InputError
from amsrag.indexing import sync_folders
from amsrag.pipeline import Engine
from amsrag.serve import Service, create_app
from amsrag.serve.launch import served_roots
from amsrag.serve.sources import SourceRoots

DOCUMENTS = Path(__file__).parent / "fixtures" / "documents"
KEY = "sources-key-0123456789abcdef"
GUIDE = ("# Harbour guide\n\n## Opening hours\n\nThe harbour of Lisbon opens at dawn and closes at dusk every day "
         "of the year, except during the winter storms.\n")
PAGE = "<html><body><h1>Notes</h1><p>The lighthouse keeper logs every ship.</p>" \
       "<script>fetch('/v1/documents', {method: 'POST'})</script></body></html>"


@pytest.fixture(scope="module")
def kb(tmp_path_factory) -> tuple[Path, Path]:
    """A synced folder `kb` (a PDF, a Markdown and an HTML file, a secret beside it) and its index."""
    base = tmp_path_factory.mktemp("sources")
    kb = base / "kb"
    (kb / "guides").mkdir(parents=True)
    shutil.copy(DOCUMENTS / "cite.pdf", kb / "guides" / "cite.pdf")
    (kb / "harbour.md").write_text(GUIDE, encoding="utf-8")
    (kb / "notes.html").write_text(PAGE, encoding="utf-8")
    (base / "secret.txt").write_text("outside the served folder", encoding="utf-8")
    (kb / "escape.txt").symlink_to(base / "secret.txt")  # a symlink leading out of the folder
    from amsrag.store import EmbeddedIndex

    with EmbeddedIndex.create(base / "index") as index:
        sync_folders(index, [kb])
    (kb / "unindexed.md").write_text("# Later\n\nNot in the index.\n", encoding="utf-8")
    return kb, base / "index"


def client_of(index: Path, sources: SourceRoots | None, **config) -> tuple[TestClient, Service]:
    service = Service(Engine.open(index), ServeConfig(**config), sources=sources)
    return TestClient(create_app(service, warm=False), base_url="http://localhost"), service


@pytest.fixture(scope="module")
def served(kb):
    folder, index = kb
    client, service = client_of(index, SourceRoots.parse([folder]))
    with client:
        yield client
    service.close()


def not_found(r) -> None:
    assert r.status_code == 404, (r.status_code, r.text[:200])
    body = r.json()
    assert set(body) == {"error"} and body["error"]["code"] == "not_found" and body["error"]["message"]


def test_a_citation_links_to_its_pdf_page_and_the_file_is_served(served) -> None:
    r = served.post("/v1/ask", json={"question": "What does the cite package do with citation numbers?"})
    assert r.status_code == 200, r.text
    body = r.json()
    pdf = [s for s in body["sources"] if s["citation"] and s["citation"]["source"] == "guides/cite.pdf"]
    assert pdf, body["sources"]
    citation = pdf[0]["citation"]
    assert set(citation) >= {"source", "page", "label", "url"}
    assert citation["url"] == f"/v1/sources/kb/guides/cite.pdf#page={citation['page']}"
    got = served.get(citation["url"].split("#")[0])
    assert got.status_code == 200
    assert got.content == (DOCUMENTS / "cite.pdf").read_bytes()
    assert got.headers["content-type"] == "application/pdf"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert "content-security-policy" not in got.headers  # a PDF viewer refuses a sandbox; a PDF runs no page script


def test_retrieve_citations_carry_the_url_of_markdown(served) -> None:
    r = served.post("/v1/retrieve", json={"query": "When does the harbour of Lisbon open?", "k": 3})
    assert r.status_code == 200, r.text
    md = [p["citation"] for p in r.json()["passages"] if p["citation"] and p["citation"]["source"] == "harbour.md"]
    assert md and md[0]["url"] == "/v1/sources/kb/harbour.md#opening-hours" and md[0]["section"]
    assert md[0]["anchor"] == "opening-hours"  # the heading's GitHub slug
    got = served.get(md[0]["url"].partition("#")[0])
    assert got.status_code == 200 and got.text == GUIDE
    assert got.headers["content-type"] == "text/markdown; charset=utf-8"
    assert got.headers["content-security-policy"] == "sandbox"
    assert got.headers["x-content-type-options"] == "nosniff"


def test_html_is_served_sandboxed(served) -> None:
    got = served.get("/v1/sources/kb/notes.html")
    assert got.status_code == 200 and got.text == PAGE
    assert got.headers["content-type"] == "text/html; charset=utf-8"
    assert got.headers["content-security-policy"] == "sandbox"  # its script cannot reach the UI's origin


@pytest.mark.parametrize("path", [
    "/v1/sources/kb/../secret.txt", "/v1/sources/kb/%2e%2e/secret.txt", "/v1/sources/kb/%2E%2E%2Fsecret.txt",
    "/v1/sources/kb/guides/..%2F..%2Fsecret.txt", "/v1/sources/kb/%2Fetc%2Fpasswd", "/v1/sources/kb//etc/passwd",
    "/v1/sources/kb/escape.txt", "/v1/sources/kb/guides", "/v1/sources/kb/guides/", "/v1/sources/kb/missing.pdf",
    "/v1/sources/other/harbour.md", "/v1/sources/kb/unindexed.md",
    "/v1/sources/kb/guides%5C..%5C..%5Csecret.txt", "/v1/sources/kb/harbour.md%00.pdf", "/v1/sources/%2e%2e/kb/x",
])
def test_everything_outside_the_served_files_is_refused(served, path: str) -> None:
    r = served.get(path)
    not_found(r)
    assert b"outside the served folder" not in r.content


def test_resolve_refuses_every_way_out(kb) -> None:
    folder, _ = kb
    roots = SourceRoots.parse([f"docs={folder}"])
    assert roots.resolve("docs", "harbour.md") == (folder / "harbour.md").resolve()
    assert roots.resolve("docs", "guides/cite.pdf") == (folder / "guides" / "cite.pdf").resolve()
    for rel in ["../secret.txt", "guides/../../secret.txt", "/etc/passwd", str(folder / "harbour.md"), "escape.txt",
                "guides", "", "guides/", "a\\..\\b", "harbour.md\x00", "./harbour.md", "nothing.md"]:
        assert roots.resolve("docs", rel) is None, rel
    assert roots.resolve("kb", "harbour.md") is None  # served under the name it was given


def test_no_url_when_the_folder_is_not_served(kb) -> None:
    _, index = kb
    client, service = client_of(index, None)
    with client:
        r = client.post("/v1/retrieve", json={"query": "When does the harbour of Lisbon open?", "k": 2})
        cited = [p["citation"] for p in r.json()["passages"] if p["citation"]]
        assert cited and all(c["url"] is None for c in cited)
        not_found(client.get("/v1/sources/kb/harbour.md"))
    service.close()


def test_keys_are_enforced_off_loopback(kb) -> None:
    folder, index = kb
    client, service = client_of(index, SourceRoots.parse([folder]), host="0.0.0.0", api_keys=[KEY])
    with client:
        r = client.get("/v1/sources/kb/harbour.md")
        assert r.status_code == 401 and r.json()["error"]["code"] and GUIDE not in r.text
        assert client.get("/v1/sources/kb/harbour.md", headers={"X-API-Key": "wrong-key-0123456789"}).status_code == 401
        ok = client.get("/v1/sources/kb/harbour.md", headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200 and ok.text == GUIDE
    service.close()


def test_the_endpoint_is_in_the_openapi_document(served) -> None:
    op = served.get("/openapi.json").json()["paths"]["/v1/sources/{name}/{path}"]["get"]
    assert {p["name"] for p in op["parameters"]} == {"name", "path"} and "404" in op["responses"]


def test_source_folders_are_checked(kb, tmp_path: Path) -> None:
    folder, _ = kb
    with pytest.raises(InputError, match="no such file"):
        SourceRoots.parse([tmp_path / "missing"])
    with pytest.raises(InputError, match="not a folder"):
        SourceRoots.parse([folder / "harbour.md"])
    with pytest.raises(InputError, match="one path segment"):
        SourceRoots.parse([f"a/b={folder}"])
    (tmp_path / "kb").mkdir()
    with pytest.raises(InputError, match="both named 'kb'"):
        SourceRoots.parse([folder, tmp_path / "kb"])
    # a watched folder is served too; one that cannot be is passed over, not an error
    assert set(served_roots([], [str(folder), f"x/y={tmp_path}"]).roots) == {"kb"}
    assert served_roots([f"docs={folder}"], [str(folder)]).roots == {"docs": folder.resolve(), "kb": folder.resolve()}


def test_serve_with_a_missing_sources_folder_is_a_cli_error(kb, tmp_path: Path) -> None:
    _, index = kb
    r = CliRunner().invoke(cli, ["serve", "--index", str(index), "--sources", str(tmp_path / "nowhere")])
    assert r.exit_code == 2, r.output
    assert "nowhere" in r.output and "no such file or directory" in r.output
