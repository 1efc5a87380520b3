"""Cheap lexical and structural features of a question (a few microseconds each).

They add what a mean-pooled sentence embedding blurs: comparison patterns, nested relative
clauses and possessive chains (bridges), how many named things the question mentions, the wh-type.
Style cues of one data set (trailing "?", lower-case NQ questions) are deliberately left out: they
would tell the data set, not the hop count. `FEATURE_VERSION` and `FEATURE_NAMES` are written into
the artifact; a load with a mismatching spec is refused.

Version 2 adds structure that holds across data sets (the hop head is judged leave-one-data-set-out):
relation chains ("the director of the film that ..."), "of ... of" nesting, entities described instead
of named ("the Mexican boxer born on ..."), named-entity counts, and a two-entity comparison flag, which
also keeps such questions out of zero_hop (`is_comparison`): they need both entities' passages by
construction, whatever a generator happens to guess.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence

import numpy as np

from amsrag.indexes.entities_zh import is_mostly_han

FEATURE_VERSION = 2
# The classifier's budget: features (and the embedding the classifier computes itself) see at most this many
# characters of a question. The encoder reads 256 word pieces at most anyway; a few of the patterns below are
# quadratic in the length of a question without "?" (100 kB of words: 17 s), 2,000 characters: < 10 ms.
# The service and the engine refuse longer questions (`serve.max_question_chars`, 2,000 by default).
MAX_QUESTION_CHARS = 2000
EMPTY_QUESTION = ("query is empty: the question holds only white space or control characters (an empty question "
                  "cannot be answered)")


def bounded(question: str) -> str:
    """The part of `question` the classifier reads: its first `MAX_QUESTION_CHARS` characters."""
    return question[:MAX_QUESTION_CHARS]


def is_blank(text: str) -> bool:
    """Nothing but white space and control / format characters (NUL, zero-width spaces, ...)."""
    return not any(not c.isspace() and not unicodedata.category(c).startswith("C") for c in text)


WH_TYPES: tuple[str, ...] = ("what", "who", "when", "where", "which", "how", "why", "yesno", "other")
_YESNO = frozenset({"is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had", "will",
                    "would", "should"})
_WORD = re.compile(r"[A-Za-z0-9][\w'’-]*")
_COMPARATIVE = re.compile(
    r"\b(older|younger|earlier|later|first|longer|shorter|larger|bigger|smaller|higher|lower|taller|more|less|"
    r"fewer|greater|newer|closer|farther|further|oldest|youngest|earliest)\b", re.I)
_SAME_BOTH = re.compile(r"\b(both|same|either|neither|in common|also)\b", re.I)
_OR_CHOICE = re.compile(r"\b\w+\b[^?]*\bor\b", re.I)
_RELATIVE = re.compile(r"\b(that|which|who|whom|whose|where|when|what)\b", re.I)
_OF_THE = re.compile(r"\bof (the|a|an)\b", re.I)
_POSSESSIVE = re.compile(r"\w(['’]s|s['’])(?=\s)")
_QUOTED = re.compile(r"\"[^\"]+\"|“[^”]+”|\([^)]*\)")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_HOP_VERBS = re.compile(
    r"\b(born|died|founded|directed|wrote|written|composed|performed|produced|released|located|created|"
    r"played|starred|married|father|mother|spouse|director|author|performer|composer|founder|nationality|"
    r"country|birthplace|headquarter\w*)\b", re.I)
_RELATION_NOUNS = (
    r"director|father|mother|spouse|wife|husband|son|daughter|child|children|founder|author|creator|composer|"
    r"performer|producer|writer|owner|publisher|manufacturer|developer|capital|headquarters|birthplace|"
    r"sibling|brother|sister|uncle|aunt|grandfather|grandmother|nephew|niece|successor|predecessor|"
    r"leader|president|mayor|governor|head|member|designer|architect|editor|singer|star|"
    r"lyricist|screenwriter|coach|captain|team|county|country|city|state|province|district|"
    r"university|school|college|company|label|band|album|film|novel|book|show|series|song")
_CHAIN = re.compile(rf"\bthe (?:\w+ )?(?:{_RELATION_NOUNS})s? (?:of|for|in|from|behind) (?:the |a |an )?", re.I)
_OF_OF = re.compile(r"\bof\b[^?,]{1,40}?\bof\b", re.I)
_DESCRIBED = re.compile(
    r"\b(the|a|an) (?:[A-Za-z-]+ ){0,3}?(?:man|woman|person|actor|actress|singer|band|company|city|country|town|"
    r"film|movie|team|player|author|group|artist|writer|musician|politician|organization|organisation|club|"
    r"school|university|show|series|album|song|novel|book|building|state|river|station)\b,? "
    r"(who|that|which|whose|where|in which|known)\b", re.I)
_DESCRIBED_BY_EVENT = re.compile(
    r"\b(born|founded|established|formed|released|located|based|named)\b (in|on|at|by|after|for)\b", re.I)
# a run of capitalised words, possibly joined by "of"/"the"/"de"/...; not the question's first word
_NAME = re.compile(r"(?<!^)(?<![.?!] )\b[A-Z][\w'’.-]*(?: (?:(?:of|the|de|von|van|der|du|la|le) )?[A-Z][\w'’.-]*)*")
_TWO_SIDES = re.compile(r"\b(both|same|either|neither|in common|together|also|too)\b", re.I)
_CHOICE = re.compile(r"\b\w[^?]*?,? or \w", re.I)
_BRIDGE_WORDS = re.compile(r"\b(this|that|the same|which also|who also|and what|and which|and who)\b", re.I)

FEATURE_NAMES: tuple[str, ...] = (
    "log_words",
    "cap_spans",
    "quoted_or_paren",
    "comparative",
    "same_both",
    "or_choice",
    "relative_words",
    "of_the",
    "possessive",
    "years",
    "relation_words",
    *(f"wh_{w}" for w in WH_TYPES),
    "relation_chains",
    "of_of",
    "described_entity",
    "described_by_event",
    "names",
    "two_entity_comparison",
    "two_entities_shared",
    "bridge_words",
    "commas",
    "conjunctions",
)
N_FEATURES = len(FEATURE_NAMES)
COMPARISON = FEATURE_NAMES.index("two_entity_comparison")  # the column `is_comparison` fills


def _wh_type(words: list[str]) -> str:
    if not words:
        return "other"
    first = words[0].lower()
    for w in words[:4]:  # "In which year ...", "The director of X was born when?"
        lw = w.lower()
        if lw in WH_TYPES[:7]:
            return lw
    if first in _YESNO:
        return "yesno"
    return "other"


def _capitalised_spans(words: list[str]) -> int:
    """Runs of capitalised words, not counting the first word of the question."""
    spans, inside = 0, False
    for i, w in enumerate(words):
        cap = w[:1].isupper() and i > 0
        if cap and not inside:
            spans += 1
        inside = cap
    return spans


def is_comparison(question: str) -> bool:
    """Two named entities set against each other ("Who was born first, A or B?", "Are A and B both ...?")."""
    question = bounded(question)
    if not question.isascii() and is_mostly_han(question):
        return chinese_is_comparison(question)
    return english_is_comparison(question)


def english_is_comparison(question: str) -> bool:
    """`is_comparison` by the English cues, whatever the question's language."""
    question = bounded(question)
    names = len(_NAME.findall(question))
    if names < 2:
        return False
    if _CHOICE.search(question) and (_COMPARATIVE.search(question) or _TWO_SIDES.search(question)):
        return True
    if _COMPARATIVE.search(question) and re.search(r"\bthan\b", question, re.I):
        return True
    return bool(_TWO_SIDES.search(question)) and _wh_type(_WORD.findall(question)) == "yesno"


def is_chinese_question(question: str) -> bool:
    """Whether `question` (its first `MAX_QUESTION_CHARS` characters) is Chinese (`is_mostly_han`)."""
    question = bounded(question)
    return not question.isascii() and is_mostly_han(question)


def question_features(question: str) -> np.ndarray:
    """The feature row of `question` (of its first `MAX_QUESTION_CHARS` characters); a Chinese question
    (`is_chinese_question`) gets the same slots from Chinese cues (`chinese_features`)."""
    if is_chinese_question(question):
        return chinese_features(bounded(question))
    return english_features(bounded(question))


def english_features(question: str) -> np.ndarray:
    """The feature row by the English cues, whatever the question's language (what every question got
    before Chinese cues existed)."""
    question = bounded(question)
    words = _WORD.findall(question)
    names = len(_NAME.findall(question))
    wh = _wh_type(words)
    relative = len(_RELATIVE.findall(question)) - (1 if wh in ("what", "who", "when", "where", "which") else 0)
    values = [
        math.log1p(len(words)),
        float(_capitalised_spans(words)),
        float(len(_QUOTED.findall(question))),
        float(len(_COMPARATIVE.findall(question))),
        float(len(_SAME_BOTH.findall(question))),
        1.0 if _OR_CHOICE.search(question) else 0.0,
        float(max(relative, 0)),
        float(len(_OF_THE.findall(question))),
        float(len(_POSSESSIVE.findall(question + " "))),
        float(len(_YEAR.findall(question))),
        float(len(_HOP_VERBS.findall(question))),
        *(1.0 if wh == w else 0.0 for w in WH_TYPES),
        float(len(_CHAIN.findall(question))),
        float(len(_OF_OF.findall(question))),
        float(len(_DESCRIBED.findall(question))),
        float(len(_DESCRIBED_BY_EVENT.findall(question))),
        float(names),
        1.0 if english_is_comparison(question) else 0.0,
        1.0 if _TWO_SIDES.search(question) and names >= 2 else 0.0,
        float(len(_BRIDGE_WORDS.findall(question))),
        float(question.count(",")),
        float(sum(1 for w in words if w.lower() in ("and", "but"))),
    ]
    return np.asarray(values, dtype=np.float32)


# ---- Chinese questions: the same slots from Chinese cues -----------------------------------------------------
# A Chinese question has no spaces and no capitals: words are jieba's, names are 《…》 titles, jieba's proper
# nouns and Latin-script names, and the wh-type is the first interrogative in text order (a Chinese question
# puts it where the answer goes: "…的国籍是哪个国家？").
ZH_CHARS_PER_WORD = 1.6  # Han characters per English word of a translation (length in words: `log_words`)
_ZH_WH = [  # longest first within the alternation; the first match in the text decides
    ("when", "什么时候|什么时间|哪一年|哪年|哪一天|哪天|何时|何年|几时|几月|几号|哪个时期|哪个朝代|哪个年代"),
    ("where", "哪里|哪儿|何处|何地|哪个地方|什么地方|在哪(?![一个些年天种家部所支条座位国])"),
    ("who", "谁|哪位|何人"),
    ("why", "为什么|为何|为啥|何故"),
    ("how", "如何|怎么|怎样|多少|多大|多长|多久|多高|多远|多重|几个|几种|几次|几位|几"),
    ("which", "哪个|哪些|哪一|哪种|哪家|哪部|哪所|哪支|哪条|哪座|哪"),
    ("what", "什么|啥|何"),
]
_ZH_WH_RE = re.compile("|".join(f"(?P<{name}>{alts})" for name, alts in _ZH_WH))
_ZH_YESNO = re.compile(r"是否|是不是|有没有|能否|可否|吗[？?]?$|么[？?]?$")
_ZH_YEAR = re.compile(r"(?<!\d)(1[0-9]{3}|20[0-9]{2})(?!\d)")
_ZH_QUOTED = re.compile(r"“[^”]+”|「[^」]+」|『[^』]+』|（[^）]*）|\([^)]*\)|\"[^\"]+\"")
_ZH_TITLE = re.compile(r"《[^《》]+》")
_ZH_COMPARATIVE = re.compile(r"更|最|较|早于|晚于|先于|多于|少于|大于|小于|高于|低于")
_ZH_SAME_BOTH = re.compile(r"都|同一|相同|共同|两者|均|也")
_ZH_OR = re.compile(r"还是|或者|或是|或")
_ZH_THAN = re.compile(r"比|相比|相较|与.{1,20}?相比")
_ZH_POSSESSIVE = re.compile(r"的(?![？?。，,！!]|$)")  # not the "是…的" of a sentence end
_ZH_HOP_VERBS = re.compile(
    r"出生|生于|去世|逝世|成立|创立|创建|建立|执导|导演|编剧|撰写|写的|作曲|演唱|制作|出品|发行|出版|位于|创作|饰演|主演|"
    r"结婚|父亲|母亲|配偶|妻子|丈夫|作者|创始人|国籍|出生地|总部|开发")
_ZH_RELATION_NOUNS = (
    r"导演|父亲|母亲|配偶|妻子|丈夫|儿子|女儿|孩子|创始人|作者|创作者|作曲|演唱者|制作人|编剧|所有者|出版商|出版社|制造商|"
    r"开发商|开发公司|公司|首都|总部|出生地|兄弟|姐妹|继任者|前任|领导人|总统|市长|州长|校长|成员|设计师|建筑师|主编|歌手|"
    r"主演|教练|队长|球队|国家|城市|省份|大学|学校|唱片公司|乐队|专辑|电影|小说|书|节目|系列|歌曲")
_ZH_CHAIN = re.compile(rf"的(?:[\u4e00-\u9fff]{{0,2}}?)(?:{_ZH_RELATION_NOUNS})")
_ZH_DESCRIBED = re.compile(
    r"(?:这位|那位|该|一位|一名|一个|一部|一家|一支|一座|这个|那个|这部|那部|这家|那家)[\u4e00-\u9fff]{0,4}?"
    r"(?:人|演员|歌手|乐队|公司|城市|国家|电影|球队|球员|作家|作者|画家|艺术家|政治家|组织|俱乐部|学校|大学|节目|专辑|歌曲|"
    r"小说|书|建筑|河流|车站)")
_ZH_DESCRIBED_BY_EVENT = re.compile(r"(?:出生|生|成立|创立|建|发行|出版|位|设立|命名|创办)于")
_ZH_BRIDGE = re.compile(r"该|此|这个|那个|同一|其")
_ZH_COMMAS = re.compile(r"[，,、；;]")
_ZH_CONJUNCTIONS = frozenset({"和", "与", "及", "以及", "并且", "而且", "但", "但是", "而", "并", "跟", "同"})


def _zh_names(question: str, tokens: list[tuple[str, str]]) -> int:
    """Named things in a Chinese question: 《…》 titles, jieba's joined proper nouns, Latin-script names."""
    from amsrag.indexes.entities_zh import entities_of_tagged, latin_names, work_titles

    outside = _ZH_TITLE.sub("，", question)
    return len(work_titles(question)) + len(entities_of_tagged(tokens)) + len(latin_names(outside))


def _zh_tokens(question: str) -> list[tuple[str, str]]:
    from amsrag.indexes.entities_zh import tagged

    return tagged(_ZH_TITLE.sub("，", question))


def _zh_wh_type(question: str) -> str:
    found = _ZH_WH_RE.search(question)
    if found is not None and found.lastgroup is not None:
        return found.lastgroup
    return "yesno" if _ZH_YESNO.search(question.strip()) else "other"


def _zh_comparison(question: str, names: int) -> bool:
    if names < 2:
        return False
    if _ZH_OR.search(question) and (_ZH_COMPARATIVE.search(question) or _ZH_SAME_BOTH.search(question)):
        return True
    if _ZH_THAN.search(question) and _ZH_COMPARATIVE.search(question):
        return True
    if re.search(r"哪个更|哪一个更|谁更|哪位更", question):
        return True
    return bool(_ZH_SAME_BOTH.search(question)) and _zh_wh_type(question) == "yesno"


def chinese_is_comparison(question: str) -> bool:
    """`is_comparison` of a Chinese question ("A和B谁更早出生？", "A与B都是美国电影吗？")."""
    return _zh_comparison(question, _zh_names(question, _zh_tokens(question)))


def chinese_features(question: str) -> np.ndarray:
    """The feature row of a Chinese question: every slot from the Chinese cue of the same meaning (a slot with
    no Chinese counterpart, "of the", relative pronouns, is 0)."""
    tokens = _zh_tokens(question)
    names = _zh_names(question, tokens)
    wh = _zh_wh_type(question)
    han = sum(1 for c in question if "\u4e00" <= c <= "\u9fff")
    latin_words = len(_WORD.findall(question))
    possessive = len(_ZH_POSSESSIVE.findall(question))
    values = [
        math.log1p(han / ZH_CHARS_PER_WORD + latin_words),
        float(names),  # cap_spans: no capitals in Chinese; its named spans stand in
        float(len(_ZH_QUOTED.findall(question)) + len(_ZH_TITLE.findall(question))),
        float(len(_ZH_COMPARATIVE.findall(question))),
        float(len(_ZH_SAME_BOTH.findall(question))),
        1.0 if _ZH_OR.search(question) else 0.0,
        0.0,  # relative_words: a Chinese relative clause is "…的", counted as possessive / of_of
        0.0,  # of_the
        float(possessive),
        float(len(_ZH_YEAR.findall(question))),
        float(len(_ZH_HOP_VERBS.findall(question))),
        *(1.0 if wh == w else 0.0 for w in WH_TYPES),
        float(len(_ZH_CHAIN.findall(question))),
        float(max(possessive - 1, 0)),  # of_of: "X的Y的Z" nests like "the Z of the Y of X"
        float(len(_ZH_DESCRIBED.findall(question))),
        float(len(_ZH_DESCRIBED_BY_EVENT.findall(question))),
        float(names),
        1.0 if _zh_comparison(question, names) else 0.0,
        1.0 if _ZH_SAME_BOTH.search(question) and names >= 2 else 0.0,
        float(len(_ZH_BRIDGE.findall(question))),
        float(len(_ZH_COMMAS.findall(question))),
        float(sum(1 for w, flag in tokens if flag == "c" and w in _ZH_CONJUNCTIONS)),
    ]
    return np.asarray(values, dtype=np.float32)


def features_batch(questions: Sequence[str]) -> np.ndarray:
    if not questions:
        return np.zeros((0, N_FEATURES), dtype=np.float32)
    return np.stack([question_features(q) for q in questions])
