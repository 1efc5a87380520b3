"""A compared entity as the question writes its name.

The tag head marks entity words one word piece at a time, so its spans often take a lower-case word in ("films
Kraurya", "Badam River both located"), stop inside a name ("Penniless" of "Penniless Hearts") or cut a
parenthesis in two ("Film)" of "The Haunting (1999 Film)"). Names in questions are written capitalised, with
their qualifiers in parentheses or after a comma ("Sadat, Khorramshahr"), so the span is redrawn on the question's
own words: lower-case words dropped at its ends, parentheses completed, and the capitalised words around it taken
in.
"""

from __future__ import annotations

import re

from amsrag.decompose.values import DEMONYMS

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
# lower-case words a name may hold between capitalised ones ("Queen of the Damned", "1 Mile to You")
_INSIDE = frozenset({"of", "the", "to", "de", "la", "le", "du", "del", "von", "van", "in", "on", "a", "an", "for"})
_ENDS = ",?:;"  # punctuation after a word that ends a name


def _named(word: str) -> bool:
    """A word a name is made of: capitalised or a number ("Ice", "1958", "B'Snuker", "Zizek!")."""
    w = word.lstrip("\"'“‘:")
    return bool(w) and (w[0].isupper() or w[0].isdigit())


def _describes(word: str) -> bool:
    """A nationality word after a name describes it ("Leopoldo Torre Nilsson | British film directors")."""
    return word.lower().strip(_ENDS) in DEMONYMS


def _closed(word: str) -> bool:
    """A word after which the name cannot go on ("Khatam," "Be?")."""
    return word.endswith(tuple(_ENDS))


def tidy_name(question: str, start: int, end: int) -> tuple[int, int]:
    """The character span of the name the span `question[start:end]` marks (the span itself when none is found).

    >>> q = "Are both films Kraurya and Penniless Hearts from the same country?"
    >>> [q[slice(*tidy_name(q, q.find(s), q.find(s) + len(s)))] for s in ("films Kraurya", "Penniless")]
    ['Kraurya', 'Penniless Hearts']
    >>> q = "Did the movies The Haunting (1999 Film) and Class (Film), originate from the same country?"
    >>> q[slice(*tidy_name(q, q.find("Film)"), q.find("Film)") + 5))]
    'The Haunting (1999 Film)'
    """
    words = [(m.start(), m.end(), m.group(0)) for m in _TOKEN.finditer(question)]
    inside = [k for k, (a, b, _) in enumerate(words) if a < end and b > start]
    if not inside:
        return start, end
    i, j = inside[0], inside[-1]
    depth = sum(_paren(w) for _, _, w in words[i:j + 1])
    while depth < 0 and i > 0:  # "Film)": back to its "(" and the name before it
        i -= 1
        depth += _paren(words[i][2])
    while depth > 0 and j + 1 < len(words):  # "Wagon Train (": on to its ")"
        j += 1
        depth += _paren(words[j][2])
    if depth != 0:
        return start, end
    # lower-case words at the ends are not the name ("films Kraurya", "Badam River both located")
    while i < j and not _named(words[i][2]) and words[i][2] != "(":
        i += 1
    while j > i and ((not _named(words[j][2]) and words[j][2] != ")") or _describes(words[j][2])):
        j -= 1
    if not _named(words[i][2]) and words[i][2] != "(":
        return start, end
    i, j = _run_on(words, i, j)
    j = _comma_tail(words, j)
    i = _comma_head(words, i)
    a, b = words[i][0], words[j][1]
    while b > a and question[b - 1] in _ENDS:
        b -= 1
    return a, b


def _paren(word: str) -> int:
    return 1 if word == "(" else -1 if word == ")" else 0


def _run_on(words: list[tuple[int, int, str]], i: int, j: int) -> tuple[int, int]:
    """Over the capitalised words (and the lower-case ones between them) before and after the span, and a
    parenthesis that follows it ("Columbia High School (Mississippi)"); never into the question's first word."""
    while not _closed(words[j][2]) and j + 1 < len(words):
        nxt = words[j + 1][2]
        if nxt == "(":
            close = next((k for k in range(j + 2, min(j + 8, len(words))) if words[k][2] == ")"), None)
            if close is None:
                break
            j = close
        elif _named(nxt) and not _describes(nxt):
            j += 1
        elif nxt in _INSIDE and j + 2 < len(words) and _named(words[j + 2][2]):
            j += 2
        else:
            break
    while i > 1:
        before = words[i - 1][2]
        if _closed(before):
            break
        if _named(before) or before == ")":
            i -= 1
        elif before in _INSIDE and i > 2 and _named(words[i - 2][2]) and not _closed(words[i - 2][2]):
            i -= 2
        else:
            break
    return i, j


def _comma_tail(words: list[tuple[int, int, str]], j: int) -> int:
    """"Sadat" of "Sadat, Khorramshahr located": on over the region after the comma, when a lower-case word
    follows it (not a list of names)."""
    while words[j][2].endswith(",") and j + 1 < len(words) and _named(words[j + 1][2]):
        k = j + 1
        while not _closed(words[k][2]) and k + 1 < len(words) and _named(words[k + 1][2]):
            k += 1
        follows = words[k + 1][2] if k + 1 < len(words) else ""
        if not words[k][2].endswith(",") and _named(follows):
            break
        j = k
    return j


def _comma_head(words: list[tuple[int, int, str]], i: int) -> int:
    """"Hormozgan" of "both Mehdiabad, Hormozgan and": back over the place before the comma, when a lower-case
    word or the question's first word comes before that."""
    if i < 2 or not words[i - 1][2].endswith(",") or not _named(words[i - 1][2]):
        return i
    k = i - 1
    while k > 1 and _named(words[k - 1][2]) and not _closed(words[k - 1][2]):
        k -= 1
    before = words[k - 1][2]
    if k == 1 or not _named(before):
        return k
    return i
