"""Section anchors: an HTML heading's id (or its section's, its permalink's, an `a name` marker's) and a Markdown
heading's GitHub slug go into the passage's metadata beside `section`, and into the citation's url as `#anchor`;
a heading without one gives no anchor, never another heading's. Fixtures: tests/fixtures/documents
(observatories.html, harbour.md, policy-diversions.html)."""

from __future__ import annotations

from pathlib import Path

from amsrag.embed.tokens import TokenCounter
from amsrag.ingest.blocks import document_passages
from amsrag.ingest.documents import read_document
from amsrag.ingest.markdown import HeadingSlugs
from amsrag.ingest.parsers import parse_document
from amsrag.serve.sources import SourceRoots
from amsrag.text.citations import citation_of, fragment

DOCS = Path(__file__).parent / "fixtures" / "documents"


def _anchors_html(path: Path) -> dict[str, str | None]:
    doc = parse_document(path, "html")
    return {p.metadata["section"]: p.metadata.get("anchor")
            for p in document_passages(doc, f"kb/{path.name}", path.name, "html", counter=TokenCounter())}


def test_html_passages_carry_their_headings_anchor() -> None:
    assert _anchors_html(DOCS / "observatories.html") == {
        "": "observatories",  # under the title heading: its id
        "Telescopes": "telescopes",  # the section's id and its permalink
        "Telescopes › Mirror care": None,  # no id of its own; the section's belongs to "Telescopes"
        "Visiting hours › Summer": "summer",
        "Visiting hours › Winter": None,
        "Contact": "contact",  # <a name="contact"> inside the heading
    }
    sphinx = _anchors_html(DOCS / "policy-diversions.html")  # Sphinx: <section id=...><h1>...<a class="headerlink">
    assert set(sphinx.values()) == {"diversions-overriding-a-package-s-version-of-a-file-from-old-packaging-manual"}


def test_html_anchor_rules(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text("""<html><body><main><h1>Title</h1>
<div id="intro"><p>Lead.</p><h2>First</h2><p>a</p><h2>Second</h2><p>b</p></div>
<a id="marker"></a>
<h2>Marked</h2><p>c</p>
<a id="not-empty">words</a><h2>After a link</h2><p>d</p>
<h2><span id="inner">Inner</span></h2><p>e</p>
<h2>Spaced <a href="#bad%20id">¶</a></h2><p>f</p>
</main></body></html>""", encoding="utf-8")
    got = _anchors_html(page)
    assert got["First"] is None  # the div's first heading, but the div's id opens the page at the text before it
    assert got["Second"] is None and got["Marked"] == "marker" and got["After a link"] is None
    assert got["Inner"] == "inner" and got["Spaced"] == "bad id"


def test_markdown_passages_carry_github_slugs() -> None:
    got = [(p.metadata["section"], p.metadata.get("anchor"))
           for p in read_document(DOCS / "harbour.md", "kb/harbour.md", "markdown", counter=TokenCounter())]
    assert got == [("", "harbour-guide"), ("Opening hours", "opening-hours"),
                   ("Fees & Tolls (2025)", "fees--tolls-2025"),
                   ("Fees & Tolls (2025) › Über die Gebühren", "über-die-gebühren"),
                   ("Opening hours", "opening-hours-1"),  # the second heading of that text
                   ("The berth list and moorings", "the-berth-list-and-moorings")]


def test_heading_slugs_follow_github() -> None:
    slugs = HeadingSlugs()
    assert [slugs.slug(h) for h in ("Foo", "Foo", "Foo-1", "Foo", "C++ & Rust!", "snake_case", "  ")] == [
        "foo", "foo-1", "foo-1-1", "foo-2", "c--rust", "snake_case", "--"]


def test_citation_url_carries_the_anchor_and_the_page_first(tmp_path: Path) -> None:
    roots = SourceRoots.parse([f"kb={tmp_path}"])
    html = {"source": "guide.html", "type": "html", "section": "Install", "anchor": "install"}
    assert roots.url("kb/guide.html", html) == "/v1/sources/kb/guide.html#install"
    assert citation_of(html)["anchor"] == "install"  # type: ignore[index]
    assert roots.url("kb/guide.html", {**html, "anchor": "über die"}) == "/v1/sources/kb/guide.html#%C3%BCber%20die"
    assert roots.url("kb/guide.html", {k: v for k, v in html.items() if k != "anchor"}) == \
        "/v1/sources/kb/guide.html"  # no anchor: the file's top, never a guess
    pdf = {"source": "a.pdf", "type": "pdf", "page": 3, "anchor": "x"}
    assert fragment(pdf) == "#page=3" and roots.url("kb/a.pdf", pdf) == "/v1/sources/kb/a.pdf#page=3"
