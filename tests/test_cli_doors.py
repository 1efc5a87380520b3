"""The command tree's nine doors (issue 41): `amsrag --help` lists ask, retrieve, search, index, serve, demo, eval,
train and ops; every old spelling still runs the same command, its stdout unchanged, with one line on stderr naming
the new spelling; completion offers the new tree only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from amsrag.cli.aliases import MOVED, new_spelling, notice
from amsrag.cli.main import DOORS, app

ROOT = typer.main.get_command(app)
OLD_TOP = sorted({old.split()[0] for old in MOVED})


def runner() -> CliRunner:
    return CliRunner()


def command_at(words: list[str]) -> Any:
    """The click command the words name (a group, or a command), following the tree from the root."""
    command = ROOT
    ctx = ROOT.context_class(ROOT, info_name="amsrag")
    for word in words:
        command = command.get_command(ctx, word)
        assert command is not None, f"no command {' '.join(words)}"
        ctx = command.context_class(command, info_name=word, parent=ctx)
    return command


def subcommands(command: Any) -> list[str]:
    return command.list_commands(command.context_class(command, info_name="x"))


def old_commands() -> list[str]:
    """Every old spelling of a runnable command ("classifier train", "init", ...)."""
    found = []
    for name in OLD_TOP:
        command = command_at([name])
        found += [f"{name} {sub}" for sub in subcommands(command)] if hasattr(command, "list_commands") else [name]
    return found


def listed_commands(help_text: str) -> list[str]:
    lines = help_text.split("Commands:\n", 1)[1].splitlines()
    return [line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("   ")]


def test_help_lists_the_nine_doors_and_no_old_name() -> None:
    result = runner().invoke(app, ["--help"], prog_name="amsrag")
    assert result.exit_code == 0
    listed = listed_commands(result.stdout)
    assert listed == list(DOORS) and len(listed) <= 9
    assert not set(listed) & set(OLD_TOP)
    assert result.stderr == ""
    for name in OLD_TOP:  # the old names are there, hidden
        assert command_at([name]).hidden


def test_every_old_spelling_maps_to_the_same_command_in_the_new_tree() -> None:
    olds = old_commands()
    assert len(olds) == 39  # 15 old names: 13 groups of 37 commands, and init and mcp
    for old in olds:
        new = new_spelling(old)
        if old == "mcp":
            assert new == "serve --mcp"  # a mode of serve: test_mcp_is_a_mode_of_serve_...
            continue
        before, after = command_at(old.split()), command_at(new.split())
        # typer wraps each registration of a function: the function under both is the same
        assert not after.hidden and after.callback.__wrapped__ is before.callback.__wrapped__, (old, new)
    # and the new tree holds nothing but the doors' own commands and the moved ones
    moved = {new_spelling(old) for old in olds}
    for door in ("train", "ops"):
        for group in subcommands(command_at([door])):
            for sub in subcommands(command_at([door, group])):
                assert f"{door} {group} {sub}" in moved


@pytest.mark.parametrize("old", old_commands())
def test_an_old_spelling_prints_the_same_help_and_one_notice(old: str) -> None:
    new = new_spelling(old)
    before = runner().invoke(app, [*old.split(), "--help"], prog_name="amsrag", terminal_width=100)
    assert before.exit_code == 0
    assert before.stderr.splitlines() == [notice(old)]
    assert f"`amsrag {new}`" in before.stderr
    if old == "mcp":
        return
    after = runner().invoke(app, [*new.split(), "--help"], prog_name="amsrag", terminal_width=100)
    assert after.exit_code == 0 and after.stderr == ""
    # the same help, only the usage line's command path differs
    assert before.stdout.replace(f"amsrag {old} ", f"amsrag {new} ", 1) == after.stdout


def test_an_old_group_alone_names_its_new_place() -> None:
    result = runner().invoke(app, ["classifier", "--help"], prog_name="amsrag")
    assert result.exit_code == 0 and "predict" in result.stdout
    assert result.stderr.splitlines() == [notice("classifier")]
    assert "`amsrag train classifier`" in result.stderr


def test_the_notice_names_the_new_spelling() -> None:
    assert new_spelling("classifier train") == "train classifier train"
    assert new_spelling("tables list") == "index tables list"
    assert new_spelling("tables train") == "train tables train"
    assert new_spelling("themes rebuild") == "index themes rebuild"
    assert new_spelling("review mark") == "ops review mark"
    assert new_spelling("init") == "index init"
    with pytest.raises(KeyError):
        new_spelling("ask")
    assert "\n" not in notice("route tune") and notice("route tune").startswith("warning: `amsrag route tune` is now")


def test_old_and_new_spellings_print_the_same_stdout(tmp_path: Path) -> None:
    # init: the same file and the same line on stdout (the same path: written, removed, written again)
    target = tmp_path / "amsrag.toml"
    new = runner().invoke(app, ["index", "init", str(target)])
    assert new.exit_code == 0 and new.stderr == ""
    written = target.read_text("utf-8")
    target.unlink()
    old = runner().invoke(app, ["init", str(target)])
    assert old.exit_code == 0 and old.stdout == new.stdout and target.read_text("utf-8") == written
    assert old.stderr.splitlines() == [notice("init")]

    # a model group's --json: byte for byte
    question = ["Who directed the film that won Best Picture in 1998?", "--json"]
    new = runner().invoke(app, ["train", "classifier", "predict", *question])
    old = runner().invoke(app, ["classifier", "predict", *question])
    assert new.exit_code == old.exit_code == 0
    assert old.stdout == new.stdout and json.loads(new.stdout)["label"] in ("zero_hop", "one_hop", "multi_hop")
    assert old.stderr.splitlines() == [notice("classifier predict")] and new.stderr == ""


def test_an_old_spelling_fails_as_before_after_its_notice(tmp_path: Path) -> None:
    missing = str(tmp_path / "none")
    new = runner().invoke(app, ["ops", "querylog", "show", "--index", missing])
    old = runner().invoke(app, ["querylog", "show", "--index", missing])
    assert new.exit_code == old.exit_code == 2 and old.stdout == new.stdout
    assert old.stderr.splitlines() == [notice("querylog show"), *new.stderr.splitlines()]


def test_mcp_is_a_mode_of_serve_and_the_old_spelling_still_runs() -> None:
    args = ["--index", "idx", "--transport", "sse"]
    new = runner().invoke(app, ["serve", "--mcp", *args])
    old = runner().invoke(app, ["mcp", *args])
    assert new.exit_code == old.exit_code == 2
    assert "--transport must be stdio or http" in new.stderr
    assert old.stderr.splitlines() == [notice("mcp"), *new.stderr.splitlines()]
    # the web service's options are not MCP's, nor the other way round
    web = runner().invoke(app, ["serve", "--mcp", "--index", "idx", "--watch", "docs", "--access-log"])
    assert web.exit_code == 2 and "--access-log, --watch: options of the web service, not of --mcp" in web.stderr
    mcp = runner().invoke(app, ["serve", "--index", "idx", "--transport", "http", "--path", "/m"])
    assert mcp.exit_code == 2 and "--transport, --path: options of --mcp" in mcp.stderr


def complete(words: str) -> tuple[list[str], str]:
    """What bash completion offers after `words` (a trailing space: a new word), and what went to stderr."""
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    env = {"_AMSRAG_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    result = runner().invoke(app, [], prog_name="amsrag", env=env)
    assert result.exit_code == 0
    return result.stdout.split(), result.stderr


def test_completion_offers_the_new_tree_only() -> None:
    assert complete("amsrag ")[0] == list(DOORS)
    assert complete("amsrag cl")[0] == []  # the old name is hidden
    assert complete("amsrag train cl")[0] == ["classifier"]
    assert complete("amsrag train classifier ")[0] == subcommands(command_at(["classifier"]))
    assert complete("amsrag index ")[0][-3:] == ["init", "tables", "themes"]
    assert complete("amsrag ops review ")[0] == ["list", "show", "mark", "dismiss"]
    # an old spelling still completes, and quietly: no notice while the shell asks
    offered, stderr = complete("amsrag classifier ")
    assert offered == subcommands(command_at(["train", "classifier"])) and stderr == ""


def test_a_typo_is_offered_the_new_spelling() -> None:
    result = runner().invoke(app, ["clasifier"], prog_name="amsrag")
    assert result.exit_code == 2 and "No such command 'clasifier'. Did you mean 'train classifier'?" in result.stderr
    assert "Did you mean 'train'?" in runner().invoke(app, ["trian"], prog_name="amsrag").stderr
