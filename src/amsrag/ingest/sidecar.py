"""A folder's `amsrag.toml`: tags for the documents of a folder given to `amsrag index add|build|sync`.

The file sits at the top of the folder (one elsewhere in it is passed over, and the report says so):

    # every document of the folder
    tags = ["handbook"]

    # the documents whose path inside the folder matches the glob (fnmatch: `*` also matches `/`)
    [files."guides/*.pdf"]
    tags = ["guide", "admin"]

    [files."notes/2025-*"]
    tags = ["notes"]

A document gets the folder's tags and those of every glob its path matches, beside the command's `--tag`
values and a Markdown file's front matter `tags`. A value may be one string instead of a list. A file that
is not valid TOML, an unknown key or a value that is not a tag is an InputError naming the file.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from amsrag.errors import InputError
from amsrag.filters import check_tag

SIDECAR = "amsrag.toml"


@dataclass(frozen=True, slots=True)
class FolderTags:
    """The tags a folder's sidecar gives: to every document, and per glob of paths inside the folder."""

    every: tuple[str, ...] = ()
    by_glob: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def tags_for(self, relative: str) -> tuple[str, ...]:
        """The tags of the document at `relative` (its posix path inside the folder)."""
        out = list(self.every)
        for glob, tags in self.by_glob:
            if fnmatchcase(relative, glob):
                out.extend(tags)
        return tuple(dict.fromkeys(out))


def read_sidecar(folder: Path) -> FolderTags:
    """The sidecar of `folder` (no tags when it has none)."""
    path = folder / SIDECAR
    if not path.is_file():
        return FolderTags()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML ({exc}); see docs/guides/documents.md for its format") from exc
    unknown = sorted(set(data) - {"tags", "files"})
    if unknown:
        raise InputError(f"{path}: unknown key {unknown[0]!r}; an {SIDECAR} holds `tags` and `[files.\"GLOB\"]` "
                         f"tables")
    every = _tags(data.get("tags", []), f"{path}: `tags`")
    files = data.get("files", {})
    if not isinstance(files, Mapping):
        raise InputError(f"{path}: `files` must be tables such as [files.\"guides/*.pdf\"] with tags = [...]")
    by_glob = []
    for glob, table in files.items():
        where = f"{path}: [files.{glob!r}]"
        if not glob.strip():
            raise InputError(f"{where}: an empty glob; give the paths it covers, e.g. \"guides/*.pdf\"")
        if not isinstance(table, Mapping) or set(table) != {"tags"}:
            raise InputError(f"{where}: must hold `tags` (and nothing else), e.g. tags = [\"guide\"]")
        by_glob.append((glob, _tags(table["tags"], f"{where} `tags`")))
    return FolderTags(every, tuple(by_glob))


def _tags(value: object, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise InputError(f"{where} must be a string or a list of strings, got {value!r}")
    return tuple(dict.fromkeys(check_tag(v, where) for v in items))
