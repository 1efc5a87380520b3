"""The old spellings of moved commands (issue 41): `amsrag classifier train` is now `amsrag train classifier train`.

For one release every old top-level name stays as a hidden alias of the very same command: it runs exactly as
before (same options, same stdout), and prints one line on stderr with the new spelling, so a script parsing
`--json` keeps working while its author learns the new name. The aliases are hidden: `amsrag --help`, the shell
completion and the generated reference list only the new tree (the reference ends with the table of the old
spellings).

The rule the new tree follows (docs/design.md §9; the generated command line reference lists the aliases): a
group that fits a model or a threshold moves whole under `train` (its commands keep their names, `classifier
predict` included: the command sits beside the model it runs); the groups that inspect an index (`tables
list|query`, `themes`) and `init` move under `index`, the semantic parser's fit (`tables train`) under `train`; the
groups that watch a running deployment (`querylog`, `review`, `monitor`) under `ops`; `mcp` becomes `serve --mcp`.
"""

from __future__ import annotations

import re
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

REMOVED_IN = "the next release"

# old spelling (after `amsrag`) -> new spelling; the longest matching prefix of words wins
MOVED: dict[str, str] = {
    "init": "index init",
    "mcp": "serve --mcp",
    "tables": "index tables",  # the group itself (`amsrag tables --help`): its inspecting commands, and
    "tables list": "index tables list",
    "tables query": "index tables query",
    "tables train": "train tables train",  # the semantic parser's fit
    "themes": "index themes",
    **{group: f"train {group}" for group in ("classifier", "evaluator", "audit", "route", "reader", "decomposer",
                                             "fusion", "taxonomy")},
    **{group: f"ops {group}" for group in ("querylog", "review", "monitor")},
}


def new_spelling(old: str) -> str:
    """The new spelling of the old command words `old` ("classifier train" -> "train classifier train")."""
    words = old.split()
    for n in range(len(words), 0, -1):
        head = " ".join(words[:n])
        if head in MOVED:
            return " ".join([MOVED[head], *words[n:]])
    raise KeyError(f"{old!r} is not an old spelling")


def notice(old: str) -> str:
    """The one-line deprecation notice of the old command words `old`."""
    return f"warning: `amsrag {old}` is now `amsrag {new_spelling(old)}`; the old spelling goes in {REMOVED_IN}"


def respell_suggestions(message: str) -> str:
    """A "No such command 'X'. Did you mean 'classifier'?" message with its suggestions in the new spelling
    (the root's suggestions are drawn from every name, the hidden old ones too)."""
    head, sep, tail = message.partition("Did you mean ")
    old = {o.split()[0] for o in MOVED}
    return head + sep + re.sub(r"'([a-z-]+)'", lambda m: f"'{new_spelling(m[1])}'" if m[1] in old else m[0], tail)


def _warn(old: str) -> None:
    typer.echo(notice(old), err=True)


class DeprecatedGroup(TyperGroup):
    """A hidden old group: its subcommands run as before, after the notice naming their new spelling."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing and (not args or args[0] in self.get_help_option_names(ctx)):
            _warn(str(ctx.info_name))  # `amsrag classifier` / `--help`: the group's own help follows
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and not ctx.resilient_parsing:  # resilient: shell completion, which must stay quiet
            _warn(f"{ctx.info_name} {name}")
        return name, command, rest


class DeprecatedCommand(TyperCommand):
    """A hidden old command (`init`, `mcp`): runs as before, after the notice naming its new spelling."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:
            _warn(str(ctx.info_name))
        return super().parse_args(ctx, args)
