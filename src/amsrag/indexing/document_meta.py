"""The row an ingest or sync writes for each document it reads from a file: the document's title (the
reader's, for a document file), the file's last modification (UTC) and size, and its tags — the command's
`--tag` values, the folder's `amsrag.toml` (`amsrag.ingest.sidecar`) and a Markdown file's front matter
(`amsrag.ingest.front_matter`). Every add, build or sync of a file sets its documents' tags anew."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from amsrag.filters import check_tag, utc_stamp
from amsrag.ingest.api import SourceFile
from amsrag.ingest.formats import detect_format
from amsrag.ingest.front_matter import markdown_tags
from amsrag.ingest.readers import read_text
from amsrag.store.documents import DocumentMeta
from amsrag.text.citations import SECTION_JOIN


def given_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """`--tag` values checked (each once, in order); an InputError names a bad one."""
    return tuple(dict.fromkeys(check_tag(t, f"--tag {t!r}") for t in tags))


def file_meta(source: SourceFile, tags: Sequence[str]) -> DocumentMeta:
    """The metadata of the documents of one file (no title): its modification time and size, `tags` and
    the tags of its front matter when it is Markdown."""
    st = source.path.stat()
    fmt = detect_format(source.path) if source.fmt == "auto" else source.fmt
    own = markdown_tags(read_text(source.path), str(source.path)) if fmt == "markdown" else ()
    return DocumentMeta(None, utc_stamp(datetime.fromtimestamp(st.st_mtime, UTC)), st.st_size, (*tags, *own))


def document_title(passage_title: str) -> str:
    """A document's title from its first passage's (`Doc title › Section` keeps the document part)."""
    return passage_title.split(SECTION_JOIN, 1)[0]
