"""Question and passage analysis shared by the evaluator, the rewrite and the sufficiency check.

No model beyond spaCy's small NER: key entities (NER spans, capitalised spans, quoted titles), content
terms (BM25 tokens: stemmed, stop words out), the expected answer type from the wh-word, and which
answer types a passage carries (NER labels, plus year and number patterns NER may miss).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from amsrag.config import BM25Config
from amsrag.indexes.bm25 import BM25Tokenizer
from amsrag.indexes.entities import entity_key, ner_pipeline, ner_routes, title_surfaces
from amsrag.indexes.entities_zh import zh_entities, zh_ner_info

# Expected answer type -> spaCy labels that satisfy it.
ANSWER_TYPES: dict[str, frozenset[str]] = {
    "person": frozenset({"PERSON", "ORG", "NORP"}),
    "date": frozenset({"DATE", "TIME"}),
    "number": frozenset({"CARDINAL", "QUANTITY", "MONEY", "PERCENT", "DATE", "TIME", "ORDINAL"}),
    "place": frozenset({"GPE", "LOC", "FAC"}),
    "org": frozenset({"ORG", "NORP"}),
    "work": frozenset({"WORK_OF_ART", "PRODUCT", "EVENT", "LAW"}),
}
_PLACE_NOUNS = ("city", "country", "state", "town", "county", "region", "province", "island", "river", "continent",
                "capital", "nation", "village", "location", "mountain", "lake")
_ORG_NOUNS = ("company", "band", "team", "organization", "organisation", "university", "club", "party", "group",
              "network", "airline", "school", "college", "label", "newspaper", "magazine", "brand", "agency")
_PERSON_NOUNS = ("actor", "actress", "singer", "player", "author", "writer", "director", "president", "king",
                 "queen", "person", "man", "woman", "musician", "artist", "politician", "composer", "footballer")
_WORK_NOUNS = ("film", "movie", "song", "album", "book", "novel", "show", "series", "game", "play", "opera")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})s?\b")
_NUMBER = re.compile(r"\b\d[\d,.]*\b")
_MONTH = re.compile(r"\b(January|February|March|April|May|June|July|August|September|October|November|December)\b")
# `\b` does not separate a digit from a Han character (both are \w), so Chinese text has patterns of its own
_ZH_DATE = re.compile(r"\d{1,4}\s*年|\d{1,2}\s*月|\d{1,2}\s*日|[一二三四五六七八九十]{1,3}月")
_ZH_NUMBER = re.compile(r"\d")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,80})[\"”]")
_WORD = re.compile(r"[\w][\w'’.\-&]*")
_CONNECTORS = frozenset({"of", "the", "and", "de", "von", "van", "da", "del", "la", "le", "du", "&", "for", "in"})
_WH = frozenset({"who", "whom", "whose", "what", "which", "when", "where", "why", "how", "is", "are", "was", "were",
                 "did", "do", "does", "in", "on", "at", "the", "a", "an", "name", "for", "from", "by", "of", "to",
                 "both", "between", "as", "and", "or", "this", "that", "these", "those", "it", "its"})
# dates and ordinal periods spelled out in a question: what NER's DATE adds to the capitalised spans
_DATE_SPAN = re.compile(
    r"(?<!\w)(?:(?:\d{1,2}(?:st|nd|rd|th)?\s+)?(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|"
    r"july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?\s+(?:\d{1,2},?\s+)?\d{4}"
    r"|\d{1,2}(?:st|nd|rd|th)\s+century|(?:1[0-9]|20)\d{2}s?)(?!\w)", re.I)
_RUN_BREAK = re.compile(r"\s+(?:in|and|for|&)\s+|(?<=[.!?;:,])\s+")  # where two names in running text meet
ENTITY_LABELS = frozenset({"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LAW",
                           "LANGUAGE", "DATE"})


@functools.cache
def tokenizer() -> BM25Tokenizer:
    return BM25Tokenizer(BM25Config.model_validate({}))


_QUESTION_STEMS = frozenset({"what", "who", "whom", "whose", "which", "when", "where", "why", "how", "mani", "much",
                             "doe", "did", "name", "also", "one"})


def content_terms(text: str) -> list[str]:
    """Stemmed content words (BM25's tokens without question words)."""
    return [t for t in tokenizer()(text) if t not in _QUESTION_STEMS]


def answer_type(question: str) -> str:
    """The expected answer type of a question: person|date|number|place|org|work|other."""
    q = " " + " ".join(question.lower().replace("?", " ").split()) + " "
    if re.search(r" how (many|much|long|old|far|tall|big|large|high|often|fast|deep) ", q):
        return "number"
    if re.search(r" (what|which) (year|date|day|month|decade|century|time|period) ", q) or q.startswith(" when ") \
            or " when " in q[:40] or q.endswith(" when "):
        return "date"
    if re.search(r" (who|whom|whose) ", q):
        return "person"
    if q.startswith(" where ") or " where " in q[:40]:
        return "place"
    m = re.search(r" (what|which)( \w+){0,2}? (\w+) ", q)
    if m:
        noun = m.group(3)
        for nouns, kind in ((_PLACE_NOUNS, "place"), (_ORG_NOUNS, "org"), (_PERSON_NOUNS, "person"),
                            (_WORK_NOUNS, "work")):
            if noun.rstrip("s") in nouns or noun in nouns:
                return kind
    return "other"


def sentence_text_for_embedding(title: str, sentence: str) -> str:
    """A sentence is embedded with its passage title, so "He was born in 1950." keeps its subject."""
    return f"{title}. {sentence}" if title else sentence


@dataclass(frozen=True, slots=True)
class QueryInfo:
    text: str
    terms: tuple[str, ...]  # stemmed content terms (unique, in order)
    entities: tuple[str, ...]  # entity keys (normalised surface forms), unique, in order
    surfaces: tuple[str, ...]  # the entities' surface forms as written, aligned with `entities`
    answer_type: str


def _capitalised_spans(text: str) -> list[str]:
    """Runs of capitalised words (with inner connectors such as "of"), skipping a leading wh-/function word."""
    words = [(m.group(), m.start(), m.end()) for m in _WORD.finditer(text)]
    spans: list[str] = []
    run: list[tuple[str, int, int]] = []

    def flush() -> None:
        while run and run[-1][0].lower() in _CONNECTORS:
            run.pop()
        if run:
            spans.append(text[run[0][1] : run[-1][2]])
        run.clear()

    for i, (w, s, e) in enumerate(words):
        cap = w[0].isupper() or (w[0].isdigit() and bool(run))
        if (cap and not (i == 0 and w.lower() in _WH)) or (run and w.lower() in _CONNECTORS):
            run.append((w, s, e))
        else:
            flush()
    flush()
    return spans


def surface_entities(text: str) -> list[str]:
    """Entity-like spans found without a model: capitalised runs and dates spelled out.

    >>> surface_entities("Ada Lovelace met Charles Babbage in June 1833.")
    ['Ada Lovelace', 'Charles Babbage', 'June 1833']
    """
    runs = (part.strip(" .,;:") for span in _capitalised_spans(text) for part in _RUN_BREAK.split(span))
    found = [*(r for r in runs if r and not r[0].isdigit() and r.lower() not in _WH),
             *(m.group() for m in _DATE_SPAN.finditer(text))]
    return list(dict.fromkeys(found))


def query_entities(question: str, titles: Iterable[str] = (), ner: bool = True) -> list[str]:
    """Surface forms of the question's key entities: NER spans, capitalised spans, quoted strings, and
    passage titles (or their aliases) that the question names. Deduplicated by key; longer forms first wins.
    `ner=False`: dates spelled out take NER's place, and spaCy is not loaded (the audit's cold start).

    >>> query_entities("Which came first, the Treaty of Paris or 18 October 1992?", ner=False)
    ['Treaty of Paris', '18 October 1992']
    """
    found: list[str] = []
    if ner:
        doc = ner_pipeline()(question)
        found += [e.text for e in doc.ents if e.label_ in ENTITY_LABELS]
    else:
        found += [m.group() for m in _DATE_SPAN.finditer(question)]
    found += _QUOTED.findall(question)
    found += _capitalised_spans(question)
    low = question.lower()
    for title in titles:
        for surface in title_surfaces(title):
            k = entity_key(surface)
            if len(k) >= 3 and re.search(rf"(?<!\w){re.escape(k)}(?!\w)", low):
                found.append(surface)
    out: dict[str, str] = {}
    for s in sorted(found, key=len, reverse=True):
        k = entity_key(s)
        if len(k) < 2 or k in _WH or any(re.search(rf"(?<!\w){re.escape(k)}(?!\w)", o) for o in out):
            continue  # contained in a longer entity already kept
        out[k] = " ".join(s.split())
    order = sorted(out, key=lambda k: low.find(k) if low.find(k) >= 0 else len(low))
    return [out[k] for k in order]


def analyse_query(question: str, titles: Iterable[str] = ()) -> QueryInfo:
    surfaces = query_entities(question, titles)
    return QueryInfo(question, tuple(dict.fromkeys(content_terms(question))), tuple(entity_key(s) for s in surfaces),
                     tuple(surfaces), answer_type(question))


def mentions(text_lower: str, key: str) -> bool:
    """Whether a normalised entity key occurs in lower-cased text as whole words."""
    return bool(key) and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text_lower) is not None


def entity_coverage(key: str, text_lower: str, text_terms: set[str]) -> float:
    """1 for a whole-phrase mention; else half the share of the entity's content terms present."""
    if mentions(text_lower, key):
        return 1.0
    terms = set(content_terms(key))
    return 0.5 * len(terms & text_terms) / len(terms) if terms else 0.0


def passage_labels(texts: Sequence[str], batch_size: int = 64) -> list[frozenset[str]]:
    """NER labels present in each text, plus DATE / CARDINAL from year, month and number patterns. Texts are
    routed as the graph's passages are (`ner_routes`): a Chinese one gets the labels of `entities_zh` (spaCy's
    names) and the Chinese date and number patterns, a mixed one both, any other spaCy's English NER."""
    english, zh = ner_routes(texts, chinese=True)
    labels: list[set[str]] = [set() for _ in texts]
    docs = ner_pipeline().pipe([texts[i] for i in english], batch_size=batch_size)
    for i, doc in zip(english, docs, strict=True):
        labels[i].update(e.label_ for e in doc.ents)
        if _YEAR.search(texts[i]) or _MONTH.search(texts[i]):
            labels[i].add("DATE")
        if _NUMBER.search(texts[i]):
            labels[i].add("CARDINAL")
    for i in zh:
        labels[i].update(label for _, label in zh_entities(texts[i]))
        if _ZH_DATE.search(texts[i]):
            labels[i].add("DATE")
        if _ZH_NUMBER.search(texts[i]):
            labels[i].add("CARDINAL")
    return [frozenset(found) for found in labels]


def ner_version() -> str:
    """What `passage_labels` output depends on (cache key)."""
    from amsrag.indexes.entities import spacy_info

    info, zh = spacy_info(), zh_ner_info()
    return (f"labels-2|{info['spacy_model']}=={info['spacy_model_version']}|spacy=={info['spacy_version']}"
            f"|{zh['zh_ner']}|jieba=={zh['jieba_version']}")


def type_match(kind: str, labels: frozenset[str]) -> float:
    if kind not in ANSWER_TYPES:
        return 0.0
    return 1.0 if labels & ANSWER_TYPES[kind] else 0.0
