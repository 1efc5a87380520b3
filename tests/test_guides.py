"""The guides' code blocks run as tests (issue 40).

Every fenced block of the pages in PAGES is one of:
- run: ```python blocks in order in one namespace per page; ```bash / ```sh / ```shell / ```console blocks command by
  command (`amsrag …` only, through the CLI in-process, each command's exit status 0); ```json and ```toml blocks
  parsed. The page runs in a temporary working folder holding the files the guides name (`my-documents/`, `docs/`,
  tests/fixtures/guide_workspace) and, unless the page builds its own, `my-index`: a copy of the small real index
  of tests/api_index.py. `~` is that folder; an `amsrag` on PATH runs this checkout's CLI. Names starting with
  `your_` are the reader's own objects: READER_SUPPLIED gives each a stand-in.
- not run, by a stated decision: the line right before its opening fence is `<!-- not-run: REASON -->` (a server
  that runs until stopped, an install, a long training run, a synopsis, output). Such a block is still checked
  where it can be without running it (Python compiles; every `amsrag` command it names exists with every option it
  names) and is then reported as skipped with its reason.
Any other block — another language, a shell command other than `amsrag`, a stray marker — fails the test, and so
does an unmarked block that fails. docs/development.md describes the convention.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from api_index import API_DOCS, QUESTIONS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SRC = ROOT / "src"
WORKSPACE = Path(__file__).parent / "fixtures" / "guide_workspace"

PAGES = ("getting-started.md", "python-api.md", "guides/documents.md", "guides/asking.md", "guides/service.md",
         "guides/postgresql.md", "guides/monitoring.md", "guides/training.md", "guides/llm.md", "integrations.md",
         "mcp.md")
# pages whose first blocks build `my-index` themselves
BUILD_THEIR_INDEX = {"getting-started.md", "python-api.md", "guides/documents.md"}
# pages that start a subprocess (an MCP server's cold start): @pytest.mark.slow
SLOW_PAGES = {"mcp.md"}

SHELL = frozenset({"bash", "sh", "shell", "console"})
DATA: dict[str, Callable[[str], object]] = {"json": json.loads, "toml": tomllib.loads}
RUNNABLE = SHELL | {"python"} | set(DATA)

NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(?P<reason>\S.*?)\s*-->\s*$")
MARKER = re.compile(r"<!--\s*not-run\b")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
OUTPUTS = "__outputs__"


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, code and, when marked, why it is not run."""

    page: str
    line: int  # the opening fence's line, 1-based
    lang: str
    code: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def parse_blocks(page: str, text: str) -> list[Block]:
    """The fenced blocks of `text`; a `not-run` marker counts only on the line right before a fence."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        closing = re.compile(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), None)
        if end is None:
            raise AssertionError(f"{page}:{i + 1}: a fence that is never closed")
        marker = NOT_RUN.match(lines[i - 1]) if i > 0 else None
        code = "\n".join(line[indent:] for line in lines[i + 1:end]) + "\n"
        blocks.append(Block(page, i + 1, opening["lang"].lower(), code, marker["reason"] if marker else None))
        i = end + 1
    return blocks


def stray_markers(text: str) -> list[int]:
    """Lines holding a `not-run` marker that is malformed or not right before a fence."""
    lines = text.splitlines()
    return [n + 1 for n, line in enumerate(lines) if MARKER.search(line)
            and not (NOT_RUN.match(line) and n + 1 < len(lines) and FENCE.match(lines[n + 1]))]


def page_blocks(page: str) -> list[Block]:
    return parse_blocks(page, (DOCS / page).read_text("utf-8"))


# ------------------------------------------------------------------------------------------ shell commands
@dataclass(frozen=True)
class Command:
    env: dict[str, str]
    argv: list[str]  # argv[0] is the program


def shell_commands(block: Block) -> Iterator[Command]:
    """The commands of a shell block: one a line (a trailing backslash continues it), `&&` chains them, `#` starts a
    comment, `NAME=value` before a command sets its environment; in a ```console block only `$ ` lines are commands
    (the rest is their output). A block that runs must not pipe or redirect; in a not-run block (a synopsis) `|`,
    `[` and `]` are words."""
    lines = block.code.splitlines()
    if block.lang == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    text = re.sub(r"\\\n", " ", "\n".join(lines))
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>()" if block.not_run is None else "")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for token in [*lexer, "&&"]:
            if token != "&&":
                if token and set(token) <= set("|&;<>()"):
                    raise AssertionError(f"{block.name}: `{token}` in `{line}`: write one `amsrag` command a line "
                                         f"(or `&&` between), or mark the block not-run")
                words.append(token)
                continue
            env = {}
            while words and ENV_ASSIGNMENT.match(words[0]):
                name, _, value = words.pop(0).partition("=")
                env[name] = value
            if words:
                yield Command(env, words)
            words = []


def resolve(argv: list[str], where: str) -> tuple[Any, list[str]]:
    """The (typer's click) command `amsrag …` names, and the words after its name."""
    from amsrag.cli import app

    command = typer.main.get_command(app)
    words = argv[1:]
    while hasattr(command, "commands") and words and not words[0].startswith("-"):
        sub = command.commands.get(words[0])
        if sub is None:
            raise AssertionError(f"{where}: `amsrag` has no command "
                                 f"`{' '.join(argv[:len(argv) - len(words) + 1])}`")
        command, words = sub, words[1:]
    return command, words


def check_options(argv: list[str], where: str) -> None:
    """Every option `argv` names (also inside a synopsis's brackets) is one its command takes."""
    command, words = resolve(argv, where)
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}
    for word in words:
        option = word.strip("[]").split("=", 1)[0]
        if re.fullmatch(r"--?[A-Za-z][\w-]*", option) and option not in known:
            raise AssertionError(f"{where}: `amsrag {command.name}` has no option {option}")


# ------------------------------------------------------------------------------------------ the working folder
def amsrag_on_path(bin_dir: Path) -> None:
    """An `amsrag` executable running this checkout's CLI with this interpreter (a block may start one)."""
    bin_dir.mkdir()
    script = bin_dir / "amsrag"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(SRC))} OMP_NUM_THREADS=${{OMP_NUM_THREADS:-1}} "
                      f"exec {shlex.quote(sys.executable)} -m amsrag.cli \"$@\"\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    shutil.copytree(WORKSPACE, work, ignore=shutil.ignore_patterns("SOURCES.md"))
    shutil.copytree(API_DOCS, work / "my-documents", dirs_exist_ok=True)
    shutil.copytree(API_DOCS, work / "docs")
    amsrag_on_path(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("AMSRAG_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(work)
    return work


def your_llm() -> object:
    from llama_index.core.llms import MockLLM

    return MockLLM(max_tokens=8)


READER_SUPPLIED: dict[str, Callable[[], object]] = {"your_llm": your_llm}


def run_shell(block: Block, work: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Runs the block's commands; their outputs."""
    from amsrag.cli import app

    outputs = []
    for command in shell_commands(block):
        where = f"{block.name} `{' '.join(command.argv)}`"
        if command.argv[0] != "amsrag":
            raise AssertionError(f"{where}: only `amsrag` commands run here; mark the block not-run")
        argv = [str(work / w[2:]) if w.startswith("~/") else str(work) if w == "~" else w for w in command.argv]
        check_options(argv, where)
        with monkeypatch.context() as env:
            for name, value in command.env.items():
                env.setenv(name, value)
            result = CliRunner().invoke(app, argv[1:], catch_exceptions=True)
        if result.exit_code != 0:
            raise AssertionError(f"{where} exited {result.exit_code}:\n{result.output}\n"
                                 f"{result.exception!r}")
        outputs.append(result.output)
    return outputs


def run_page(page: str, work: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Runs the page's blocks; the Python blocks' namespace, with the shell commands' outputs in `OUTPUTS`."""
    namespace: dict[str, Any] = {"__name__": "__guide__"}
    outputs: list[str] = []
    for block in page_blocks(page):
        if block.not_run is not None:
            continue
        if block.lang == "python":
            for name, make in READER_SUPPLIED.items():
                if re.search(rf"\b{name}\b", block.code) and name not in namespace:
                    namespace[name] = make()
            exec(compile(block.code, block.name, "exec"), namespace)
        elif block.lang in SHELL:
            outputs += run_shell(block, work, monkeypatch)
        else:
            DATA[block.lang](block.code)
    namespace[OUTPUTS] = outputs
    return namespace


# ------------------------------------------------------------------------------------------ what a page must show
def check_getting_started(namespace: dict[str, Any], work: Path) -> None:
    build, ask = namespace[OUTPUTS]
    assert "built my-index: 10 passages added" in build
    assert "HTTPS_PROXY" in ask and "install.md" in ask


def check_python_api(namespace: dict[str, Any], work: Path) -> None:
    import amsrag

    assert namespace["answer"].citations[0].startswith("my-documents/apollo.md#")
    with amsrag.Index.open(work / "my-index") as index:
        assert index.passage("my-documents/comets.md#0") is not None


def check_integrations(namespace: dict[str, Any], work: Path) -> None:
    import amsrag

    with amsrag.Index.open(work / "my-index") as index:
        def expected(question: str) -> list[str]:
            return [p.id for p in index.retrieve(question, k=3).passages]

        assert [d.id for d in namespace["docs"]] == expected("When was Hillcrest Observatory founded?")
        assert [n.node.node_id for n in namespace["response"].source_nodes] == expected("What causes spring tides?")
        assert [d.id for d in namespace["out"]["retriever"]["documents"]] == expected(QUESTIONS[3])


def check_documents(namespace: dict[str, Any], work: Path) -> None:
    import amsrag

    with amsrag.Index.open(work / "my-index") as index:
        stored = {index.passage(pid) is not None for pid in ("notes/lighthouse", "docs/tides.md#0", "notes.md#0")}
        assert stored == {True}
        assert index.passage("more/automation") is None  # added, then deleted by its document


CHECKS: dict[str, Callable[[dict[str, Any], Path], None]] = {
    "getting-started.md": check_getting_started, "python-api.md": check_python_api,
    "integrations.md": check_integrations, "guides/documents.md": check_documents}


# ------------------------------------------------------------------------------------------ the tests
def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in page_blocks(page)]


def run_params() -> list[Any]:
    pages = [page for page in PAGES if any(b.not_run is None for b in page_blocks(page))]
    return [pytest.param(page, marks=[pytest.mark.slow] if page in SLOW_PAGES else [], id=page) for page in pages]


def test_every_block_runs_or_says_why_not() -> None:
    problems = []
    for page in PAGES:
        text = (DOCS / page).read_text("utf-8")
        problems += [f"{page}:{n}: a not-run marker must be `<!-- not-run: REASON -->` on the line right before a "
                     f"fence" for n in stray_markers(text)]
        problems += [f"{b.name}: a ```{b.lang or '(no language)'} block: give it a language the test runs "
                     f"({', '.join(sorted(RUNNABLE))}) or a not-run marker"
                     for b in parse_blocks(page, text) if b.not_run is None and b.lang not in RUNNABLE]
    assert not problems, "\n".join(problems)
    # the parser sees every fence of every page (each block opens and closes one)
    for page in PAGES:
        fences = sum(bool(FENCE.match(line)) for line in (DOCS / page).read_text("utf-8").splitlines())
        assert fences == 2 * len(page_blocks(page)), page
    blocks = all_blocks()
    skipped = [b for b in blocks if b.not_run is not None]
    print(f"{len(blocks)} blocks on {len(PAGES)} pages: {len(blocks) - len(skipped)} run, {len(skipped)} not run")
    for b in skipped:
        print(f"  not run: {b.name}: {b.not_run}")


@pytest.mark.parametrize("page", run_params())
def test_page_runs(page: str, api_index_dir: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if page not in BUILD_THEIR_INDEX:
        shutil.copytree(api_index_dir, workspace / "my-index")
    namespace = run_page(page, workspace, monkeypatch)
    if page in CHECKS:
        CHECKS[page](namespace, workspace)


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.not_run is not None], ids=lambda b: b.name)
def test_not_run_block(block: Block) -> None:
    """What can be checked without running it, then reported as skipped with its reason."""
    if block.lang == "python":
        compile(block.code, block.name, "exec")
    elif block.lang in SHELL:
        for command in shell_commands(block):
            if command.argv[0] == "amsrag":
                check_options(command.argv, f"{block.name} `{' '.join(command.argv)}`")
    elif block.lang in DATA:
        DATA[block.lang](block.code)
    pytest.skip(f"not run, {block.name}: {block.not_run}")


# ------------------------------------------------------------------------------------------ the harness itself
SAMPLE = """Text.

<!-- not-run: serves until stopped -->
```bash
amsrag serve --index ./my-index
```

<!-- not-run: not right before a fence -->

```python
x = 1
```
~~~~console
$ OMP_NUM_THREADS=1 amsrag index stats --index ./my-index --json   # the index
{"passages": 8}
~~~~
"""


def test_the_harness_reads_blocks_markers_and_commands() -> None:
    serve, python, console = parse_blocks("p.md", SAMPLE)
    assert (serve.line, serve.lang, serve.not_run) == (4, "bash", "serves until stopped")
    assert (python.lang, python.code, python.not_run) == ("python", "x = 1\n", None)
    assert stray_markers(SAMPLE) == [8]
    [command] = shell_commands(console)
    assert command == Command({"OMP_NUM_THREADS": "1"}, ["amsrag", "index", "stats", "--index", "./my-index",
                                                         "--json"])
    chained = Block("p.md", 1, "bash", "A=1 amsrag ask --index x 'a # b' && amsrag search \\\n --index x q\n", None)
    assert [c.argv for c in shell_commands(chained)] == [["amsrag", "ask", "--index", "x", "a # b"],
                                                         ["amsrag", "search", "--index", "x", "q"]]
    with pytest.raises(AssertionError, match=re.escape("`|` in `amsrag search")):
        list(shell_commands(Block("p.md", 1, "bash", "amsrag search --index x q | head\n", None)))


def test_the_harness_checks_commands_and_options() -> None:
    check_options(["amsrag", "retrieve", "--index", "x", "[--system", "full|bm25]", "[-k", "5]", "[--json]", "q"],
                  "ok")
    with pytest.raises(AssertionError, match="no command `amsrag index frobnicate`"):
        check_options(["amsrag", "index", "frobnicate", "--index", "x"], "here")
    with pytest.raises(AssertionError, match="has no option --nope"):
        check_options(["amsrag", "ask", "--index", "x", "[--nope]", "q"], "here")
