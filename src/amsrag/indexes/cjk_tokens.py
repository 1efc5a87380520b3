"""Chinese tokens for BM25: jieba words (stop words out) and overlapping character bigrams.

BM25's English tokenizer keeps a run of Han characters as one "word" ("TARG 使用什么信号来决定是否需要检索"
→ one token), so a Chinese question matches nothing. Here a Han run is segmented by jieba (precise mode,
its bundled dictionary, HMM for unknown words) and its character bigrams are added, as Lucene's CJK
analyzer does: bigrams find what segmentation split differently in the question and the passage. Bigrams
carry a `BIGRAM_MARK` prefix so they never collide with two-character words. jieba loads its dictionary
(~1 s) the first time a Han run is seen; corpora without Chinese never pay for it.
"""

from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

CjkMode = Literal["jieba+bigram", "jieba", "bigram", "none"]
BIGRAM_MARK = "\u2e80"  # a CJK radical-supplement code point: never produced by jieba for real text
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]+")
_SEGMENTER_LOCK = threading.Lock()
_segmenter: Any = None


@lru_cache(maxsize=1)
def chinese_stopwords() -> frozenset[str]:
    path = resources.files("amsrag") / "data" / "lang" / "zh_stopwords.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(w.strip() for w in lines if w.strip() and not w.startswith("#"))


def _jieba() -> Any:
    global _segmenter
    with _SEGMENTER_LOCK:
        if _segmenter is None:
            import jieba

            jieba.setLogLevel(logging.WARNING)
            tokenizer = jieba.Tokenizer()
            tokenizer.initialize()
            _segmenter = tokenizer
        return _segmenter


def segment(run: str) -> list[str]:
    """jieba's words of a Han run (precise mode, HMM on)."""
    return [w for w in _jieba().lcut(run, HMM=True) if w.strip()]


def han_runs(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _HAN_RUN.finditer(text)]


def han_tokens(run: str, mode: CjkMode) -> list[str]:
    """The BM25 tokens of one run of Han characters."""
    if mode == "none":
        return [run] if len(run) >= 2 else []
    tokens: list[str] = []
    if mode in ("jieba+bigram", "jieba"):
        stop = chinese_stopwords()
        tokens.extend(w for w in segment(run) if w not in stop)
    if mode in ("jieba+bigram", "bigram"):
        if len(run) == 1 and mode == "bigram":
            tokens.append(run)
        tokens.extend(BIGRAM_MARK + run[i:i + 2] for i in range(len(run) - 1))
    return tokens
