"""The LLM decomposer: a self-ask prompt to a configured generator that completes free-form prompts
(`generate.base.Completes`: the OpenAI-compatible server, llama.cpp), behind the same `Decomposer` Protocol.

The model is asked for follow-up questions in the self-ask manner; its reply is parsed into a `Plan`. A
reply that cannot be parsed is a `single` plan saying why (the plain reader then answers), never an error.
"""

from __future__ import annotations

import re

from amsrag.decompose.plan import MAX_HOPS, SLOT, Plan, PlanKind, Step
from amsrag.decompose.tagger import VALUE_OF, operator_of
from amsrag.generate.base import Completes

PROMPT = """Break the question into the simple questions a search engine can answer one at a time.
Write one line per follow-up question, "Follow up: <question>". Write #1 in a follow-up where the answer of the
first follow-up goes (#2 for the second). If the question compares two or more things, first write
"Compare: <thing> | <thing>" and then the follow-ups for the first thing only, with {E} where the thing goes.
If one search answers the question, write only "Follow up:" with the question itself.

Question: Who is the spouse of the director of film Titanic?
Follow up: Who is the director of film Titanic?
Follow up: Who is the spouse of #1?

Question: Which film came out first, Kiss and Tell or The Big Sleep?
Compare: Kiss and Tell | The Big Sleep
Follow up: When did {E} come out?

Question: {question}
"""
_FOLLOW = re.compile(r"^\s*follow[ -]up\s*:\s*(.+?)\s*$", re.I | re.M)
_COMPARE = re.compile(r"^\s*compare\s*:\s*(.+?)\s*$", re.I | re.M)


class LLMDecomposer:
    name = "llm"

    def __init__(self, llm: Completes) -> None:
        self.llm = llm

    def decompose(self, question: str) -> Plan:
        reply = self.llm.complete(PROMPT.replace("{question}", question))
        return parse_reply(question, reply)


def parse_reply(question: str, reply: str) -> Plan:
    """The plan a self-ask reply describes (a `single` plan with a note when it describes none)."""
    follows = [f.strip() for f in _FOLLOW.findall(reply)][:MAX_HOPS]
    compare = _COMPARE.search(reply)
    if compare is not None:
        entities = tuple(e.strip() for e in compare.group(1).split("|") if e.strip())
        operator = operator_of(question)
        if len(entities) >= 2 and operator is not None and follows and "{E}" in follows[0]:
            chains = tuple(tuple(Step(f.replace("{E}", e if i == 0 else SLOT), e) for i, f in enumerate(follows))
                           for e in entities)
            return Plan("comparison", {"comparison": 1.0}, chains=chains, entities=entities, operator=operator,
                        value=VALUE_OF[operator], decided_by="llm")
        return Plan("single", {"single": 1.0}, decided_by="llm",
                    notes=("the comparison the model wrote names fewer than two things, no comparative, or no "
                           "{E} follow-up",))
    if len(follows) >= 2:
        steps = tuple(Step(re.sub(r"#\d", SLOT, f)) for f in follows)
        kind: PlanKind = "bridge"
        return Plan(kind, {kind: 1.0}, steps=steps, decided_by="llm")
    return Plan("single", {"single": 1.0}, decided_by="llm",
                notes=() if follows else ("the model wrote no follow-up question",))
