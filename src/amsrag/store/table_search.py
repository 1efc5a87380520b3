"""Table retrieval: which stored tables a question is about, by BM25 over what each table says.

A table's document is its profile's description (title, column names with types and units, the
categorical values), its title and column names once more (they name what the table is about, so
they weigh double), and up to `catalog.SEARCH_VALUES` of its distinct cell values (the entities and
numbers a question mentions), each value and column name also as the bigrams of its tokens (so
"usl a-league" in a question matches that cell better than the words apart). Tokens are the
passage BM25's (lower case, English stop words removed, Snowball stems) plus those bigrams, the
question's likewise; scores are `indexes.bm25.BM25Index`'s (lucene, k1 1.5, b 1.0: a table's
length is normalised fully, or large tables win every question). Both table stores build one
`TableSearch` lazily from their catalog and build it again when the catalog changes.

On WikiTableQuestions (benchmarks/table_search.py, 300 tables) the bigrams and b = 1.0 raise top-1
from 53.6 % (plain unigrams, b 0.75) to 56.7 %.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from itertools import pairwise

from amsrag.config import BM25Config
from amsrag.errors import InputError
from amsrag.indexes.bm25 import BM25Index, BM25Tokenizer
from amsrag.tables.base import TableHit
from amsrag.tables.table import TableProfile
from amsrag.topk import topk_indices
from amsrag.types import PassageRow

TITLE_WEIGHT = 2  # title and column-name tokens count this many times
MAX_K = 1000
DEFAULT_CONFIG = BM25Config(b=1.0)


def bigrams(tokens: Sequence[str]) -> list[str]:
    return [f"{a}_{b}" for a, b in pairwise(tokens)]


class QuestionTokenizer:
    """The passage BM25 tokenizer's tokens of a question, then their bigrams."""

    def __init__(self, base: BM25Tokenizer) -> None:
        self.base = base

    def __call__(self, text: str) -> list[str]:
        tokens = self.base(text)
        return tokens + bigrams(tokens)


def table_tokens(tokenizer: BM25Tokenizer, profile: TableProfile, values: Sequence[str]) -> list[str]:
    """The BM25 tokens of one table's document (see the module docstring)."""
    names = [c.name for c in profile.columns]
    tokens = tokenizer(f"{profile.title}\n" + "\n".join(names)) * TITLE_WEIGHT
    tokens += tokenizer(profile.description())
    for text in (*values, *names):
        cell = tokenizer(text)
        tokens += cell
        tokens += bigrams(cell)
    return tokens


class TableSearch:
    """BM25 over a fixed set of tables; build a new one when the set changes."""

    def __init__(self, docs: Sequence[tuple[TableProfile, Sequence[str]]], config: BM25Config | None = None,
                 tokens: Sequence[list[str]] | None = None) -> None:
        """`docs`: (profile, search values) per table; `tokens`: their documents' tokens when known
        (aligned with `docs`, whose values are then not read)."""
        self.config = config or DEFAULT_CONFIG
        self.tokenizer = BM25Tokenizer(self.config)
        self.profiles = [p for p, _ in docs]
        rows = [PassageRow(i, p.table_id, "", "") for i, p in enumerate(self.profiles)]
        if tokens is None:
            tokens = [table_tokens(self.tokenizer, p, values) for p, values in docs]
        elif len(tokens) != len(docs):
            raise ValueError(f"{len(tokens)} token lists for {len(docs)} tables")
        self.tokens = list(tokens)
        self.index = BM25Index.empty(self.config).updated(rows, [], tokens_of=tokens)
        self.index.tokenizer = QuestionTokenizer(self.tokenizer)  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self.profiles)

    def search(self, question: str, k: int = 5) -> list[TableHit]:
        """The `k` best tables for `question`, best first (ties: table id); tables scoring 0 are left out."""
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise InputError(f"k must be a whole number from 1 to {MAX_K}, got {k!r}")
        if not isinstance(question, str) or not question.strip():
            raise InputError("the question is empty")
        if not self.profiles:
            return []
        scores = self.index.scores(question)  # aligned with index.rows = 0..n-1 (all live)
        ids = [self.profiles[int(r)].table_id for r in self.index.rows]
        best = topk_indices(scores, k, ids.__getitem__, min_score=0.0)
        return [TableHit(ids[i], float(scores[i]), self.profiles[int(self.index.rows[i])]) for i in best]


class CatalogSearch:
    """A store's `TableSearch`, built again when the store's catalog generation changes; each table's
    tokens are kept by (table id, content hash), so a rebuild reads and tokenises only new tables."""

    def __init__(self, config: BM25Config | None = None) -> None:
        self.config = config or DEFAULT_CONFIG
        self._lock = threading.Lock()
        self._current: tuple[int, TableSearch] | None = None
        self._tokens: dict[tuple[str, str], list[str]] = {}

    def searcher(self, generation: int, entries: Callable[[], list[tuple[str, str, TableProfile]]],
                 values_of: Callable[[list[str]], dict[str, list[str]]]) -> TableSearch:
        """The search at `generation`: cached, or built from `entries()` ((table id, content hash,
        profile) of every stored table) and `values_of(table ids)` (the search values of those not cached)."""
        current = self._current
        if current is not None and current[0] == generation:
            return current[1]
        with self._lock:
            current = self._current
            if current is not None and current[0] == generation:
                return current[1]
            listed = entries()
            missing = [tid for tid, h, _ in listed if (tid, h) not in self._tokens]
            values = values_of(missing) if missing else {}
            tokenizer = BM25Tokenizer(self.config)
            tokens: dict[tuple[str, str], list[str]] = {}
            docs: list[tuple[TableProfile, Sequence[str]]] = []
            kept: list[list[str]] = []
            for tid, h, profile in listed:
                known = self._tokens.get((tid, h))
                if known is None:
                    if tid not in values:
                        continue  # deleted between the two reads: the next search rebuilds
                    known = table_tokens(tokenizer, profile, values[tid])
                tokens[(tid, h)] = known
                docs.append((profile, ()))
                kept.append(known)
            search = TableSearch(docs, self.config, kept)
            self._tokens = tokens  # only the stored tables' tokens stay cached
            self._current = (generation, search)
            return search

    def clear(self) -> None:
        with self._lock:
            self._current = None
            self._tokens = {}
