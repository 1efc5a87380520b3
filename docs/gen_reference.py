"""The generated reference pages of the documentation site: the CLI (from the click tree of `amsrag.cli.main.app`),
the configuration keys (from `AmsragConfig`), the HTTP API (from the service's OpenAPI schema) and the Python API
(from the docstrings of `amsrag.__all__`).

mkdocs runs this file as a hook (`hooks:` in mkdocs.yml): the pages are made at every build and handed to mkdocs
in memory, never written into docs/, so they cannot go stale in git. `python docs/gen_reference.py OUT_DIR` writes
them to a folder instead, to read them without building the site.
"""

from __future__ import annotations

import inspect
import json
import sys
import tempfile
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REFERENCE_PAGES = ("reference/cli.md", "reference/configuration.md", "reference/http-api.md",
                   "reference/python.md")


def _cell(text: object) -> str:
    """One Markdown table cell: no line breaks, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


# ------------------------------------------------------------------------------------------------ CLI
def cli_commands() -> list[tuple[str, Any]]:
    """Every command of `amsrag`, groups included, as (full name, click command), in the order `--help` lists."""
    import typer

    from amsrag.cli.main import app

    root = typer.main.get_command(app)
    found: list[tuple[str, Any]] = []

    def walk(name: str, command: Any) -> None:
        found.append((name, command))
        if _is_group(command):
            ctx = command.context_class(command, info_name=name)
            for sub in command.list_commands(ctx):
                child = command.get_command(ctx, sub)
                if child is not None and not child.hidden:
                    walk(f"{name} {sub}", child)

    walk("amsrag", root)
    return found


def _is_group(command: Any) -> bool:
    # typer >= 0.20 ships its own copy of click: its groups are not `click.Group`s, so ask what they do
    return hasattr(command, "list_commands")


def _param_row(param: Any) -> str:
    if param.param_type_name == "argument":
        name = getattr(param, "metavar", None) or str(param.name).upper()
        kind = "argument" + (", several" if param.nargs == -1 else "")
    else:
        name = ", ".join(param.opts + param.secondary_opts)
        kind = "flag" if param.is_flag else "option"
    default = param.default
    shown = "" if default is None or callable(default) or default == () or param.required else repr(default)
    if getattr(param, "is_flag", False) and default is False:
        shown = ""
    return (f"| `{_cell(name)}` | {kind}{', required' if param.required else ''} | "
            f"{_cell(getattr(param, 'help', None) or '')} | {_cell(shown)} |")


def cli_markdown() -> str:
    lines = ["# Command line", "",
             "Generated from the `amsrag` command tree at build time: every command, its help and its options "
             "(`amsrag COMMAND --help` prints the same).", "",
             "Nine commands at the top: `ask`, `retrieve`, `search`, `index`, `serve`, `demo`, `eval`, `train` and "
             "`ops`. A group that fits a model or a threshold sits whole under `train` (its commands keep their "
             "names: `amsrag train classifier predict` runs the model it fits); what inspects an index (its tables, "
             "its themes) and `init` sit under `index`; a deployment's query log, review queue and monitoring "
             "under `ops`; the MCP server is `serve --mcp`. The old spellings are listed at the end.", ""]
    for name, command in cli_commands():
        depth = min(name.count(" ") + 1, 4)
        lines += [f"{'#' * (depth + 1)} `{name}`", ""]
        text = inspect.cleandoc(command.help or command.short_help or "")
        if text:
            lines += [text, ""]
        ctx = command.context_class(command, info_name=name)
        usage = " ".join(command.collect_usage_pieces(ctx))
        lines += ["```", f"{name} {usage}".rstrip(), "```", ""]
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if _is_group(command):
            subs = [s for s in command.list_commands(ctx) if not command.get_command(ctx, s).hidden]
            lines += ["Commands: " + ", ".join(f"`{name} {s}`" for s in subs), ""]
        if params:
            lines += ["| name | kind | help | default |", "|---|---|---|---|"]
            lines += [_param_row(p) for p in params]
            lines.append("")
    lines += old_spellings()
    return "\n".join(lines)


def old_spellings() -> list[str]:
    """The table of the old spellings (hidden aliases for one release) and their new ones."""
    from amsrag.cli.aliases import MOVED, REMOVED_IN

    lines = ["## Old spellings", "",
             f"Hidden aliases until {REMOVED_IN}: each runs the same command with the same output, and prints "
             "its new spelling on stderr (one line; stdout and `--json` are unchanged).", "",
             "| old | new |", "|---|---|"]
    lines += [f"| `amsrag {old}` | `amsrag {new}` |" for old, new in MOVED.items()]
    return [*lines, ""]


# ------------------------------------------------------------------------------------- configuration
def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if not typing.get_args(annotation) else None
    return text or str(annotation).replace("typing.", "")


def _model_of(annotation: Any) -> Any:
    """The pydantic model a field holds (itself, in a list or optional), else None."""
    from pydantic import BaseModel

    candidates = [annotation, *typing.get_args(annotation)]
    for candidate in candidates:
        if inspect.isclass(candidate) and issubclass(candidate, BaseModel):
            return candidate
    return None


def config_keys() -> Iterator[tuple[str, Any]]:
    """(dotted key, pydantic field) for every key of the configuration, nested sections walked (a list of tables,
    as `external.sources`, is walked as `external.sources[].name`)."""
    from amsrag.config import AmsragConfig

    def walk(prefix: str, model: Any) -> Iterator[tuple[str, Any]]:
        for field_name, field in model.model_fields.items():
            key = f"{prefix}{field_name}"
            nested = _model_of(field.annotation)
            if nested is None:
                yield key, field
            else:
                is_list = typing.get_origin(field.annotation) is list
                yield from walk(f"{key}[]." if is_list else f"{key}.", nested)

    yield from walk("", AmsragConfig)


def config_markdown() -> str:
    from pydantic_core import PydanticUndefined

    lines = ["# Configuration keys", "",
             "Generated from the configuration model (`amsrag.config.AmsragConfig`) at build time. One pydantic "
             "model, TOML on disk (`amsrag index build --config FILE`, `amsrag index init` writes a commented one); "
             "the defaults are written to each index's `config.toml`. A key `section.name` is `name` under `[section]` "
             "in TOML; `external.sources[]` is a list of `[[external.sources]]` tables.", ""]
    section = None
    for key, field in config_keys():
        head = key.split(".")[0]
        if head != section:
            section = head
            lines += ["", f"## `[{head}]`", "", "| key | type | default | description |", "|---|---|---|---|"]
        default: Any = field.get_default(call_default_factory=True)
        shown = "required" if default is PydanticUndefined else json.dumps(default, default=str)
        lines.append(f"| `{key}` | `{_cell(_type_name(field.annotation))}` | `{_cell(shown)}` | "
                     f"{_cell(field.description or '')} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ HTTP API
def openapi_schema() -> dict[str, Any]:
    """The service's own OpenAPI schema: a one-passage index is built in a temporary folder and served (not
    started) with the default [serve] settings, so the schema is exactly the one `amsrag serve` publishes."""
    import amsrag
    from amsrag.config import ServeConfig
    from amsrag.pipeline import Engine
    from amsrag.serve.app import create_app
    from amsrag.serve.service import Service

    with tempfile.TemporaryDirectory(prefix="amsrag-docs-") as tmp:
        source = Path(tmp) / "page.md"
        source.write_text("# Reference\nThe HTTP API reference is generated from this service.\n", encoding="utf-8")
        amsrag.Index.build(Path(tmp) / "index", [source]).close()
        service = Service(Engine.open(Path(tmp) / "index"), ServeConfig())
        try:
            return create_app(service, warm=False).openapi()
        finally:
            service.close()


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " or ".join(_schema_name(s) for s in schema["anyOf"])
    return str(schema.get("type", "object"))


def http_markdown(schema: dict[str, Any] | None = None) -> str:
    schema = schema or openapi_schema()
    lines = ["# HTTP API", "",
             f"Generated from the OpenAPI schema of `amsrag serve` (version {schema['info']['version']}) at build "
             "time. A running service serves the same schema at `/openapi.json` and pages at `/docs` (behind the "
             "API key when keys are set). Errors are `{\"error\": {\"code\", \"message\"}}`.", ""]
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            lines += [f"## `{method.upper()} {path}`", ""]
            text = op.get("description") or op.get("summary") or ""
            if text:
                lines += [inspect.cleandoc(text), ""]
            params = op.get("parameters", [])
            if params:
                lines += ["| parameter | in | type | required |", "|---|---|---|---|"]
                lines += [f"| `{p['name']}` | {p['in']} | {_cell(_schema_name(p.get('schema', {})))} | "
                          f"{'yes' if p.get('required') else 'no'} |" for p in params]
                lines.append("")
            body = op.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                lines += [f"Request body ({media}): `{_cell(_schema_name(content.get('schema', {})))}`", ""]
            responses = op.get("responses", {}).items()
            codes = ", ".join(f"{code} {_cell(r.get('description', ''))}" for code, r in responses)
            if codes:
                lines += [f"Responses: {codes}", ""]
    components = schema.get("components", {}).get("schemas", {})
    if components:
        lines += ["## Schemas", ""]
        for name, body in sorted(components.items()):
            lines += [f"### `{name}`", ""]
            if body.get("description"):
                lines += [_cell(body["description"]), ""]
            props = body.get("properties", {})
            if props:
                required = set(body.get("required", []))
                lines += ["| field | type | required | description |", "|---|---|---|---|"]
                lines += [f"| `{field}` | {_cell(_schema_name(spec))} | {'yes' if field in required else 'no'} | "
                          f"{_cell(spec.get('description', ''))} |" for field, spec in props.items()]
                lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- Python API
def python_markdown() -> str:
    import amsrag

    lines = ["# Python API reference", "",
             "Generated from the docstrings of the names `amsrag` exports (`amsrag.__all__`, the stable surface) at "
             "build time. Examples: [Python API](../python-api.md).", ""]
    for name in sorted(amsrag.__all__, key=str.lower):
        obj = getattr(amsrag, name)
        lines += [f"## `amsrag.{name}`", ""]
        if inspect.isclass(obj) or inspect.isfunction(obj):
            # a class's own docstring only: an undocumented model would show pydantic's BaseModel text, an
            # undocumented dataclass its signature again
            own = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
            doc = inspect.cleandoc(own) if own and not own.startswith(f"{name}(") else None
            try:
                signature = str(inspect.signature(obj))
            except (TypeError, ValueError):
                signature = ""
            lines += ["```python", f"{'class ' if inspect.isclass(obj) else ''}{name}{signature}", "```", ""]
            if doc:
                lines += [doc, ""]
            if inspect.isclass(obj):
                for member, value in inspect.getmembers(obj):
                    if member.startswith("_") or not (inspect.isfunction(value) or isinstance(value, property)):
                        continue
                    defined_in = getattr(value.fget if isinstance(value, property) else value, "__module__", "")
                    if not str(defined_in).startswith("amsrag"):  # pydantic's and the standard library's own
                        continue
                    member_doc = inspect.getdoc(value)
                    if member_doc and member_doc != inspect.getdoc(getattr(object, member, None)):
                        lines += [f"- `{name}.{member}`: {_cell(member_doc.split(chr(10) + chr(10))[0])}"]
                lines.append("")
        else:
            lines += [f"`{obj!r}`", ""]
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """Every generated page: its path under docs/ and its Markdown."""
    return {"reference/cli.md": cli_markdown(), "reference/configuration.md": config_markdown(),
            "reference/http-api.md": http_markdown(), "reference/python.md": python_markdown()}


# ----------------------------------------------------------------------------------------- mkdocs hook
def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the generated pages to the site (in memory; nothing is written into docs/)."""
    from mkdocs.structure.files import File

    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python docs/gen_reference.py OUT_DIR   (writes the generated reference pages there)")
    out = Path(sys.argv[1])
    for path, text in pages().items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(text, encoding="utf-8")
        print(out / path)
