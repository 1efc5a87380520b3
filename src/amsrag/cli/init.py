"""`amsrag index init`: a commented configuration file to edit and pass to `amsrag index build --config`, every key
with its value and what it does (from the configuration model's own descriptions)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from amsrag.cli.common import out
from amsrag.errors import InputError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from amsrag.config import AmsragConfig

HEADER = """\
# amsrag configuration ({origin}).
# Build an index with it:  amsrag index build DOCS... --index my-index --config {name}
# Every key is shown with its current value; delete the ones you keep as they are. Settings the stored indexes
# depend on (embedding, bm25, dense, graph, chunking) are fixed when an index is built; the others (router,
# fusion, generator, serve, ...) are read at query time and may be changed later."""


def _comment(text: str | None) -> list[str]:
    import textwrap

    return [f"# {line}" for line in textwrap.wrap(" ".join((text or "").split()), 110)]


def _nested(value: Any) -> bool:
    """A value TOML writes as its own table: a mapping, or a list of mappings."""
    return isinstance(value, dict) or (isinstance(value, list) and bool(value) and isinstance(value[0], dict))


def commented_toml(config: AmsragConfig, origin: str, name: str) -> str:
    """`config` as TOML, each section and key under its description; reads back as `config`."""
    import tomli_w

    from amsrag.config import AmsragConfig

    lines = [HEADER.format(origin=origin, name=name)]
    data = config.model_dump(mode="json")
    for section in AmsragConfig.model_fields:
        model: BaseModel = getattr(config, section)
        values = data[section]
        lines += ["", *_comment(type(model).__doc__), f"[{section}]"]
        later: list[str] = []
        for key, info in type(model).model_fields.items():
            value = values[key]
            about = _comment(info.description)
            if value is None:
                lines += [*about, f"# {key} = (unset)"]
            elif _nested(value):
                later += ["", *about, tomli_w.dumps({section: {key: value}}).strip()]
            else:
                lines += [*about, tomli_w.dumps({key: value}).strip()]
        lines += later
    return "\n".join(lines) + "\n"


def init_command(
    path: Annotated[Path, typer.Argument(help="the file to write")] = Path("amsrag.toml"),
    index: Annotated[str | None, typer.Option("--index", help="start from this index's configuration (default: "
                                                             "amsrag's defaults)")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing file")] = False,
) -> None:
    """Write a commented configuration file (every key, its value and what it does) to edit and pass to
    `amsrag index build --config`."""
    from amsrag.config import AmsragConfig

    if path.exists() and not force:
        raise InputError(f"{path} exists; pass --force to overwrite it, or give another path")
    if index is not None:
        from amsrag.store.open import open_index

        with open_index(index) as idx:
            config, origin = idx.config, f"the configuration of the index {idx.location}"
    else:
        config, origin = AmsragConfig(), "amsrag's defaults"
    text = commented_toml(config, origin, path.name)
    if AmsragConfig.from_toml(text, str(path)) != config:  # the file must read back as the configuration it shows
        raise InputError(f"the configuration does not survive a TOML round trip; {path} was not written")
    path.write_text(text, encoding="utf-8")
    out.print(f"wrote {path} ({origin}); build with: amsrag index build DOCS... --index my-index --config {path}",
              highlight=False, markup=False, soft_wrap=True)
