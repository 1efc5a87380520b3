"""Post-retrieval sufficiency check (DESIGN §6): are the question's key entities covered by the evidence,
and, for a multi-hop question, does a bridge passage link the evidence?

- Key entities: spaCy NER spans, capitalised spans and quoted strings of the question, plus passage
  titles the question names (`correct.text.query_entities`).
- Covered: the entity's normalised form occurs (whole words, case-insensitive) in a passage's title or
  text; a multi-word entity also counts when every one of its content words occurs in one passage.
- Bridge (multi-hop): a passage A mentions the title entity of another passage B (A -> B, the HotpotQA
  "bridge" pattern), or two passages share a named entity that is not one of the question's own
  (an unnamed intermediate). A comparison question whose entities are each covered by a different
  passage needs no bridge: its passages are linked through the question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from amsrag.correct.evaluator import passage_field
from amsrag.correct.text import content_terms, mentions, query_entities, surface_entities
from amsrag.indexes.entities import entity_key, extract_ner, title_surfaces

_BRIDGE_LABELS = ("PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LAW")


@dataclass(frozen=True, slots=True)
class Bridge:
    source: str  # id of the passage that mentions the entity
    target: str  # id of the passage the entity leads to
    entity: str
    kind: str  # "title" (source mentions target's title) | "shared" (both mention the entity)

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "entity": self.entity, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class Sufficiency:
    ok: bool
    covered: list[str]
    missing: list[str]
    bridge: Bridge | None
    multi_hop: bool
    reason: str = ""
    covered_by: dict[str, list[str]] = field(default_factory=dict)  # entity -> passage ids

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "covered": self.covered, "missing": self.missing,
                "bridge": self.bridge.to_dict() if self.bridge else None, "multi_hop": self.multi_hop,
                "reason": self.reason}


def _covers(surface: str, low: str, terms: set[str]) -> bool:
    key = entity_key(surface)
    if mentions(low, key):
        return True
    words = set(content_terms(key))
    return len(words) >= 2 and words <= terms


def find_bridge(passages: Sequence[Any], query_keys: set[str], ner: bool = True) -> Bridge | None:
    """A title link (A mentions B's title) first; else a named entity shared by two passages (`ner=False`:
    an entity-like span, `text.surface_entities`, and spaCy is not loaded)."""
    ids = [passage_field(p, "id") for p in passages]
    lows = [f"{passage_field(p, 'title')}\n{passage_field(p, 'text')}".lower() for p in passages]
    texts_only = [passage_field(p, "text").lower() for p in passages]
    for b, pb in enumerate(passages):
        for surface in title_surfaces(passage_field(pb, "title")):
            key = entity_key(surface)
            if len(key) < 3:
                continue
            for a in range(len(passages)):
                if a != b and mentions(texts_only[a], key):
                    return Bridge(ids[a], ids[b], surface, "title")
    texts = [passage_field(p, "text") for p in passages]
    ents = extract_ner(texts, _BRIDGE_LABELS) if ner else [surface_entities(t) for t in texts]
    for a in range(len(passages)):
        for surface in ents[a]:
            key = entity_key(surface)
            if len(key) < 3 or key in query_keys:
                continue
            for b in range(a + 1, len(passages)):
                if mentions(lows[b], key):
                    return Bridge(ids[a], ids[b], surface, "shared")
    return None


def check(query: str, passages: Sequence[Any], multi_hop: bool) -> Sufficiency:
    """Whether the evidence covers the question's key entities (and, for multi-hop, links them)."""
    if not passages:
        return Sufficiency(False, [], [], None, multi_hop, "no evidence")
    surfaces = query_entities(query, [passage_field(p, "title") for p in passages])
    lows = [f"{passage_field(p, 'title')}\n{passage_field(p, 'text')}".lower() for p in passages]
    terms = [set(content_terms(t)) for t in lows]
    covered_by = {s: [passage_field(passages[i], "id") for i in range(len(passages)) if _covers(s, lows[i], terms[i])]
                  for s in surfaces}
    covered = [s for s in surfaces if covered_by[s]]
    missing = [s for s in surfaces if not covered_by[s]]
    if missing:
        return Sufficiency(False, covered, missing, None, multi_hop, "entities not covered", covered_by)
    if not multi_hop:
        return Sufficiency(True, covered, [], None, False, "entities covered" if surfaces else "no key entities",
                           covered_by)
    if len(passages) < 2:
        return Sufficiency(False, covered, [], None, True, "multi-hop needs two or more passages", covered_by)
    bridge = find_bridge(passages, {entity_key(s) for s in surfaces})
    if bridge is not None:
        return Sufficiency(True, covered, [], bridge, True, f"bridge via {bridge.kind} link", covered_by)
    holders = {tuple(v) for v in covered_by.values()}
    distinct = len({pid for v in covered_by.values() for pid in v}) >= 2 and len(holders) >= 2
    if len(surfaces) >= 2 and distinct:
        return Sufficiency(True, covered, [], None, True, "entities covered by different passages (comparison)",
                           covered_by)
    return Sufficiency(False, covered, [], None, True, "no bridge between the passages", covered_by)
