"""Human-readable output prints data verbatim: ids, titles, paths and error messages that look like rich markup
(`[serve]`, `[a/b.md#13]`, `[bold]`) are never swallowed; help texts render as written."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from typer.main import get_command
from typer.testing import CliRunner

from amsrag.cli.main import app
from amsrag.errors import InputError
from amsrag.types import Passage

SERVE_ID = "[serve]/a#1"
GUIDE_ID = "nodejs-contributing/collaborator-guide.md#13"
PASSAGES = [
    Passage(id=SERVE_ID, title="[bold]Serve[/] section",
            text="The serve section of the configuration sets the host, the port and the api_keys of amsrag serve."),
    Passage(id=GUIDE_ID, title="Collaborator guide [#13]",
            text="A pull request needs at least two approvals from collaborators before it lands in the Node.js "
                 "repository."),
    Passage(id="[misc]/quokka.md#0", title="Quokka",
            text="The quokka is a small marsupial found on Rottnest Island in Western Australia."),
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    from amsrag.store import EmbeddedIndex

    path = tmp_path_factory.mktemp("markup") / "index"
    with EmbeddedIndex.create(path) as idx:
        idx.add(PASSAGES)
    return path


def invoke(*args: str, **env: str):
    # The CLI's consoles read COLUMNS once, when amsrag.cli.common is first imported (by whichever test came
    # first in this process): pin their width for the call, as COLUMNS=100 would.
    from amsrag.cli import common

    widths = common.out.width, common.err.width
    common.out.width = common.err.width = 100
    try:
        return CliRunner().invoke(app, list(args), env={"COLUMNS": "100", **env})
    finally:
        common.out.width, common.err.width = widths


def test_ask_prints_citations_verbatim(index_dir) -> None:
    res = invoke("ask", "How many approvals does a pull request need before it lands?", "--index", str(index_dir))
    assert res.exit_code == 0, res.output
    assert f"[{GUIDE_ID}]" in res.stdout  # the citation after the answer and the cited passage's line
    assert f"[{GUIDE_ID}] Collaborator guide [#13]: A pull request" in res.stdout
    res = invoke("ask", "What does the serve section of the configuration set?", "--index", str(index_dir))
    assert res.exit_code == 0, res.output
    assert f"[{SERVE_ID}]" in res.stdout and f"[{SERVE_ID}] [bold]Serve[/] section: The serve section" in res.stdout


def test_retrieve_and_search_print_ids_and_titles_verbatim(index_dir) -> None:
    res = invoke("retrieve", "What does the serve section of the configuration set?", "--index", str(index_dir),
                 "--system", "fixed")
    assert res.exit_code == 0, res.output
    for p in PASSAGES:
        assert p.id in res.stdout
    assert "[bold]Serve[/]" in res.stdout
    res = invoke("retrieve", "What does the serve section of the configuration set?", "--index", str(index_dir),
                 "--explain", "1")
    assert res.exit_code == 0, res.output
    assert re.search(r"learned fuser on \S+: ", res.stdout)
    top = re.search(r"learned fuser on (\S+): ", res.stdout).group(1)  # type: ignore[union-attr]
    assert top in {p.id for p in PASSAGES}
    res = invoke("search", "serve section configuration", "--index", str(index_dir), "--retriever", "bm25")
    assert res.exit_code == 0, res.output
    assert SERVE_ID in res.stdout and "[bold]Serve[/] section" in res.stdout


def test_serve_help_and_refusal_keep_brackets(index_dir) -> None:
    res = invoke("serve", "--help")
    assert res.exit_code == 0 and "[serve]" in res.stdout
    res = invoke("serve", "--index", str(index_dir), "--host", "0.0.0.0", AMSRAG_API_KEYS="")
    assert res.exit_code == 2
    assert "(or [serve] api_keys in the configuration)" in res.stderr


def test_every_help_text_renders_literally() -> None:
    """Each bracketed token of every command's and option's help ("[serve]", "[default: ...]") is printed."""
    root = get_command(app)
    checked = 0

    def walk(cmd, path: list[str]) -> None:
        nonlocal checked
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        tokens = {t for text in texts for t in re.findall(r"\[[^\]\s]+\]", text)}
        if tokens:
            res = invoke(*path, "--help")
            assert res.exit_code == 0, (path, res.output)
            flat = " ".join(res.stdout.split())
            for t in tokens:
                assert t in flat, (path, t)
                checked += 1
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(root, [])
    assert checked >= 1


def test_error_messages_print_verbatim(index_dir, tmp_path) -> None:
    res = invoke("retrieve", "who?", "--index", str(index_dir), "--system", "[x]")
    assert res.exit_code == 2 and "error: unknown system '[x]'; choose one of" in res.stderr
    missing = tmp_path / "[x]" / "[bold]index[/]"
    res = invoke("search", "who?", "--index", str(missing))
    assert res.exit_code == 2 and str(missing) in res.stderr


def test_print_error_escapes(monkeypatch) -> None:
    import amsrag.cli.common as common

    stream = io.StringIO()
    monkeypatch.setattr(common, "err", Console(file=stream, width=200))
    common.print_error(InputError("passage [x] has [bold]no text[/] at [nodejs/a.md#13]"))
    assert stream.getvalue().strip() == "error: passage [x] has [bold]no text[/] at [nodejs/a.md#13]"
