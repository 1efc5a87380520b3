"""CMRC 2018 answer metrics: character-level exact match and F1, max over the reference answers.

They follow the official CMRC 2018 evaluation script (`cmrc2018_evaluate.py`): the text is lower-cased and
stripped of punctuation and white space; it is then segmented into units, each CJK character one unit and
each run of other letters/digits one unit (the official script tokenises those runs with NLTK; a run of
letters and digits is what NLTK keeps of them once punctuation is gone); F1 is computed from the longest
common (contiguous) run of units of the prediction and the reference, as the official `find_lcs` does.
EM compares the punctuation-free strings. Punctuation here is every Unicode punctuation or symbol
character (category P* or S*), a superset of the official list.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

_CJK_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F))


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(a <= cp <= b for a, b in _CJK_RANGES)


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"


def normalize_zh(s: str) -> str:
    """Lower-cased, without punctuation, symbols or white space (what EM compares)."""
    return "".join(ch for ch in s.lower() if not ch.isspace() and not _is_punct(ch))


def segments(s: str) -> list[str]:
    """Units for F1: each CJK character alone, each run of other non-punctuation characters together
    (white space and punctuation end a run)."""
    out: list[str] = []
    run = ""
    for ch in s.lower():
        if ch.isspace() or _is_punct(ch):
            if run:
                out.append(run)
                run = ""
        elif is_cjk(ch):
            if run:
                out.append(run)
                run = ""
            out.append(ch)
        else:
            run += ch
    if run:
        out.append(run)
    return out


def longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest contiguous run of units common to `a` and `b`."""
    if not a or not b:
        return 0
    best = 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best = cur[j]
        prev = cur
    return best


def _f1(prediction: str, reference: str) -> float:
    p, r = segments(prediction), segments(reference)
    common = longest_common_run(p, r)
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


def char_f1(prediction: str, answers: Sequence[str]) -> float:
    """CMRC F1 of `prediction`: the best over `answers` (0.0 with none)."""
    return max((_f1(prediction, a) for a in answers), default=0.0)


def char_em(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the prediction equals a reference once both are normalised (`normalize_zh`)."""
    p = normalize_zh(prediction)
    return float(any(p == normalize_zh(a) for a in answers))
