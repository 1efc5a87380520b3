"""Chinese named entities, offline: jieba part-of-speech tags, joined into names, plus 《…》 titles.

jieba's tagger (its dictionary and HMM ship inside the package) marks proper nouns: `nr*` persons, `ns*`
places, `nt` organisations (its `nz`, other proper nouns, is mostly technical terms: used only as the head of
a joined name). On its own it cuts a transliterated name at the interpunct ("安雅", "·", "罗素法") and a
named organisation or place into its parts ("巴塞罗那", "足球", "俱乐部"), so a few rules join the parts back:

- a name run around "·" (person tokens, or one short token on either side) is one person;
- a proper noun followed by up to three common nouns ending in an organisation word ("俱乐部", "大学",
  "公司", ...) is an organisation, ending in a place word ("街道", "省", "河", ...) a place;
- a work title in 《…》 or 〈…〉 is a work of art (books, films, games, songs);
- a capitalised run of Latin-script words ("Google Earth", "POPSICLE") is a product-or-organisation name
  (PRODUCT): jieba tags every Latin word alike.

Labels are spaCy's (PERSON, GPE, ORG, PRODUCT, WORK_OF_ART), so a caller's label filter means the same in
both languages. Output is deterministic (the dictionary is fixed; no sampling).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Iterable, Sequence
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jieba.posseg import POSTokenizer

ZH_NER_VERSION = "jieba-posseg-rules-1"  # bump when the rules below change what `zh_entities` finds
HAN_SHARE = 0.3  # a text whose non-space characters are at least this share Han is Chinese
LATIN_SHARE = 0.3  # ... and if also at least this share Latin letters, it is mixed (both NERs run)

# Han ideographs: the unified blocks, extension A, compatibility ideographs, and the supplementary planes' blocks
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
_SPACES = re.compile(r"\s+")
_WORK_TITLE = re.compile(r"《([^《》\n]{1,40})》|〈([^〈〉\n]{1,40})〉")
_DOTS = frozenset("·・•‧")
# a capitalised Latin-script name inside Chinese text ("Google Earth", "Boost C++", "POPSICLE")
_LATIN_PART = r"[A-Za-z0-9\u00c0-\u024f+#&'’-]"
_LATIN_NAME = re.compile(rf"(?<!{_LATIN_PART})[A-Z\u00c0-\u00de]{_LATIN_PART}*(?: [A-Z0-9]{_LATIN_PART}*)*")

# jieba tag -> spaCy label. Not `nz` ("other proper noun"): on CMRC text it is mostly technical terms (甲烷,
# 汉字, 普通); leaving it out lifts precision on the gold sentences from 0.58 to 0.65 for 0.02 of recall.
_TAG_LABEL = {"nr": "PERSON", "nrfg": "PERSON", "nrt": "PERSON", "ns": "GPE", "nsf": "GPE", "nt": "ORG"}
_PERSON_TAGS = frozenset({"nr", "nrfg", "nrt"})
_ORG_SUFFIXES = (
    "公司", "集团", "大学", "学院", "中学", "小学", "学校", "俱乐部", "协会", "学会", "委员会", "研究所", "研究院",
    "银行", "医院", "电视台", "电台", "出版社", "报社", "乐队", "乐团", "组合", "政府", "议会", "政党", "党",
    "博物馆", "图书馆", "球队", "部队", "基金会", "工作室", "联盟", "联合会", "法院", "教会",
)
_PLACE_SUFFIXES = (
    "街道", "路", "街", "省", "市", "县", "区", "镇", "乡", "村", "州", "郡", "山", "河", "江", "湖", "海", "岛",
    "湾", "站", "机场", "港", "寺", "庙", "宫", "桥", "公园", "广场", "车站", "王国", "帝国",
)
_COMMON_TAGS = frozenset({"n", "ng", "nl", "j", "l", "vn"})  # what may follow a proper noun in a name
_MAX_JOINED = 3  # common nouns a proper noun may take before its organisation/place word

ZH_LOCK = threading.RLock()  # jieba loads its dictionary on first use; threads must not do it at once


def han_share(text: str) -> float:
    """Share of the non-space characters of `text` that are Han ideographs (0.0 for an empty text)."""
    if text.isascii():
        return 0.0
    chars = _non_space(text)
    return len(_HAN.findall(text)) / chars if chars else 0.0


def _non_space(text: str) -> int:
    return len(text) - sum(len(gap) for gap in _SPACES.findall(text))


def is_mostly_han(text: str) -> bool:
    """Whether `text` is Chinese: at least `HAN_SHARE` of its non-space characters are Han."""
    return han_share(text) >= HAN_SHARE


def is_mixed(text: str) -> bool:
    """Chinese with a substantial Latin-script part (at least `LATIN_SHARE` of non-space characters)."""
    if not is_mostly_han(text):
        return False
    return len(_LATIN.findall(text)) / _non_space(text) >= LATIN_SHARE


def has_han(text: str) -> bool:
    """Whether `text` holds a Han ideograph at all."""
    return not text.isascii() and _HAN.search(text) is not None


@functools.cache
def _tagger() -> POSTokenizer:
    """jieba's part-of-speech tokenizer with its dictionary loaded (once per process, quietly)."""
    with ZH_LOCK:
        import jieba
        import jieba.posseg

        jieba.setLogLevel(logging.WARNING)
        tagger = jieba.posseg.POSTokenizer(jieba.Tokenizer())
        tagger.tokenizer.initialize()
        return tagger


def zh_ner_info() -> dict[str, str]:
    """What determines Chinese NER output, for an index manifest."""
    return {"zh_ner": ZH_NER_VERSION, "jieba_version": metadata.version("jieba")}


def _is_han_word(word: str) -> bool:
    return bool(word) and all(_HAN.match(c) for c in word)


def _joined(tokens: list[tuple[str, str]], i: int) -> tuple[int, str, str] | None:
    """The longest organisation or place starting at proper-noun token i: (last token, surface, label)."""
    best: tuple[int, str, str] | None = None
    for j in range(i + 1, min(i + 1 + _MAX_JOINED, len(tokens))):
        word, tag = tokens[j]
        if not _is_han_word(word) or tag not in _COMMON_TAGS:
            break
        if word.endswith(_ORG_SUFFIXES):
            best = j, "".join(w for w, _ in tokens[i : j + 1]), "ORG"
        elif word.endswith(_PLACE_SUFFIXES):
            best = j, "".join(w for w, _ in tokens[i : j + 1]), "GPE"
    return best


def _person_side(tokens: list[tuple[str, str]], start: int, stop: int, step: int) -> int:
    """How far a transliterated name reaches from `start` towards `stop` (exclusive), token by token."""
    k = start
    while k != stop and tokens[k][1] in _PERSON_TAGS and _is_han_word(tokens[k][0]):
        k += step
    if k == start and k != stop and _is_han_word(tokens[k][0]) and len(tokens[k][0]) <= 3:
        k += step  # one short untagged part ("内托")
    return k


def _entities_of_tokens(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(surface, label) of the named entities in one tagged text, in text order."""
    out: list[tuple[int, str, str]] = []  # (first token, surface, label)
    i, n = 0, len(tokens)
    while i < n:
        word, tag = tokens[i]
        if i + 2 < n and tokens[i + 1][0] in _DOTS and _is_han_word(word):
            # a transliterated name: parts joined by interpuncts ("安雅·罗素法", "莱昂德罗·内托")
            left = _person_side(tokens, i, -1, -1) + 1
            end = i
            while end + 2 < n and tokens[end + 1][0] in _DOTS:
                right = _person_side(tokens, end + 2, n, 1)
                if right == end + 2:
                    break
                end = right - 1
            if end > i:
                while out and out[-1][0] >= left:
                    out.pop()  # parts of the name already taken on their own
                out.append((left, "".join(w for w, _ in tokens[left : end + 1]), "PERSON"))
                i = end + 1
                continue
        label = _TAG_LABEL.get(tag)
        if (label is not None or tag == "nz") and _is_han_word(word):
            joined = _joined(tokens, i)
            if joined is not None:
                last, surface, joined_label = joined
                out.append((i, surface, joined_label))
                i = last + 1
                continue
            if label is not None and len(word) >= 2:
                out.append((i, word, label))
        i += 1
    return [(surface, label) for _, surface, label in out]


def tagged(text: str) -> list[tuple[str, str]]:
    """jieba's (word, part-of-speech tag) pairs of `text`."""
    return [(p.word, p.flag) for p in _tagger().cut(text)]


def entities_of_tagged(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(surface, label) of the jieba-tagged names in `tokens` (no 《…》 titles, no Latin names)."""
    return _entities_of_tokens(tokens)


def latin_names(text: str) -> list[str]:
    """Capitalised Latin-script names in `text` ("Google Earth", "POPSICLE"), two characters or more."""
    names = (m.group(0).rstrip("'’-") for m in _LATIN_NAME.finditer(text))
    return [n for n in names if len(n) >= 2]


def work_titles(text: str) -> list[str]:
    """The work titles of `text` written in 《…》 or 〈…〉."""
    return [t.strip() for m in _WORK_TITLE.finditer(text) if (t := m.group(1) or m.group(2)).strip()]


def zh_entities(text: str) -> list[tuple[str, str]]:
    """(surface, spaCy label) of every named-entity mention in a Chinese `text`: work titles, then the
    tagged names and the Latin-script names of each stretch between them."""
    found = [(title, "WORK_OF_ART") for title in work_titles(text)]
    for piece in _WORK_TITLE.split(text)[::3]:  # the text outside the titles, tagged piece by piece
        if piece and has_han(piece):
            found.extend(_entities_of_tokens(tagged(piece)))
        if piece:
            found.extend((name, "PRODUCT") for name in latin_names(piece))
    return found


def extract_ner_zh(texts: Sequence[str], labels: Iterable[str]) -> list[tuple[str, ...]]:
    """Named-entity surface forms (whitespace-collapsed, sorted, unique) per Chinese text, for `labels`."""
    wanted = frozenset(labels)
    return [
        tuple(sorted({" ".join(s.split()) for s, label in zh_entities(text) if label in wanted} - {""}))
        for text in texts
    ]
