"""The decomposer Protocol: the offline tagger (`tagger.TaggerDecomposer`) and the LLM one (`llm.LLMDecomposer`)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from amsrag.decompose.plan import Plan


@runtime_checkable
class Decomposer(Protocol):
    name: str

    def decompose(self, question: str) -> Plan: ...
