"""The documentation (issue 40): a short README that starts with the two set-up commands, relative links that
resolve inside the repository, reference pages generated from the code that name every command and configuration
key, shell completion, and the mkdocs site building strictly."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import typing
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOCS = ROOT / "docs"

DEMO_COMMAND = ("python -m pip install -e . && amsrag demo                      "
                "# the main job, on the bundled demo corpus")
TEST_COMMAND = 'python -m pip install -e ".[test]" && python -m pytest          # the tests'

# [text](target) outside code: the target up to a space or the closing parenthesis
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)[^)]*\)")


def gen_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------ README
def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_bytes()
    assert len(readme) <= 10 * 1024, f"README.md is {len(readme)} bytes; move detail into docs/"
    lines = readme.decode("utf-8").splitlines()
    assert lines[:6] == ["# amsrag", "", "```bash", DEMO_COMMAND, TEST_COMMAND, "```"]
    # CI runs the README's test command
    assert 'python -m pip install -e ".[test]" && python -m pytest' in (ROOT / ".ci" / "run").read_text()


# ------------------------------------------------------------------------------------------- links
def relative_links(page: Path) -> Iterator[str]:
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL (http:, mailto:) or an anchor on the same page
            yield target


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_every_relative_link_resolves_inside_the_repository() -> None:
    generated = {DOCS / page for page in gen_reference().REFERENCE_PAGES}  # made at build time, not committed
    broken = []
    for page in doc_pages():
        for target in relative_links(page):
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.is_relative_to(ROOT):
                broken.append(f"{page.relative_to(ROOT)}: {target} points outside the repository")
            elif not path.exists() and path not in generated:
                broken.append(f"{page.relative_to(ROOT)}: {target} does not exist")
    assert broken == []


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("See [design](../shared/DESIGN.md), [site](https://example.org) and [here](#top).\n"
                    "```\n[not a link](in-code.md)\n```\n", encoding="utf-8")
    assert list(relative_links(page)) == ["../shared/DESIGN.md"]


def test_readme_links_to_the_design_inside_the_repository() -> None:
    targets = list(relative_links(ROOT / "README.md"))
    assert "docs/design.md" in targets and (DOCS / "design.md").is_file()


# -------------------------------------------------------------------------------- generated reference
def click_commands(command: Any, name: str) -> Iterator[tuple[str, Any]]:
    yield name, command
    for sub_name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            yield from click_commands(sub, f"{name} {sub_name}")


def test_every_cli_command_and_option_is_in_the_reference() -> None:
    import typer

    from amsrag.cli.main import app

    text = gen_reference().cli_markdown()
    commands = list(click_commands(typer.main.get_command(app), "amsrag"))
    assert len(commands) > 40  # the whole tree was walked, groups and their commands
    for name, command in commands:
        assert f"`{name}`" in text, f"{name} is missing from the CLI reference"
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                assert param.opts[0] in text, f"{name} {param.opts[0]} is missing from the CLI reference"
    for command in ("amsrag index build", "amsrag ask", "amsrag serve", "amsrag ops review mark"):
        assert f"`{command}`" in text


def config_keys(model: Any, prefix: str = "") -> Iterator[str]:
    from pydantic import BaseModel

    for name, field in model.model_fields.items():
        nested = [a for a in (field.annotation, *typing.get_args(field.annotation))
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        if not nested:
            yield prefix + name
        else:
            is_list = typing.get_origin(field.annotation) is list
            yield from config_keys(nested[0], f"{prefix}{name}{'[]' if is_list else ''}.")


def test_every_configuration_key_is_in_the_reference() -> None:
    from amsrag.config import AmsragConfig

    text = gen_reference().config_markdown()
    keys = list(config_keys(AmsragConfig))
    assert len(keys) > 150 and "serve.api_keys" in keys and "external.sources[].name" in keys
    missing = [key for key in keys if f"| `{key}` |" not in text]
    assert missing == []


@pytest.mark.slow
def test_the_http_reference_covers_the_service_schema() -> None:
    module = gen_reference()
    schema = module.openapi_schema()
    text = module.http_markdown(schema)
    for path, operations in schema["paths"].items():
        for method in operations:
            assert f"## `{method.upper()} {path}`" in text
    assert "## `POST /v1/ask`" in text and "## `POST /v1/chat/completions`" in text


# ------------------------------------------------------------------------------------ shell completion
def test_shell_completion_is_offered() -> None:
    from amsrag.cli.main import app

    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0, result.output
    assert "--install-completion" in result.output and "--show-completion" in result.output


# ------------------------------------------------------------------------------------------ the site
@pytest.mark.slow
def test_the_site_builds_strictly() -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        assert not os.environ.get("AMSRAG_REQUIRE_DOCS"), "AMSRAG_REQUIRE_DOCS is set: the site must build here"
        pytest.skip('mkdocs and mkdocs-material are not installed: pip install -e ".[docs]"')
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as site:
        proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", site], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-4000:]
        for page in ("reference/cli/index.html", "reference/configuration/index.html",
                     "reference/http-api/index.html", "getting-started/index.html", "benchmarks/index.html"):
            assert (Path(site) / page).is_file(), page
