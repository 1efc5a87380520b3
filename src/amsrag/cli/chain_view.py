"""The decomposer's plan and the chain's steps as `amsrag ask` and `amsrag demo` print them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.text import Text


def print_chain(trace: Mapping[str, Any], out: Console) -> None:
    """The decomposer's plan and the chain's steps, under the answer (nothing for a one-step question)."""
    chain = trace.get("chain") or {}
    plan = chain.get("plan") or {}
    if not chain or plan.get("kind", "single") == "single":
        return
    head = f"plan {plan['kind']} ({plan['confidence']:.2f})"
    if plan.get("operator"):
        head += f", {plan['operator']} of {' / '.join(plan.get('entities', []))}"
    if chain.get("steps"):
        verdict = "answered by the chain" if chain.get("used") else (
            f"the plain reader's answer stands: {chain.get('reason')}" if chain.get("failed_step") is None
            else f"chain failed at step {chain['failed_step']}: {chain.get('reason')}")
        head += f": {verdict}"
        if chain.get("used"):
            head += f" ({chain.get('reason')})"
    else:
        head += f": {chain.get('reason')}"
    out.print(Text(head, style="dim"), highlight=False, soft_wrap=True)
    for i, step in enumerate(chain.get("steps", []), 1):
        answer = step["answer"] or "—"
        tail = f"  failed: {step['failed']}" if step.get("failed") else ""
        if step.get("audit"):
            tail += f"  audit {step['audit']['support']:.2f}{' (flagged)' if step['audit']['flagged'] else ''}"
        out.print(Text(f"  {i}. {step['question']} → {answer} [{step.get('passage') or '-'}] "
                       f"conf {step['confidence']:.2f}, {'+'.join(step['retrievers'])}, {step['ms']:.0f} ms{tail}",
                       style="dim"), highlight=False, soft_wrap=True)
