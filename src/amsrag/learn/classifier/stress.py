"""A stress set for the complexity classifier: questions that look simple but are multi-hop by structure.

"Where was the director of Inception born?" reads like a one-passage lookup, yet it needs the film's
passage for the director and the director's passage for the birthplace. The templates here rebuild such
short forms from the gold decompositions of the multi-hop data:

- 2WikiMultihopQA (`migres_2wiki_train_500_decomp.json`): the evidence triples. Two chained triples
  (compositional / inference) give "When was the performer of Get Low born?"-style questions and kinship
  words ("Who is X's paternal grandfather?"); comparison records give "Who was born first, A or B?", and
  bridge comparisons (film -> director -> fact) "Did the directors of A and B share a nationality?".
- MuSiQue (both files of `amsrag.ingest.datasets.MUSIQUE_FILES`): 2- and 3-hop decompositions whose steps
  are ``X >> relation`` chains; a last step written as a natural question over ``#k`` is accepted when
  the noun phrase can be put in place of ``#k`` cleanly.

A question must end with "?" and must name neither the answer nor a bridge entity (an intermediate
answer): otherwise the surface gives the hop away. Comparisons are the exception for the answer only,
since they name both options by construction (their answer is one option, or yes/no); their looked-up
facts stay hidden. Relations without a phrasing that reads well are skipped rather than forced.

Everything is deterministic: the templates of a record are ordered by `seeded_rank` and the first
`per_record` kept; no global random state.
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amsrag.errors import InputError
from amsrag.ingest.datasets import MUSIQUE_FILES
from amsrag.learn.common import seeded_rank
from amsrag.text.normalise import normalise_question

WIKI_FILE = "2wikimultihopqa/migres_2wiki_train_500_decomp.json"
# The files the templates read: the classifier never trains on their own questions.
SOURCE_FILES: tuple[str, ...] = (WIKI_FILE, *MUSIQUE_FILES)
# Mixed into every rank key, so this set's template order is its own even where other samplers share a seed.
_SALT = "stress set by templates"


@dataclass(frozen=True, slots=True)
class StressQuestion:
    """One templated question; all of them are multi_hop by construction."""

    question: str
    kind: str  # "2wiki composition" / "2wiki inference" / "2wiki comparison" / "2wiki bridge comparison" / ...
    template: str  # the template's name, e.g. "when-born(director-of)"
    source_id: str  # `_id` (2Wiki) or `id` (MuSiQue) of the source record
    dataset: str  # "2wikimultihopqa" / "musique"
    hop: str = "multi_hop"
    synthetic: bool = True


# ---------------------------------------------------------------- names and leakage


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


# A trailing parenthesis is a Wikipedia disambiguator ("(1945 film)", "(director born 1893)", "(athlete)") rather
# than part of a title ("Country Girl (Shake It for Me)") when it has no capital letter, is years only, or has
# one of these words ("(Dillon Francis and DJ Snake song)", "(Australian politician)").
_DISAMBIGUATORS = _wordset(
    "film song album director actor actress band novel musician singer producer filmmaker politician "
    "footballer writer book series opera poem magazine newspaper composer painting soundtrack single born "
    "play tv musical rapper group poet artist game episode story comics character manga anime ep "
    "football basketball baseball cricketer athlete boxer wrestler cyclist swimmer rugby hockey tennis "
    "painter bishop judge journalist businessman engineer architect priest"
)
_YEARS = re.compile(r"^[\d\s–—-]+$")  # "(1770–1836)"
_TRAILING_PAREN = re.compile(r"\s*\(([^()]*)\)$")
_PRONOUNS = _wordset("i me you it we us they them he him she her this that")
_SPLIT_HYPHEN = re.compile(r"(\w)- (\w)")  # "Tsaro- Wiwa" in the triples
_NICKNAME = re.compile(r'\s+"[^"]+"(?=\s)')  # Mary "May" Morris -> Mary Morris
# A sentence fragment in the triples: "Charles (953–993) was the Duke of Lower Lorraine".
_NOT_A_NAME = re.compile(r"\s(?:was|were)\s")


def clean_name(name: str) -> str | None:
    """The entity as a question would name it (disambiguator and nickname dropped), or None if unusable."""
    name = _SPLIT_HYPHEN.sub(r"\1-\2", _NICKNAME.sub("", " ".join(name.split())))
    match = _TRAILING_PAREN.search(name)
    inner = match.group(1) if match else ""
    if match and (inner == inner.lower() or _YEARS.match(inner) or _DISAMBIGUATORS & set(inner.lower().split())):
        name = name[: match.start()]
    if (not name or "?" in name or '"' in name or "#" in name or name.count("(") != name.count(")")
            or _NOT_A_NAME.search(name)):
        return None
    return name


def possessive(name: str) -> str | None:
    """``Inception's``; None where a possessive reads badly: long titles ("Two Sergeants of General Custer's"),
    names with an apostrophe, comma or colon, or ending in punctuation, a digit, an s or a pronoun
    ("Meant for You's")."""
    words = name.split()
    if (not words or len(words) > 3 or name[-1] in "!?.,:;)s" or name[-1].isdigit()
            or any(c in name for c in "',:’") or words[-1].lower() in _PRONOUNS):
        return None
    return name + "'s"


def _fold(text: str) -> str:
    """Accents dropped, so that "Émile Chautard" and "Emile Chautard" compare equal."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _key(text: str) -> str:
    return normalise_question(_fold(text))


def _same_entity(a: str, b: str) -> bool:
    """Equal up to case, accents, punctuation and a disambiguator (the triples spell a bridge both ways)."""
    if _key(a) == _key(b):
        return True
    ca, cb = clean_name(a), clean_name(b)
    return ca is not None and cb is not None and _key(ca) == _key(cb)


def leaks(question: str, hidden: Iterable[str]) -> bool:
    """Does the question name any of `hidden` (as whole words, ignoring case, accents and punctuation)?"""
    q = f" {_key(question)} "
    for text in hidden:
        for form in {text, clean_name(text) or text}:
            k = _key(form)
            if k and f" {k} " in q:
                return True
    return False


def _tidy(text: str) -> str:
    text = " ".join(text.split())
    return re.sub(r"\s+([?,!.;:])", r"\1", text)


_REPEATED_WORD = re.compile(r"\b(\w+) \1\b", re.IGNORECASE)


def _well_formed(question: str, names: Iterable[str] = ()) -> bool:
    """Ends with "?", starts upper case, no template residue, and none of the stacked clauses that nested
    noun phrases produce ("... where X is located is located", "the region where the county where ...").
    The clause checks skip the entity `names` in the question: "Milenge Milenge" is a title."""
    frame = question
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        frame = frame.replace(name, "X")
    words = frame.lower().rstrip("?").split()
    return (question.endswith("?") and question[:1].isupper() and "{" not in frame and "#" not in frame
            and "??" not in question and not _REPEATED_WORD.search(frame)
            and words.count("located") <= 1 and words[1:].count("where") <= 1)


@dataclass(frozen=True, slots=True)
class _Draft:
    """A question before the checks of `_accept`, with its template's name."""

    question: str
    template: str


def _accept(drafts: Iterable[_Draft], hidden: Sequence[str], names: Sequence[str], *, kind: str, source_id: str,
            dataset: str) -> list[StressQuestion]:
    """The drafts that read well and name nothing of `hidden`; `names` are the entities they may name."""
    names = [*names, *(c for n in names if (c := clean_name(n)))]
    out: dict[str, StressQuestion] = {}  # by normalised question: two templates may agree on a record
    for d in drafts:
        q = _tidy(d.question)
        if _well_formed(q, names) and not leaks(q, hidden):
            out.setdefault(normalise_question(q), StressQuestion(q, kind, d.template, source_id, dataset))
    return list(out.values())


# ---------------------------------------------------------------- 2WikiMultihopQA templates

# The first hop as a noun phrase of its subject: {x} the name, {xp} its possessive (templates that need it
# are skipped when there is none), {spouse} husband / wife / spouse as the source question says.
_WIKI_NP: dict[str, tuple[tuple[str, str], ...]] = {
    "director": (("director-of", "the director of {x}"), ("director-poss", "{xp} director"),
                 ("who-directed", "the person who directed {x}")),
    "performer": (("performer-of", "the performer of {x}"), ("performer-poss", "{xp} performer"),
                  ("artist-behind", "the artist behind {x}")),
    "composer": (("composer-of", "the composer of {x}"), ("composer-poss", "{xp} composer"),
                 ("who-wrote-music", "the person who wrote the music for {x}")),
    "producer": (("producer-of", "the producer of {x}"), ("producer-poss", "{xp} producer")),
    "father": (("father-of", "the father of {x}"), ("father-poss", "{xp} father")),
    "mother": (("mother-of", "the mother of {x}"), ("mother-poss", "{xp} mother")),
    "spouse": (("spouse-of", "the {spouse} of {x}"), ("spouse-poss", "{xp} {spouse}")),
    "child": (("child-of", "the child of {x}"), ("child-poss", "{xp} child")),
    "founded by": (("founder-of", "the founder of {x}"), ("founder-poss", "{xp} founder")),
    "publisher": (("publisher-of", "the publisher of {x}"),),
}

# The second hop as a question about the noun phrase {np}.
_WIKI_WH: dict[str, tuple[tuple[str, str], ...]] = {
    "date of birth": (("when-born", "When was {np} born?"), ("birth-date", "What is the date of birth of {np}?"),
                      ("birth-date-fragment", "Date of birth of {np}?")),
    "place of birth": (("where-born", "Where was {np} born?"), ("birthplace", "What is the birthplace of {np}?"),
                       ("birthplace-fragment", "Birthplace of {np}?")),
    "date of death": (("when-died", "When did {np} die?"), ("death-date", "What is the date of death of {np}?"),
                      ("death-date-fragment", "Date of death of {np}?")),
    "place of death": (("where-died", "Where did {np} die?"), ("death-place", "What is the place of death of {np}?"),
                       ("death-place-fragment", "Place of death of {np}?")),
    "country of citizenship": (("which-country-from", "Which country is {np} from?"),
                               ("what-nationality", "What nationality is {np}?"),
                               ("nationality-fragment", "Nationality of {np}?")),
    "cause of death": (("how-died", "How did {np} die?"), ("died-of", "What did {np} die of?"),
                       ("cause-of-death", "What was the cause of death of {np}?")),
    "educated at": (("where-studied", "Where did {np} study?"), ("where-educated", "Where was {np} educated?")),
    "award received": (("what-award", "What award did {np} receive?"),
                       ("which-award-won", "Which award did {np} win?")),
    "father": (("father", "Who is the father of {np}?"),),
    "mother": (("mother", "Who is the mother of {np}?"),),
    "spouse": (("married-to", "Who was {np} married to?"), ("spouse", "Who is the spouse of {np}?")),
    "child": (("child", "Who is a child of {np}?"),),
    "sibling": (("sibling", "Who is a sibling of {np}?"),),
    "employer": (("employer", "Who was {np} employed by?"), ("where-worked", "Where did {np} work?")),
    "inception": (("when-founded", "When was {np} founded?"),),
}

# Two kinship hops that English names with one word: the bridge disappears entirely.
_KIN: dict[tuple[str, str], str] = {
    ("father", "father"): "paternal grandfather", ("father", "mother"): "paternal grandmother",
    ("mother", "father"): "maternal grandfather", ("mother", "mother"): "maternal grandmother",
    ("spouse", "father"): "father-in-law", ("spouse", "mother"): "mother-in-law",
}

# Comparisons of one relation over two subjects {a}, {b}; {noun}: film / album / ... from the source question.
_WIKI_CMP: dict[str, tuple[tuple[str, str], ...]] = {
    "date of birth": (("born-first", "Who was born first, {a} or {b}?"), ("older", "Who is older, {a} or {b}?"),
                      ("born-later", "Who was born later, {a} or {b}?")),
    "date of death": (("died-first", "Who died first, {a} or {b}?"), ("died-later", "Who died later, {a} or {b}?")),
    "publication date": (("came-out-first", "Which {noun} came out first, {a} or {b}?"),
                         ("released-more-recently", "Which {noun} was released more recently, {a} or {b}?")),
    "country of citizenship": (("same-country-from", "Are {a} and {b} from the same country?"),
                               ("same-nationality", "Did {a} and {b} have the same nationality?")),
    "country of origin": (("same-country-from", "Are {a} and {b} from the same country?"),
                          ("same-country-come", "Do {a} and {b} come from the same country?")),
    "country": (("same-country-in", "Are {a} and {b} in the same country?"),
                ("same-country-located", "Are {a} and {b} located in the same country?")),
    "place of birth": (("same-birthplace", "Were {a} and {b} born in the same place?"),),
}

# Bridge comparisons: {role} (director, ...) of the two {noun}s {a}, {b}, then one fact of each.
_WIKI_BRIDGE_CMP: dict[str, tuple[tuple[str, str], ...]] = {
    "date of birth": (("role-born-first", "Which {noun}'s {role} was born first, {a} or {b}?"),
                      ("older-role", "Which {noun} has the older {role}, {a} or {b}?"),
                      ("role-born-later", "Which {noun}'s {role} was born later, {a} or {b}?")),
    "date of death": (("role-died-first", "Which {noun}'s {role} died first, {a} or {b}?"),
                      ("role-died-later", "Which {noun}'s {role} died later, {a} or {b}?")),
    "country of citizenship": (("roles-share-nationality", "Did the {role}s of {a} and {b} share a nationality?"),
                               ("roles-same-country", "Are the {role}s of {a} and {b} from the same country?")),
}
_ROLES = {"director": "director", "composer": "composer", "performer": "performer", "producer": "producer"}
_NOUNS = (("film", "film"), ("movie", "film"), ("album", "album"), ("song", "song"), ("novel", "novel"),
          ("book", "book"), ("magazine", "magazine"), ("newspaper", "newspaper"))


def _noun_of(question: str) -> str | None:
    words = set(_key(question).split())
    return next((noun for word, noun in _NOUNS if word in words or word + "s" in words), None)


def _spouse_word(question: str) -> str:
    words = set(_key(question).split())
    return "husband" if "husband" in words else "wife" if "wife" in words else "spouse"


def _triples(record: Mapping[str, Any]) -> list[tuple[str, str, str]] | None:
    """The evidence triples: a list, or a string holding a Python list literal; None if malformed."""
    raw = record.get("evidences")
    if isinstance(raw, str):
        try:
            raw = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return None
    if not isinstance(raw, list) or not all(
            isinstance(t, list | tuple) and len(t) == 3 and all(isinstance(s, str) for s in t) for t in raw):
        return None
    return [(t[0], t[1], t[2]) for t in raw]


def _noun_phrases(relation: str, name: str, question: str) -> Iterator[tuple[str, str]]:
    x = clean_name(name)
    if x is None:
        return
    xp = possessive(x)
    for template_name, template in _WIKI_NP.get(relation, ()):
        if "{xp}" in template and xp is None:
            continue
        yield template_name, template.format(x=x, xp=xp, spouse=_spouse_word(question))


def _wiki_chain(record: Mapping[str, Any], ev: list[tuple[str, str, str]]) -> list[_Draft]:
    (x, r1, bridge), (bridge2, r2, _) = ev
    if not _same_entity(bridge, bridge2):
        return []
    q = str(record.get("question", ""))
    drafts = [_Draft(wh.format(np=np), f"{wh_name}({np_name})")
              for np_name, np in _noun_phrases(r1, x, q)
              for wh_name, wh in _WIKI_WH.get(r2, ())]
    kin = _KIN.get((r1, r2))
    name = clean_name(x)
    if kin and name:
        drafts.append(_Draft(f"Who is the {kin} of {name}?", "kin-of"))
        if (xp := possessive(name)) is not None:
            drafts.append(_Draft(f"Who is {xp} {kin}?", "kin-poss"))
    return drafts


def _wiki_comparison(record: Mapping[str, Any], ev: list[tuple[str, str, str]]) -> list[_Draft]:
    (a, r1, _), (b, r2, _) = ev
    ca, cb = clean_name(a), clean_name(b)
    if r1 != r2 or ca is None or cb is None or _key(ca) == _key(cb):
        return []
    noun = _noun_of(str(record.get("question", ""))) or "one"
    return [_Draft(t.format(a=ca, b=cb, noun=noun), name) for name, t in _WIKI_CMP.get(r1, ())]


def _wiki_bridge_comparison(record: Mapping[str, Any], ev: list[tuple[str, str, str]]) -> list[_Draft]:
    (a, r1, d1), (b, r1b, d2), (d1b, r2, _), (d2b, r2b, _) = ev
    ca, cb = clean_name(a), clean_name(b)
    noun = _noun_of(str(record.get("question", "")))
    role = _ROLES.get(r1)
    if (r1 != r1b or r2 != r2b or role is None or noun is None or ca is None or cb is None
            or _key(ca) == _key(cb) or not _same_entity(d1, d1b) or not _same_entity(d2, d2b)):
        return []
    return [_Draft(t.format(a=ca, b=cb, noun=noun, role=role), name) for name, t in _WIKI_BRIDGE_CMP.get(r2, ())]


def wiki_questions(record: Mapping[str, Any]) -> list[StressQuestion]:
    """Every template's question for one 2WikiMultihopQA record that passes the checks (possibly none)."""
    ev = _triples(record)
    kind_of = {"compositional": "2wiki composition", "inference": "2wiki inference",
               "comparison": "2wiki comparison", "bridge_comparison": "2wiki bridge comparison"}
    rtype = str(record.get("type", ""))
    if ev is None or rtype not in kind_of:
        return []
    answer = str(record.get("answer", ""))
    if rtype in ("compositional", "inference") and len(ev) == 2:
        drafts = _wiki_chain(record, ev)
        hidden = [answer, ev[0][2], ev[1][0], ev[1][2]]
    elif rtype == "comparison" and len(ev) == 2:
        drafts = _wiki_comparison(record, ev)
        hidden = [ev[0][2], ev[1][2]]
    elif rtype == "bridge_comparison" and len(ev) == 4:
        drafts = _wiki_bridge_comparison(record, ev)
        hidden = [t[2] for t in ev] + [ev[2][0], ev[3][0]]
    else:
        return []
    if rtype in ("comparison", "bridge_comparison"):
        options = {_key(ev[0][0]), _key(ev[1][0]), *(_key(clean_name(t[0]) or t[0]) for t in ev[:2])}
        if _key(answer) not in options and _key(answer) not in ("yes", "no"):
            hidden.append(answer)  # not one of the options: then it is a fact and must stay hidden
    return _accept(drafts, hidden, [t[0] for t in ev[:2]], kind=kind_of[rtype], source_id=str(record.get("_id", "")),
                   dataset="2wikimultihopqa")


# ---------------------------------------------------------------- MuSiQue templates

# The type word of an administrative unit, read off the step's answer ("Mountrail County" -> county); the
# answer's type is no leak, only the answer's name is.
_UNITS = _wordset(
    "county province state district region municipality parish prefecture department governorate "
    "voivodeship oblast township city borough canton island"
)


def _unit(answer: str) -> str:
    words = _key(answer).split()
    return words[-1] if words and words[-1] in _UNITS else "region"


# A step as a noun phrase of {x} (a name, or the previous noun phrase); {xp} only for a name; {unit} above.
_MUSIQUE_NP: dict[str, tuple[tuple[str, str], ...]] = {
    "located in the administrative territorial entity": (("unit-where-located", "the {unit} where {x} is located"),
                                                         ("unit-containing", "the {unit} that contains {x}")),
    "place of birth": (("birthplace-of", "the birthplace of {x}"), ("birthplace-poss", "{xp} birthplace"),
                       ("place-where-born", "the place where {x} was born")),
    "place of death": (("place-where-died", "the place where {x} died"),
                       ("death-place-of", "the place of death of {x}")),
    "country": (("country-of", "the country of {x}"), ("country-poss", "{xp} country")),
    "country of citizenship": (("citizenship-country", "the country {x} was a citizen of"),),
    "performer": (("performer-of", "the performer of {x}"), ("performer-poss", "{xp} performer")),
    "author": (("author-of", "the author of {x}"), ("who-wrote", "the person who wrote {x}")),
    "composer": (("composer-of", "the composer of {x}"), ("composer-poss", "{xp} composer")),
    "producer": (("producer-of", "the producer of {x}"),),
    "director": (("director-of", "the director of {x}"),),
    "screenwriter": (("screenwriter-of", "the screenwriter of {x}"),),
    "creator": (("creator-of", "the creator of {x}"),),
    "manufacturer": (("manufacturer-of", "the manufacturer of {x}"),),
    "spouse": (("spouse-of", "the spouse of {x}"), ("spouse-poss", "{xp} spouse")),
    "father": (("father-of", "the father of {x}"), ("father-poss", "{xp} father")),
    "mother": (("mother-of", "the mother of {x}"), ("mother-poss", "{xp} mother")),
    "sibling": (("sibling-of", "the sibling of {x}"),),
    "child": (("child-of", "the child of {x}"),),
    "owned by": (("owner-of", "the owner of {x}"),),
    "member of sports team": (("team-played-for", "the team {x} played for"),),
    "member of political party": (("party-belongs-to", "the party {x} belongs to"),),
    "member of": (("organization-member-of", "the organization {x} is a member of"),),
    "capital": (("capital-of", "the capital of {x}"),),
    "capital of": (("unit-whose-capital", "the {unit} whose capital is {x}"),),
    "educated at": (("school-attended", "the school {x} attended"), ("alma-mater-poss", "{xp} alma mater")),
    "location": (("location-of", "the location of {x}"),),
    "continent": (("continent-of", "the continent of {x}"),),
    "licensed to broadcast to": (("broadcast-place", "the place {x} is licensed to broadcast to"),),
    "location of formation": (("place-where-formed", "the place where {x} was formed"),),
    "employer": (("employer-of", "the employer of {x}"),),
    "cast member": (("star-of", "a star of {x}"),),
    "named after": (("namesake-of", "the namesake of {x}"),),
    "work location": (("place-where-worked", "the place where {x} worked"),),
    "mouth of the watercourse": (("flows-into", "the body of water {x} flows into"),),
    "record label": (("label-of", "the record label of {x}"),),
    "follows": (("predecessor-of", "the predecessor of {x}"),),
    "followed by": (("successor-of", "the successor of {x}"),),
    "sport": (("sport-played", "the sport {x} plays"),),
    "native language": (("native-language-of", "the native language of {x}"),),
}

# A last ``#k >> relation`` step as a question about {np}; {unit} from the final answer.
_MUSIQUE_WH: dict[str, tuple[tuple[str, str], ...]] = {
    "located in the administrative territorial entity": (("which-unit-in", "Which {unit} is {np} in?"),
                                                         ("in-which-unit-located", "In which {unit} is {np} located?")),
    "capital": (("capital-of", "What is the capital of {np}?"), ("capital-fragment", "Capital of {np}?")),
    "capital of": (("capital-of-what", "What is {np} the capital of?"),),
    "shares border with": (("which-unit-borders", "Which {unit} shares a border with {np}?"),
                           ("what-borders", "What borders {np}?")),
    "part of": (("part-of-what", "What is {np} part of?"),),
    "country": (("which-country-in", "Which country is {np} in?"), ("country-fragment", "Country of {np}?")),
    "country of citizenship": (("citizen-of-which", "Which country was {np} a citizen of?"),
                               ("what-nationality", "What nationality is {np}?")),
    "located in or next to body of water": (("body-of-water-on", "What body of water is {np} on?"),),
    "location of formation": (("where-formed", "Where was {np} formed?"),),
    "member of sports team": (("which-team", "Which team did {np} play for?"),),
    "member of political party": (("which-party", "Which party does {np} belong to?"),),
    "place of birth": (("where-born", "Where was {np} born?"),),
    "place of death": (("where-died", "Where did {np} die?"),),
    "father": (("father", "Who is the father of {np}?"),),
    "mother": (("mother", "Who is the mother of {np}?"),),
    "sibling": (("sibling", "Who is a sibling of {np}?"),),
    "child": (("child", "Who is a child of {np}?"),),
    "spouse": (("married-to", "Who was {np} married to?"), ("spouse", "Who is the spouse of {np}?")),
    "performer": (("who-performed", "Who performed {np}?"),),
    "author": (("who-wrote", "Who wrote {np}?"),),
    "composer": (("who-composed", "Who composed {np}?"),),
    "director": (("who-directed", "Who directed {np}?"),),
    "producer": (("who-produced", "Who produced {np}?"),),
    "creator": (("who-created", "Who created {np}?"),),
    "owned by": (("who-owns", "Who owns {np}?"),),
    "employer": (("who-employed", "Who employed {np}?"),),
    "educated at": (("where-educated", "Where was {np} educated?"),),
    "continent": (("which-continent", "Which continent is {np} on?"),),
    "record label": (("which-label", "Which record label was {np} signed to?"),),
    "work location": (("where-worked", "Where did {np} work?"),),
    "named after": (("named-after", "What is {np} named after?"),),
    "mouth of the watercourse": (("flows-into", "What does {np} flow into?"),),
}

# A last step written as a natural question ("Who was the first president of #1 ?") takes the noun phrase in
# place of #k only if it opens with a wh-word and #k stands where a noun phrase can: not after an article,
# not glued to a possessive or a following noun ("What is the country #1 sandwich is from?").
_WH_OPENERS = _wordset("who what when where which how why whose whom")
_AFTER_PLACEHOLDER = _wordset(
    "was is were are has have had did does do start started become became leave left live lived located "
    "abolished crowned founded formed born die died play played win won handle handled invade invaded "
    "reinstate a an on in at for to from with by of and"
)
_PREPOSITIONS = _wordset("of in at by for from with on to into near about")
_STEP = re.compile(r"^(.*\S)\s*>>\s*(\S.*)$")


def _with_article(relation: str, name: str) -> str:
    """The subject of a ``location`` step is an event: "the location of the 26th Chess Olympiad"."""
    if relation == "location" and not name.lower().startswith("the "):
        return "the " + name
    return name


def _substitute(step: str, k: int, np: str) -> str | None:
    text = _tidy(step)
    placeholder = f"#{k}"
    tokens = text.rstrip("?").split()
    if (not text[:1].isupper() or not tokens or tokens[0].lower() not in _WH_OPENERS
            or re.findall(r"#\d+", text) != [placeholder] or tokens.count(placeholder) != 1):
        return None
    i = tokens.index(placeholder)
    before = tokens[i - 1].lower() if i > 0 else ""
    after = tokens[i + 1] if i + 1 < len(tokens) else ""
    if before in ("the", "a", "an") or (after and after.lower() not in _AFTER_PLACEHOLDER and after != ","):
        return None
    # At the end, #k must be a prepositional object ("in charge of #1"): "What percentage was #1 ?" says nothing.
    if not after and before not in _PREPOSITIONS:
        return None
    tokens[i] = np
    return _tidy(" ".join(tokens) + "?")


def musique_questions(record: Mapping[str, Any]) -> list[StressQuestion]:
    """Every template's question for one MuSiQue record that passes the checks (possibly none).

    2- and 3-hop decompositions only: the first step ``X >> r``, middle steps ``#k >> r``, and a last step
    ``#k >> r`` or a natural question over ``#k``. Deeper chains read as puzzles rather than short questions.
    """
    steps = record.get("question_decomposition")
    if not isinstance(steps, list) or len(steps) not in (2, 3):
        return []
    parsed: list[tuple[str, str, str]] = []  # (subject, relation or "", the step's question text)
    for s in steps:
        text = str(s.get("question", "")) if isinstance(s, Mapping) else ""
        m = _STEP.match(text)
        parsed.append((m.group(1).strip(), m.group(2).strip(), text) if m else ("", "", text))
    answers = [str(s.get("answer", "")) for s in steps]
    first = clean_name(parsed[0][0])
    if first is None or not parsed[0][1] or any(
            not rel or subj != f"#{i}" for i, (subj, rel, _) in enumerate(parsed[1:-1], start=1)):
        return []
    # The noun phrases of every step but the last, each built on the previous one.
    phrases: list[tuple[str, str]] = [("", first)]
    for i, (_, rel, _) in enumerate(parsed[:-1]):
        xp = possessive(first) if i == 0 else None
        phrases = [(f"{name}({prev_name})" if prev_name else name,
                    t.format(x=_with_article(rel, prev) if i == 0 else prev, xp=xp, unit=_unit(answers[i])))
                   for prev_name, prev in phrases
                   for name, t in _MUSIQUE_NP.get(rel, ())
                   # nesting a template in itself stacks clauses: "the county that contains the county that ..."
                   if not ("{xp}" in t and xp is None) and not prev_name.startswith(name)]
    subj, rel, text = parsed[-1]
    k = len(parsed) - 1
    drafts: list[_Draft] = []
    for np_name, np in phrases:
        if rel and subj == f"#{k}":
            drafts += [_Draft(t.format(np=np, unit=_unit(answers[-1])), f"{wh}({np_name})")
                       for wh, t in _MUSIQUE_WH.get(rel, ())]
        elif not rel and (q := _substitute(text, k, np)) is not None:
            drafts.append(_Draft(q, f"substituted({np_name})"))
    aliases = [str(a) for a in record.get("answer_aliases") or ()]
    hidden = [*answers, str(record.get("answer", "")), *aliases]
    return _accept(drafts, hidden, [first], kind="musique composition", source_id=str(record.get("id", "")),
                   dataset="musique")


# ---------------------------------------------------------------- the set


def _pick(candidates: list[StressQuestion], per_record: int, seed: int) -> list[StressQuestion]:
    ranked = sorted(candidates, key=lambda c: seeded_rank(seed, f"{_SALT}\x1f{c.source_id}\x1f{c.template}"))
    return ranked[:per_record]


def _read_records(path: Path) -> list[Mapping[str, Any]]:
    """A JSON list (``.json``) or JSON lines (otherwise) of records."""
    text = path.read_text("utf-8")
    try:
        rows: Any = (json.loads(text) if path.suffix == ".json"
                     else [json.loads(line) for line in text.splitlines() if line.strip()])
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(rows, list):
        raise InputError(f"{path}: expected a JSON list of records")
    return [r for r in rows if isinstance(r, Mapping)]


def stress_set(data_dir: Path, per_record: int = 1, seed: int = 13) -> list[StressQuestion]:
    """Surface-simple multi-hop questions templated from the 2Wiki and MuSiQue files under `data_dir`.

    Up to `per_record` templates per source record (chosen by `seeded_rank` of `seed`), deduplicated by
    `normalise_question`, sorted by (dataset, kind, question). A missing file skips its source; with no
    source file at all, `InputError`.
    """
    if per_record < 1:
        raise InputError(f"per_record must be at least 1, got {per_record}")
    sources = [(data_dir / WIKI_FILE, wiki_questions)] + [(data_dir / f, musique_questions) for f in MUSIQUE_FILES]
    present = [(path, build) for path, build in sources if path.is_file()]
    if not present:
        wanted = ", ".join(str(p.relative_to(data_dir)) for p, _ in sources)
        raise InputError(f"no stress-set source under {data_dir} (looked for {wanted})")
    picked: list[StressQuestion] = []
    for path, build in present:
        for record in _read_records(path):
            picked += _pick(build(record), per_record, seed)
    picked.sort(key=lambda s: (normalise_question(s.question), s.dataset, s.kind, s.source_id, s.template))
    unique: dict[str, StressQuestion] = {}
    for s in picked:
        unique.setdefault(normalise_question(s.question), s)
    return sorted(unique.values(), key=lambda s: (s.dataset, s.kind, s.question, s.source_id))
