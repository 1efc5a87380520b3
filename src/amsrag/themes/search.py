"""Global search over the theme model: questions about the corpus as a whole, answered from its themes.

A question is read in one of two ways (`read_question`): it asks about the whole corpus ("what topics does
it cover", "summarise the corpus") when nothing but such wording is left after dropping stop words and the
vocabulary of that wording (`META_WORDS`); else the words left are its focus ("recurring themes about
earthquakes" -> earthquakes), and the themes are ranked by the cosine of the query vector with their
centroid blended with the share of focus words among their terms, and cut at the largest drop in score.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from amsrag.errors import InputError
from amsrag.indexes.theme_terms import stem, tokenize
from amsrag.indexes.themes import Themes
from amsrag.text.citations import citation_label

Mode = Literal["corpus", "related"]
OVERLAP_WEIGHT = 0.3  # score = (1 - w) * cosine + w * term overlap
MAP_ANSWERS = "{map_answers}"  # the placeholder of the reduce template (filled with str.replace)
NONE_ANSWER = "NONE"

# Words that only say "tell me about the corpus' themes": what is left after them is the question's focus.
_META = [
    "topic", "topics", "theme", "themes", "subject", "subjects", "issue", "issues", "area", "areas", "field",
    "fields", "matter", "matters", "kind", "kinds", "sort", "sorts", "type", "types", "category", "categories",
    "main", "major", "key", "recurring", "recurrent", "common", "central", "core", "principal", "prominent",
    "dominant", "frequent", "general", "broad", "overall", "big", "picture", "primary", "important", "various",
    "different", "corpus", "collection", "collections", "document", "documents", "text", "texts", "passage",
    "passages", "data", "dataset", "datasets", "content", "contents", "article", "articles", "file", "files",
    "page", "pages", "source", "sources", "record", "records", "material", "materials", "library", "index",
    "indexed", "knowledge", "base", "information", "everything", "entire", "whole", "cover", "covers",
    "covered", "covering", "discuss", "discusses", "discussed", "discussing", "mention", "mentions",
    "mentioned", "address", "addresses", "addressed", "contain", "contains", "contained", "include", "includes",
    "included", "treat", "treats", "treated", "deal", "deals", "dealt", "talk", "talks", "talked", "appear",
    "appears", "appearing", "come", "comes", "present", "presents", "exist", "exists", "span", "spans",
    "summarise", "summarize", "summarised", "summarized", "summary", "summaries", "overview", "outline",
    "describe", "description", "list", "give", "tell", "show", "explain", "recap", "high", "level", "gist",
    "mostly", "mainly", "primarily", "largely", "chiefly", "about", "related", "relate", "relating",
    "regarding", "concerning", "involving", "around", "surrounding", "connected", "pertaining", "do", "does",
    "did", "doing", "done", "is", "are", "was", "were", "be", "been", "being", "am", "can", "could", "would",
    "should", "may", "might", "will", "shall", "has", "have", "had", "get", "gets", "got", "please", "know",
    "want", "need", "like", "find", "anything", "things", "thing", "stuff", "say", "says", "said", "mention",
    "mentions", "mentioned",
]
META_WORDS: frozenset[str] = frozenset(stem(_META))


@dataclass(frozen=True, slots=True)
class SelectedTheme:
    id: int
    label_terms: tuple[str, ...]
    size: int
    share: float  # of the corpus' passages
    representatives: tuple[str, ...]
    score: float  # corpus mode: the share; related mode: the blended score
    cosine: float  # query vector . centroid
    term_overlap: float  # share of the focus words among the theme's terms (0 in corpus mode)


@dataclass(frozen=True, slots=True)
class GlobalResult:
    question: str
    mode: Mode
    focus_terms: tuple[str, ...]  # the words the question is about (empty in corpus mode)
    themes: tuple[SelectedTheme, ...]
    selection: str  # how the themes were selected, in words
    n_themes: int  # themes of the corpus
    n_passages: int  # passages of the corpus
    n_selected_passages: int  # passages in the selected themes


class HasText(Protocol):
    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...


def read_question(question: str) -> tuple[Mode, tuple[str, ...]]:
    """("corpus", ()) for a question about the whole corpus, else ("related", its focus words)."""
    words = tokenize(question)
    focus = tuple(w for w, s in zip(words, stem(words), strict=True) if s not in META_WORDS)
    return ("related", tuple(dict.fromkeys(focus))) if focus else ("corpus", ())


def looks_global(question: str) -> bool:
    """A cheap test for the router: the question speaks of topics/themes/subjects or asks for a summary or
    overview of the corpus (it does not tell the two modes apart; `read_question` does)."""
    q = question.lower()
    return bool(re.search(r"\b(topics?|themes?|subjects?|summari[sz]e|summary|overview|gist)\b", q))


def _theme(themes: Themes, t: int, score: float, cosine: float, overlap: float) -> SelectedTheme:
    th = themes.theme(t)
    n = max(themes.n_passages, 1)
    return SelectedTheme(t, th.label_terms, th.size, th.size / n, th.representatives, score, cosine, overlap)


def _overlap(themes: Themes, t: int, focus_stems: Sequence[str]) -> float:
    """Per focus word 1 when a label term has its stem, 0.5 when a lower-ranked kept term has, else 0; mean."""
    ranked = [w for w, _ in themes.terms[t]]
    n = themes.config.label_terms
    label, rest = set(stem(ranked[:n])), set(stem(ranked[n:]))
    return sum(1.0 if s in label else 0.5 if s in rest else 0.0 for s in focus_stems) / len(focus_stems)


def _cut(scores: np.ndarray, k: int) -> int:
    """How many of the descending `scores` to keep (1..k): up to the largest drop among the first k + 1."""
    m = min(k + 1, len(scores))
    if m <= 1:
        return m
    gaps = scores[: m - 1] - scores[1:m]
    return int(np.argmax(gaps)) + 1


def global_search(question: str, query_vector: np.ndarray, themes: Themes, k: int = 5) -> GlobalResult:
    """The themes that answer a global question: all of them by size (corpus mode), or those related to the
    question's focus, at most `k`, cut where the score drops (related mode)."""
    mode, focus = read_question(question)
    live = [t for t in range(themes.k) if themes.sizes[t] > 0]
    q = np.asarray(query_vector, dtype=np.float32).ravel()
    if themes.k and q.shape[0] != themes.dim:
        raise InputError(f"query vector of dimension {q.shape[0]}, the themes' centroids have {themes.dim}")
    q = q / max(float(np.linalg.norm(q)), 1e-12)
    cos = themes.centroids @ q if themes.k else np.zeros(0, np.float32)
    if not live:
        why = "the corpus has no themes" + (f" (fewer than {themes.config.min_passages} passages)"
                                            if themes.n_passages < themes.config.min_passages else "")
        return GlobalResult(question, mode, focus, (), why, themes.k, themes.n_passages, 0)
    if mode == "corpus":
        order = sorted(live, key=lambda t: (-int(themes.sizes[t]), t))
        n = max(themes.n_passages, 1)
        chosen = tuple(_theme(themes, t, int(themes.sizes[t]) / n, float(cos[t]), 0.0) for t in order)
        how = "every theme, largest first (the question asks about the whole corpus)"
    else:
        stems = stem(focus)
        overlap = np.asarray([_overlap(themes, t, stems) for t in live])
        scores = (1 - OVERLAP_WEIGHT) * cos[live] + OVERLAP_WEIGHT * overlap
        order_idx = sorted(range(len(live)), key=lambda i: (-float(scores[i]), live[i]))
        ranked = np.asarray([scores[i] for i in order_idx])
        keep = _cut(ranked, k)
        chosen = tuple(_theme(themes, live[i], float(scores[i]), float(cos[live[i]]), float(overlap[i]))
                       for i in order_idx[:keep])
        how = (f"themes related to {' '.join(focus)!r}: {OVERLAP_WEIGHT:.0%} term overlap + "
               f"{1 - OVERLAP_WEIGHT:.0%} centroid cosine, the top {keep} of {len(live)} (cut at the largest "
               f"score drop among the first {min(k + 1, len(live))})")
    return GlobalResult(question, mode, focus, chosen, how, themes.k, themes.n_passages,
                        sum(t.size for t in chosen))


def _fmt_share(share: float) -> str:
    return f"{share:.1%}" if share >= 0.001 else "<0.1%"


def theme_name(representatives: Sequence[HasText]) -> tuple[str, str]:
    """A theme named as a person would: the heading of its most representative passage (the last step of its
    section path, else its title), and where that passage comes from (its file and page, when known). Empty
    when the passages have neither."""
    for p in representatives:
        meta = getattr(p, "metadata", None) or {}
        section = meta.get("section") if isinstance(meta.get("section"), str) else ""
        heading = (section or p.title or "").split(" › ")[-1].strip()
        source = citation_label({k: v for k, v in meta.items() if k != "section"}) if meta else ""
        if heading:
            return heading, source
    return "", ""


def _join(names: Sequence[str]) -> str:
    quoted = [f"“{n}”" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def compose_answer(result: GlobalResult, max_listed: int = 10,
                   passages_by_id: Mapping[str, HasText] | None = None) -> tuple[str, tuple[str, ...]]:
    """An extractive answer over the selected themes, citing each theme's representative passages as [n] (n
    counting over the returned citation ids). With the passages (`passages_by_id`), each theme is named by its
    representative passage's heading and file, and the answer opens with a sentence naming the largest themes;
    each line keeps the theme's key terms, size and share."""
    if not result.themes:
        return (f"No themes to report: {result.selection}.", ())
    by_id = passages_by_id or {}
    citations: list[str] = []
    lines: list[str] = []
    names: list[str] = []
    for i, t in enumerate(result.themes[:max_listed], 1):
        marks = []
        for pid in t.representatives:
            if pid not in citations:
                citations.append(pid)
            marks.append(f"[{citations.index(pid) + 1}]")
        name, source = theme_name([by_id[pid] for pid in t.representatives if pid in by_id])
        terms = ", ".join(t.label_terms)
        size = f"{t.size} passages ({_fmt_share(t.share)})"
        if name:
            names.append(name)
            where = f" ({source})" if source else ""
            lines.append(f"{i}. {name}{where} — {terms}; {size} {''.join(marks)}")
        else:
            lines.append(f"{i}. {terms} — {size} {''.join(marks)}")
    rest = result.themes[max_listed:]
    if rest:
        lines.append(f"… and {len(rest)} smaller themes ({sum(t.size for t in rest)} passages).")
    if result.mode == "corpus":
        head = f"The corpus of {result.n_passages} passages falls into {result.n_themes} themes"
        head += f", the largest about {_join(names[:3])}:" if names else (":" if not rest else "; the largest:")
    else:
        about = " ".join(result.focus_terms)
        n = len(result.themes)
        head = (f"{n} of the corpus' {result.n_themes} themes {'relates' if n == 1 else 'relate'} to {about!r} "
                f"({result.n_selected_passages} passages)" + (f", chiefly {_join(names[:3])}:" if names else ":"))
    return head + "\n" + "\n".join(lines), tuple(citations)


def _passage_block(n: int, p: HasText, max_chars: int) -> str:
    text = " ".join(p.text.split())
    if len(text) > max_chars:
        text = text[:max_chars].rsplit(" ", 1)[0] + " …"
    return f"[{n}] {p.title}: {text}" if p.title else f"[{n}] {text}"


def map_reduce_prompts(question: str, result: GlobalResult, passages_by_id: Mapping[str, HasText],
                       max_chars: int = 1200) -> tuple[list[str], str]:
    """GraphRAG's global-search shape: one map prompt per selected theme over its representative passages
    (each passage cut to `max_chars` characters; ids missing from `passages_by_id` are skipped), and a reduce
    template whose `MAP_ANSWERS` placeholder takes the map answers (fill it with `str.replace`)."""
    maps = []
    for i, t in enumerate(result.themes, 1):
        blocks = [_passage_block(j, passages_by_id[pid], max_chars)
                  for j, pid in enumerate((p for p in t.representatives if p in passages_by_id), 1)]
        maps.append(
            "You are given passages that represent one theme of a document collection.\n"
            f"Theme {i}: key terms {', '.join(t.label_terms)}; {t.size} passages ({_fmt_share(t.share)} of the "
            "collection).\n\nPassages:\n" + "\n".join(blocks) + "\n\n"
            f"Question: {question}\n"
            "Write the points of this theme that help answer the question, as short bullet points, each citing "
            f"its passage number in brackets, e.g. [1]. If nothing here bears on the question, reply {NONE_ANSWER}."
        )
    reduce_template = (
        f"A document collection of {result.n_passages} passages has {result.n_themes} themes. Notes were taken "
        f"on {len(result.themes)} of them for the question below.\n\nQuestion: {question}\n\nNotes by theme:\n"
        f"{MAP_ANSWERS}\n\n"
        "Answer the question by combining the notes: name the themes that matter, say what each contributes "
        "and how large it is, and keep the theme numbers of the notes you use, e.g. (theme 2). Do not add facts "
        "that are not in the notes."
    )
    return maps, reduce_template


def map_reduce(question: str, result: GlobalResult, passages_by_id: Mapping[str, HasText],
               complete: Callable[[str], str], max_chars: int = 1200) -> str:
    """Run `map_reduce_prompts` with a completion callable: every map prompt, then the reduce prompt over the
    map answers that are not NONE (none left: a fixed answer, without a reduce call)."""
    maps, template = map_reduce_prompts(question, result, passages_by_id, max_chars)
    notes = []
    for i, (prompt, t) in enumerate(zip(maps, result.themes, strict=True), 1):
        answer = complete(prompt).strip()
        if answer and answer.strip(" .").upper() != NONE_ANSWER:
            notes.append(f"Theme {i} ({', '.join(t.label_terms[:4])}; {t.size} passages):\n{answer}")
    if not notes:
        return "No theme of the collection bears on the question."
    return complete(template.replace(MAP_ANSWERS, "\n\n".join(notes)))
