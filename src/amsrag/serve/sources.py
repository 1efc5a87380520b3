"""Source files served read-only (`GET /v1/sources/NAME/PATH`): the synced folders `amsrag serve --sources`
(and `--watch`) names, each under its document namespace NAME. A request is resolved inside its root or
refused: no `..` or absolute path, no symlink leading out, no directory, only files the index holds."""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from amsrag.errors import InputError
from amsrag.ingest.api import InputRoot
from amsrag.text.citations import fragment

PREFIX = "/v1/sources/"
# Shown inline without a sandbox: browsers run no script in these (a PDF viewer needs no sandbox, and refuses one).
INLINE_TYPES = frozenset({"application/pdf", "image/png", "image/jpeg", "image/gif", "image/webp"})
TEXT_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain", ".rst": "text/plain"}


@dataclass(frozen=True)
class SourceRoots:
    """Served folders by name (their resolved paths)."""

    roots: Mapping[str, Path] = field(default_factory=dict)

    @classmethod
    def parse(cls, specs: Sequence[str | Path]) -> SourceRoots:
        """Folders as `PATH` or `NAME=PATH` (NAME: the folder's own name by default, as `index sync` names its
        documents); a missing path, a file, a name with '/' or two folders of one name are an InputError."""
        roots: dict[str, Path] = {}
        for spec in specs:
            root = InputRoot.parse(spec)
            if not root.path.is_dir() or root.name is None:
                raise InputError(f"{spec}: not a folder; --sources serves the files of synced folders")
            if "/" in root.name:
                raise InputError(f"{spec}: a served folder's name must be one path segment, not {root.name!r}")
            path = root.path.resolve()
            if roots.get(root.name, path) != path:
                raise InputError(f"two served folders are both named {root.name!r} ({roots[root.name]} and "
                                 f"{path}): name one of them, e.g. other-{root.name}={root.path}")
            roots[root.name] = path
        return cls(roots)

    def __bool__(self) -> bool:
        return bool(self.roots)

    def url(self, doc_id: str | None, metadata: Mapping[str, Any]) -> str | None:
        """`/v1/sources/NAME/PATH[#page=N|#ANCHOR]` for a passage of a served folder's file (at its page, else at
        its section's anchor: `amsrag.text.citations.fragment`), else None."""
        source = metadata.get("source")
        if not doc_id or not isinstance(source, str) or not source:
            return None
        name, sep, rel = doc_id.partition("/")
        if not sep or rel != source or name not in self.roots:
            return None
        url = PREFIX + quote(name, safe="") + "/" + quote(rel, safe="/")
        return url + fragment(metadata)

    def resolve(self, name: str, rel: str) -> Path | None:
        """The file at `rel` inside the root `name`; None for anything else (no root of that name, a path that
        leaves it or names a directory, a missing file)."""
        root = self.roots.get(name)
        if root is None or not rel or rel.startswith("/") or "\\" in rel or "\x00" in rel:
            return None
        parts = rel.split("/")
        if any(p in ("", ".", "..") for p in parts):
            return None
        try:
            path = root.joinpath(*parts).resolve(strict=True)  # symlinks followed, then checked against the root
        except (OSError, RuntimeError, ValueError):
            return None
        if not path.is_relative_to(root) or not path.is_file():
            return None
        return path


def media_type(path: Path) -> str:
    """The file's content type by its name (text files with their charset), else application/octet-stream."""
    kind = TEXT_TYPES.get(path.suffix.lower()) or mimetypes.guess_type(path.name, strict=False)[0]
    kind = kind or "application/octet-stream"
    return f"{kind}; charset=utf-8" if kind.startswith("text/") else kind


def safe_headers(kind: str) -> dict[str, str]:
    """Headers of a served file: never sniffed; anything that could run a script (HTML, SVG, …) sandboxed."""
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache",
               "Content-Disposition": "inline", "Referrer-Policy": "no-referrer"}
    if kind.split(";")[0] not in INLINE_TYPES:
        headers["Content-Security-Policy"] = "sandbox"
    return headers
