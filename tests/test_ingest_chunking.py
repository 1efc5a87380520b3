"""Sentence splitting, token-budget chunking with overlap, and Markdown sections."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amsrag.config import ChunkConfig
from amsrag.embed.tokens import TokenCounter
from amsrag.ingest import chunk_text, iter_passages
from amsrag.ingest.markdown import parse_markdown, strip_inline
from amsrag.text.sentences import split_sentences


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()


# ---------------------------------------------------------------- sentences


def test_abbreviations_initials_and_decimals_do_not_split() -> None:
    text = (
        "Mr. Smith paid $3.50 in Washington, D.C. on Monday. He met Dr. Jones, e.g. at noon, in the U.S. "
        'Senate. J. K. Rowling wrote 7 books (approx. 4,100 pages)! Did it work? "Yes." It did... Then stop.'
    )
    assert split_sentences(text) == [
        "Mr. Smith paid $3.50 in Washington, D.C. on Monday.",
        "He met Dr. Jones, e.g. at noon, in the U.S. Senate.",
        "J. K. Rowling wrote 7 books (approx. 4,100 pages)!",
        "Did it work?",
        '"Yes."',
        "It did...",
        "Then stop.",
    ]


def test_blank_lines_are_boundaries_and_lowercase_continues() -> None:
    text = "First para without a stop\nstill first.\n\nSecond para. it continues here.\n\n\n  Third."
    assert split_sentences(text) == [
        "First para without a stop\nstill first.",
        "Second para. it continues here.",
        "Third.",
    ]


def test_full_width_stops() -> None:
    assert split_sentences("東京は大きい。大阪も！ Then English.") == ["東京は大きい。", "大阪も！", "Then English."]


def test_no_sentences_in_blank_text() -> None:
    assert split_sentences("  \n\n\t ") == []
    assert chunk_text("   ") == []


# ---------------------------------------------------------------- chunks


def sentences_text(n: int) -> str:
    return " ".join(f"Sentence {i} tells about item {i * 3} in the catalogue of things." for i in range(n))


def test_budget_respected_and_overlap_present(counter: TokenCounter) -> None:
    config = ChunkConfig(max_tokens=60, overlap_tokens=20)
    chunks = chunk_text(sentences_text(40), config, counter)
    assert len(chunks) > 5
    assert all(counter.count(c) <= 60 for c in chunks)
    for prev, nxt in itertools.pairwise(chunks):
        prev_sents, next_sents = split_sentences(prev), split_sentences(nxt)
        shared = [s for s in next_sents if s in prev_sents]
        assert shared and next_sents[: len(shared)] == shared == prev_sents[-len(shared) :]
        assert counter.count(" ".join(shared)) <= 20
    # every sentence is in some chunk, in order
    seen = [s for c in chunks for s in split_sentences(c)]
    assert list(dict.fromkeys(seen)) == split_sentences(sentences_text(40))


def test_no_overlap_when_zero(counter: TokenCounter) -> None:
    chunks = chunk_text(sentences_text(30), ChunkConfig(max_tokens=50, overlap_tokens=0), counter)
    sents = [s for c in chunks for s in split_sentences(c)]
    assert sents == split_sentences(sentences_text(30))


def test_short_text_is_one_chunk(counter: TokenCounter) -> None:
    assert chunk_text("One. Two. Three.", ChunkConfig(), counter) == ["One. Two. Three."]


def test_long_sentence_is_split_by_words(counter: TokenCounter) -> None:
    long_sentence = " ".join(f"word{i}" for i in range(300)) + "."
    text = f"Short start. {long_sentence} Closing end."
    config = ChunkConfig(max_tokens=40, overlap_tokens=10)
    chunks = chunk_text(text, config, counter)
    assert all(counter.count(c) <= 40 for c in chunks)
    words = [w for c in chunks for w in c.split()]
    assert [w for w in dict.fromkeys(words)] == text.split()
    assert all(not c.startswith("d") for c in chunks)  # cut between words, never inside "word12"


def test_giant_word_is_cut_at_token_boundaries(counter: TokenCounter) -> None:
    giant = "a," * 700  # 1,400 tokens, no spaces; beyond the tokenizer's 512 truncation too
    chunks = chunk_text(f"Before. {giant} After.", ChunkConfig(max_tokens=100, overlap_tokens=0), counter)
    assert all(counter.count(c) <= 100 for c in chunks)
    assert "".join(c for c in chunks if c.startswith("a")) == giant.strip()


def test_counter_counts_past_truncation(counter: TokenCounter) -> None:
    assert counter.count("word " * 700) == 700
    assert counter.counts([]) == []


@settings(max_examples=25, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(["alpha", "beta.", "Gamma", "delta!", "e.g.", "Mr.", "3.5", "naïve", "x,y", "\n\n", "Ω"]),
        min_size=1,
        max_size=400,
    ),
    max_tokens=st.integers(16, 80),
    overlap=st.integers(0, 30),
)
def test_chunks_fit_and_cover_every_word(words: list[str], max_tokens: int, overlap: int) -> None:
    counter = TokenCounter()
    text = " ".join(words)
    chunks = chunk_text(text, ChunkConfig(max_tokens=max_tokens, overlap_tokens=overlap), counter)
    assert all(c and counter.count(c) <= max_tokens for c in chunks)
    covered = "".join(text.split())
    assert all("".join(c.split()) in covered for c in chunks)
    if text.strip():
        assert text.split()[0] in chunks[0] and text.split()[-1] in chunks[-1]


# ---------------------------------------------------------------- markdown


MARKDOWN = """---
layout: post
---
Intro with a [link](https://example.com) and an ![logo](logo.png) image.

# Field *Guide*

Welcome to the **guide** and <span class="x">its</span> __notes__ &amp; tips, see <https://a.example>.
<!-- a comment
over lines -->

Birds
=====

- Sparrows are small.
- Crows are [clever][1].

[1]: https://example.com/crows

| Bird | Size |
|------|------|
| Wren | tiny |

## Code `sample`

```python
def snake_case_name(x):
    return x * 2  # *not* emphasis
```

***
"""


def test_markdown_sections_and_cleaning() -> None:
    title, sections = parse_markdown(MARKDOWN, "fallback")
    assert title == "Field Guide"
    by_heading = {s.heading: s.text for s in sections}
    assert by_heading[""] == "Intro with a link and an  image."
    assert by_heading["Field Guide"] == "Welcome to the guide and its notes & tips, see https://a.example."
    birds = re.sub(r"\n{2,}", "\n\n", by_heading["Birds"])  # dropped lines (link definition, table rule) leave gaps
    assert birds == "Sparrows are small.\nCrows are clever.\n\nBird | Size\n\nWren | tiny"
    assert by_heading["Code sample"] == "def snake_case_name(x):\n    return x * 2  # *not* emphasis"


def test_markdown_title_falls_back_to_file_stem() -> None:
    title, sections = parse_markdown("## Only second level\n\nText.", "notes")
    assert title == "notes"
    assert [(s.heading, s.text) for s in sections] == [("", ""), ("Only second level", "Text.")]


def test_strip_inline() -> None:
    assert strip_inline("a **b** *c* _d_ ~~e~~ `f_g` snake_case x*y*z") == "a b c d e f_g snake_case x*y*z"
    assert strip_inline("[t](u) ![i](j) <br/> &lt;tag&gt;") == "t   <tag>"


def test_markdown_passages(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(MARKDOWN, encoding="utf-8")
    got = list(iter_passages([path]))
    assert [(p.id, p.title, p.metadata["section"]) for p in got] == [
        ("guide.md#0", "Field Guide", ""),
        ("guide.md#1", "Field Guide", ""),
        ("guide.md#2", "Field Guide › Birds", "Birds"),
        ("guide.md#3", "Field Guide › Code sample", "Birds › Code sample"),  # the heading path
    ]
    assert all(p.doc_id == "guide.md" and p.metadata["source"] == "guide.md" for p in got)
    assert [p.metadata["chunk"] for p in got] == [0, 1, 2, 3]


def test_markdown_long_section_is_chunked(tmp_path: Path, counter: TokenCounter) -> None:
    path = tmp_path / "long.md"
    path.write_text("# Doc\n\n## Part\n\n" + sentences_text(50), encoding="utf-8")
    got = list(iter_passages([path], chunking=ChunkConfig(max_tokens=64, overlap_tokens=16)))
    assert len(got) > 4
    assert all(p.title == "Doc › Part" and counter.count(p.text) <= 64 for p in got)
    assert [p.id for p in got] == [f"long.md#{n}" for n in range(len(got))]


def test_plain_text_title_is_stem(tmp_path: Path) -> None:
    path = tmp_path / "field.notes.txt"
    path.write_text("Some notes. More notes.", encoding="utf-8")
    [p] = list(iter_passages([path]))
    assert (p.title, p.metadata) == ("field.notes", {"source": "field.notes.txt", "type": "text", "chunk": 0,
                                                     "section": ""})


def test_windows_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "crlf.md"
    path.write_bytes(b"# Title\r\n\r\nFirst para.\r\n\r\n## Sec\r\n\r\nSecond para.\r\n")
    got = list(iter_passages([path]))
    assert [(p.title, p.text) for p in got] == [("Title", "First para."), ("Title › Sec", "Second para.")]


# ---------------------------------------------------------------- bounded windows (issue 39)


class _RecordingTokenizer:
    """The real tokenizer, recording the most characters any one call was given."""

    def __init__(self, tokenizer: object) -> None:
        self._tokenizer = tokenizer
        self.most_chars = 0

    def encode_batch(self, texts: list[str], **kwargs: object) -> object:
        self.most_chars = max(self.most_chars, sum(len(t) for t in texts))
        return self._tokenizer.encode_batch(texts, **kwargs)  # type: ignore[attr-defined]

    def encode(self, text: str, **kwargs: object) -> object:
        self.most_chars = max(self.most_chars, len(text))
        return self._tokenizer.encode(text, **kwargs)  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", ["one line of words", "one word", "one sentence per line"])
def test_tokenizer_sees_bounded_windows_of_a_long_text(shape: str) -> None:
    """A 1 MB text without full stops or newlines was tokenized as one sentence (a 20 MB line took 6 GB)."""
    from amsrag.embed import load_tokenizer
    from amsrag.ingest.chunking import MAX_CHARS_PER_TOKEN, WINDOW_CHARS

    words = [f"w{i % 9973}x" for i in range(200_000)]
    text = {"one line of words": " ".join(words), "one word": "".join(words),
            "one sentence per line": "\n".join(f"Word {w} here." for w in words[:60_000])}[shape]
    assert len(text) > 1_000_000
    recording = _RecordingTokenizer(load_tokenizer(512))
    config = ChunkConfig(max_tokens=64, overlap_tokens=8)
    chunks = chunk_text(text, config, TokenCounter(recording))
    assert recording.most_chars <= WINDOW_CHARS
    assert max(map(len, chunks)) <= 64 * MAX_CHARS_PER_TOKEN
    counter = TokenCounter()
    assert max(counter.counts(chunks[:200] + chunks[-200:])) <= 64
    assert chunks[0] == text[: len(chunks[0])] and text.endswith(chunks[-1])
