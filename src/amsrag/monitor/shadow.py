"""Shadow-path probes (seed 003 §6.3): after an answer is returned, a sample of gray-zone questions runs again
on the widest route in the background, and the two answers and their evidence are compared. A disagreement
is a misroute candidate: the cheap route may have lost the evidence the wide one finds.

What is probed (`SamplingPolicy`):
- an answer of an adaptive system on the text path whose route is not already the widest (multi_hop on
  Strategy C, or escalated to it). Fixed pipelines have one route; answers of the table and global routes
  (the five-way decision, abstentions included) come from another kind of evidence; the widest route has
  nothing wider. Abstentions on the text path are probed: a wider route may find what a cheap one missed;
- with share `gray_share` when the routing alpha (trace["signals"]["route_alpha"]) lies in the gray zone
  ([monitor] gray_zone_low..gray_zone_high), else with share `random_share` (a seeded draw), so confident
  routes are audited too.

How it stays off the request path (`ShadowProber`): `offer` only draws, checks the budget (at most
`per_minute` probes admitted in any 60 s) and puts the probe on a bounded queue (full: dropped); one daemon
worker runs probes one at a time, each only once `busy()` says no request is in flight (a probe that waited
`max_wait_s` is dropped), on its own thread at a lower scheduling priority (Linux), abandoned after
`timeout_s`. A probe's error is logged and counted, never raised: the request was answered before.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import random
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from amsrag.audit.signals import in_gray_zone
from amsrag.config import MonitorConfig, ShadowConfig
from amsrag.generate.metrics import exact_match, f1_score
from amsrag.generate.zh_metrics import char_em, char_f1, is_cjk
from amsrag.pipeline.systems import SYSTEMS

log = logging.getLogger("amsrag.monitor")

# Every outcome an offered answer can have. Offer: ineligible | not_sampled | dropped_budget | dropped_queue |
# queued. A queued probe: dropped_busy, or run and then one of agreed | disagreed | timeout | failed.
OUTCOMES = ("ineligible", "not_sampled", "dropped_budget", "dropped_queue", "queued", "dropped_busy", "run",
            "agreed", "disagreed", "timeout", "failed")
OTHER_ROUTES = ("table", "global")


# ---------------------------------------------------------------------------- comparison
def _ranked_gain(reference: Sequence[str], other: Sequence[str]) -> float:
    """nDCG of `other` where a passage's relevance is 1/log2(1 + its rank in `reference`) (0 if absent),
    against `reference` itself as the ideal ranking."""
    rank = {pid: i for i, pid in enumerate(reference, 1)}
    dcg = sum(1 / math.log2(1 + rank[pid]) / math.log2(1 + i) for i, pid in enumerate(other, 1) if pid in rank)
    ideal = sum(1 / math.log2(1 + i) ** 2 for i in range(1, len(reference) + 1))
    return dcg / ideal


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def evidence_overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """A rank-weighted overlap of two ranked evidence lists, in [0, 1]: the mean of the nDCG of each list
    graded by the other's ranks (`_ranked_gain`). 1: the same passages in the same order (or both empty);
    0: no passage in common (or one empty). Passages near the top of both lists weigh the most."""
    a, b = _unique(a), _unique(b)
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    return (_ranked_gain(a, b) + _ranked_gain(b, a)) / 2


def answer_agreement(a: str, a_abstained: bool, b: str, b_abstained: bool) -> tuple[bool, float]:
    """(normalised exact match, token F1) of two answers. Two abstentions agree; an abstention and an answer
    do not. Chinese answers are compared by characters (`zh_metrics`), others by SQuAD-normalised tokens."""
    if a_abstained or b_abstained:
        return (a_abstained and b_abstained), float(a_abstained and b_abstained)
    if any(is_cjk(ch) for ch in a + b):
        return bool(char_em(a, [b])), char_f1(a, [b])
    return bool(exact_match(a, [b])), f1_score(a, [b])


def _support(answer: Mapping[str, Any]) -> float | None:
    value = ((answer.get("trace") or {}).get("audit") or {}).get("support")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _route(answer: Mapping[str, Any]) -> str:
    trace = answer.get("trace") or {}
    cx = trace.get("complexity") or {}
    return f"{cx.get('route_label', cx.get('label')) or '-'}/{trace.get('strategy') or '-'}"


def _evidence(answer: Mapping[str, Any]) -> list[str]:
    """The passages the generator read (trace["evidence"]), else what the answer cites."""
    trace = answer.get("trace") or {}
    evidence = trace.get("evidence")
    return [str(x) for x in (evidence if evidence is not None else answer.get("citations") or [])]


@dataclass(frozen=True, slots=True)
class ShadowComparison:
    """An answer against the wider path's answer to the same question (`shadow`: that answer's body, trace
    included). `disagrees`: the answers differ (token F1 below `min_f1`, or one abstained), or the wider
    path's citation support is at least `support_margin` above the answer's; `reasons` says which."""

    query: str
    system: str
    route: str  # "class/strategy" the answer took
    shadow_route: str
    answer: str
    shadow_answer: str
    exact_match: bool
    f1: float
    evidence_overlap: float  # `evidence_overlap` of the two evidence lists
    citation_overlap: float  # the same over the cited passages
    support: float | None  # the audit's citation support of each answer (None: not audited)
    shadow_support: float | None
    reasons: tuple[str, ...]
    ms: float  # the wider path's time
    shadow: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def disagrees(self) -> bool:
        return bool(self.reasons)

    @property
    def support_gain(self) -> float | None:
        if self.support is None or self.shadow_support is None:
            return None
        return self.shadow_support - self.support

    def to_dict(self, with_shadow: bool = False) -> dict[str, Any]:
        """The comparison; `with_shadow`: the wider path's answer body too (its trace is large)."""
        gain = self.support_gain
        out: dict[str, Any] = {
            "query": self.query, "system": self.system, "route": self.route, "shadow_route": self.shadow_route,
            "answer": self.answer, "shadow_answer": self.shadow_answer, "exact_match": self.exact_match,
            "f1": round(self.f1, 4), "evidence_overlap": round(self.evidence_overlap, 4),
            "citation_overlap": round(self.citation_overlap, 4), "support": self.support,
            "shadow_support": self.shadow_support, "support_gain": None if gain is None else round(gain, 4),
            "disagrees": self.disagrees, "reasons": list(self.reasons), "ms": round(self.ms, 1)}
        if with_shadow:
            out["shadow"] = dict(self.shadow)
        return out


def compare(query: str, system: str, answer: Mapping[str, Any], shadow: Mapping[str, Any], config: ShadowConfig,
            ms: float = 0.0) -> ShadowComparison:
    """`answer` (an answer body: answer, citations, abstained, trace) against `shadow`, the wider path's."""
    text, abstained = str(answer.get("answer") or ""), bool(answer.get("abstained"))
    wide, wide_abstained = str(shadow.get("answer") or ""), bool(shadow.get("abstained"))
    em, f1 = answer_agreement(text, abstained, wide, wide_abstained)
    support, wide_support = _support(answer), _support(shadow)
    reasons: list[str] = []
    if abstained != wide_abstained:
        reasons.append("the wider path abstained" if wide_abstained else "the answer abstained, the wider path "
                       "answered")
    elif not em and f1 < config.min_f1:
        reasons.append(f"the answers differ (token F1 {f1:.2f} < {config.min_f1})")
    if support is not None and wide_support is not None and wide_support - support >= config.support_margin:
        reasons.append(f"the wider path's citation support {wide_support:.2f} is {wide_support - support:+.2f} "
                       f"above the answer's (margin {config.support_margin})")
    return ShadowComparison(
        query, system, _route(answer), _route(shadow), text, wide, em, f1,
        evidence_overlap(_evidence(answer), _evidence(shadow)),
        evidence_overlap([str(c) for c in answer.get("citations") or []],
                         [str(c) for c in shadow.get("citations") or []]),
        support, wide_support, tuple(reasons), ms, shadow)


# ---------------------------------------------------------------------------- sinks
@runtime_checkable
class MisrouteSink(Protocol):
    """Where disagreements go: each is a misroute candidate (`answer`: the answer body that was returned)."""

    def misroute_candidate(self, query: str, answer: dict[str, Any], comparison: ShadowComparison) -> None: ...


class LoggingSink:
    """The default sink: a warning on the "amsrag.monitor" logger per candidate, and a count.
    `redact`: applied to the question and answers before they are logged (the service's secret redactor)."""

    def __init__(self, redact: Callable[[str], str] | None = None, max_chars: int = 200) -> None:
        self.redact = redact or (lambda s: s)
        self.max_chars = max_chars
        self.count = 0
        self._lock = threading.Lock()

    def _cut(self, text: str) -> str:
        text = self.redact(text)
        return text if len(text) <= self.max_chars else text[: self.max_chars] + "…"

    def misroute_candidate(self, query: str, answer: dict[str, Any], comparison: ShadowComparison) -> None:
        with self._lock:
            self.count += 1
        log.warning("misroute candidate: %r on %s answered %r, the widest route (%s) %r: %s",
                    self._cut(query), comparison.route, self._cut(comparison.answer), comparison.shadow_route,
                    self._cut(comparison.shadow_answer), "; ".join(comparison.reasons))


# ---------------------------------------------------------------------------- sampling and budget
@dataclass(frozen=True, slots=True)
class Decision:
    """Whether an answer is probed: `outcome` is "queued"-bound (probe) or why not; `why` for the log."""

    probe: bool
    outcome: str  # gray | random when probe, else ineligible | not_sampled
    why: str


def already_widest(trace: Mapping[str, Any]) -> bool:
    """The route is multi_hop on Strategy C, or escalated to it (C -> C is the one-hop C widened to multi-hop)."""
    cx = trace.get("complexity") or {}
    label = cx.get("route_label", cx.get("label"))
    if trace.get("strategy") == "C" and label == "multi_hop":
        return True
    return any(e.get("to") == "C" and (e.get("from") == "C" or label == "multi_hop")
               for e in trace.get("escalations") or [])


class SamplingPolicy:
    """Which answers are probed (module docstring), with a seeded draw (thread-safe)."""

    def __init__(self, config: ShadowConfig, monitor: MonitorConfig | None = None) -> None:
        self.config = config
        self.monitor = monitor or MonitorConfig()
        self._rng = random.Random(config.seed)
        self._lock = threading.Lock()

    def eligible(self, system: str, answer: Mapping[str, Any]) -> str | None:
        """None when `answer` can be probed, else why not."""
        spec = SYSTEMS.get(system)
        if spec is None or not spec.adaptive:
            return f"system {system!r} has a fixed route"
        trace = answer.get("trace") or {}
        if not trace:
            return "the answer has no trace"
        if trace.get("strategy") in OTHER_ROUTES:
            return f"an answer of the {trace['strategy']} route"
        if already_widest(trace):
            return "already the widest route"
        return None

    def decide(self, system: str, answer: Mapping[str, Any]) -> Decision:
        why = self.eligible(system, answer)
        if why is not None:
            return Decision(False, "ineligible", why)
        signals = (answer.get("trace") or {}).get("signals") or {}
        alpha = signals.get("route_alpha")
        alpha = float(alpha) if isinstance(alpha, int | float) and not isinstance(alpha, bool) else None
        gray = in_gray_zone(alpha, self.monitor)
        share = self.config.gray_share if gray else self.config.random_share
        with self._lock:
            drawn = self._rng.random() < share
        kind = "gray" if gray else "random"
        if not drawn:
            return Decision(False, "not_sampled", f"{kind} share {share}")
        return Decision(True, kind, f"alpha {alpha} {'in' if gray else 'outside'} the gray zone")


class MinuteBudget:
    """At most `per_minute` admissions in any 60 s (a sliding window over the admission times)."""

    WINDOW_S = 60.0

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            now = self.clock()
            while self._times and now - self._times[0] >= self.WINDOW_S:
                self._times.popleft()
            if len(self._times) >= self.per_minute:
                return False
            self._times.append(now)
            return True

    def refund(self) -> None:
        """Give back the last admission (its probe could not be queued)."""
        with self._lock:
            if self._times:
                self._times.pop()


def lower_priority(nice: int) -> None:
    """Raise the calling thread's niceness by `nice` (Linux schedules threads one by one; elsewhere the call
    would renice the process, so it does nothing). Threads this thread starts inherit it."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
    except OSError as exc:
        log.debug("shadow probes run at the server's priority: %s", exc)


# ---------------------------------------------------------------------------- the prober
@dataclass(frozen=True, slots=True)
class _Probe:
    query: str
    system: str
    answer: dict[str, Any]
    queued_at: float


class ShadowProber:
    """Probes answered questions on the wider path in the background (module docstring).

    `wider(query, system)`: the wider path's answer body (the service runs `Engine.ask(..., widest=True)` under
    its read lock); `busy()`: a request is in flight (checked before a probe starts); `sink`: receives the
    disagreements; `on_outcome(name)` / `on_latency(seconds)`: metrics hooks. `counts` holds every outcome."""

    def __init__(self, wider: Callable[[str, str], Mapping[str, Any]], config: ShadowConfig,
                 monitor: MonitorConfig | None = None, *, sink: MisrouteSink | None = None,
                 busy: Callable[[], bool] | None = None, on_outcome: Callable[[str], None] | None = None,
                 on_latency: Callable[[float], None] | None = None, clock: Callable[[], float] = time.monotonic,
                 poll_s: float = 0.02) -> None:
        self.wider = wider
        self.config = config
        self.policy = SamplingPolicy(config, monitor)
        self.budget = MinuteBudget(config.per_minute, clock)
        self.sink: MisrouteSink = sink if sink is not None else LoggingSink()
        self.busy: Callable[[], bool] = busy or (lambda: False)
        self.on_outcome = on_outcome
        self.on_latency = on_latency
        self.clock = clock
        self.poll_s = poll_s
        self.counts: Counter[str] = Counter()
        self.comparisons: deque[ShadowComparison] = deque(maxlen=32)  # the last few, for inspection
        self._queue: queue.Queue[_Probe] = queue.Queue(maxsize=config.queue_size)
        self._lock = threading.Lock()
        self._pending = 0  # queued or running
        self._settled = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._wake = threading.Event()  # set when a probe is queued
        self._abandoned: threading.Thread | None = None
        self._worker = threading.Thread(target=self._run, name="amsrag-shadow", daemon=True)
        self._worker.start()

    # ---------------------------------------------------------------- the request side
    def offer(self, query: str, system: str, answer: dict[str, Any]) -> str:
        """Consider an answered question for a probe; returns the outcome (OUTCOMES). Never raises."""
        try:
            outcome = self._admit(query, system, answer)
        except Exception:
            log.exception("shadow probe: considering an answer failed")
            outcome = "failed"
        self._count(outcome)
        return outcome

    def _admit(self, query: str, system: str, answer: dict[str, Any]) -> str:
        decision = self.policy.decide(system, answer)
        if not decision.probe:
            return decision.outcome
        if self._stop.is_set():
            return "dropped_queue"
        if not self.budget.take():
            return "dropped_budget"
        with self._lock:
            try:
                self._queue.put_nowait(_Probe(query, system, answer, self.clock()))
            except queue.Full:
                self.budget.refund()
                return "dropped_queue"
            self._pending += 1
        self._wake.set()
        return "queued"

    # ---------------------------------------------------------------- the worker
    def _run(self) -> None:
        while not self._stop.is_set():
            if self._queue.empty():
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            if not self._idle():  # probes stay queued (the queue's bound holds) while requests run
                self._stop.wait(self.poll_s)
                continue
            try:
                probe = self._queue.get_nowait()
            except queue.Empty:
                continue
            try:
                self._handle(probe)
            except Exception:  # the worker outlives any probe
                log.exception("shadow probe of %r failed", probe.query[:200])
                self._count("failed")
            finally:
                with self._lock:
                    self._pending -= 1
                    self._settled.notify_all()

    def _handle(self, probe: _Probe) -> None:
        if not self._wait_for_idle(probe):
            self._count("dropped_busy")
            return
        self._count("run")
        box: dict[str, Any] = {}
        t = time.perf_counter()
        thread = threading.Thread(target=self._execute, args=(probe, box), name="amsrag-shadow-probe", daemon=True)
        thread.start()
        thread.join(self.config.timeout_s)
        seconds = time.perf_counter() - t
        if thread.is_alive():
            self._abandoned = thread  # the next probe waits for it: never two at once
            log.warning("shadow probe of %r still running after %.0f s: abandoned", probe.query[:200],
                        self.config.timeout_s)
            self._count("timeout")
            return
        self._observe(seconds)
        if "error" in box:
            exc = box["error"]
            log.warning("shadow probe of %r failed: %s: %s", probe.query[:200], type(exc).__name__, exc)
            self._count("failed")
            return
        comparison = compare(probe.query, probe.system, probe.answer, box["shadow"], self.config, seconds * 1000)
        self.comparisons.append(comparison)
        if not comparison.disagrees:
            self._count("agreed")
            return
        self._count("disagreed")
        try:
            self.sink.misroute_candidate(probe.query, probe.answer, comparison)
        except Exception:
            log.exception("the misroute sink failed on %r", probe.query[:200])

    def _execute(self, probe: _Probe, box: dict[str, Any]) -> None:
        lower_priority(self.config.nice)
        try:
            box["shadow"] = self.wider(probe.query, probe.system)
        except BaseException as exc:  # reported by the worker
            box["error"] = exc

    def _idle(self) -> bool:
        """No request in flight and no abandoned probe still running."""
        abandoned = self._abandoned
        if abandoned is not None and abandoned.is_alive():
            return False
        try:
            return not self.busy()
        except Exception:
            log.exception("shadow probe: busy() failed; treated as busy")
            return False

    def _wait_for_idle(self, probe: _Probe) -> bool:
        """Wait until `_idle` (a request may have come in since the probe was taken); False once the probe
        has waited `max_wait_s` since it was queued, or on close."""
        while True:
            if self._stop.is_set() or self.clock() - probe.queued_at > self.config.max_wait_s:
                return False
            if self._idle():
                return True
            self._stop.wait(self.poll_s)

    def _count(self, outcome: str) -> None:
        with self._lock:
            self.counts[outcome] += 1
        if self.on_outcome is not None:
            try:
                self.on_outcome(outcome)
            except Exception:
                log.exception("shadow probe: the outcome hook failed")

    def _observe(self, seconds: float) -> None:
        if self.on_latency is not None:
            try:
                self.on_latency(seconds)
            except Exception:
                log.exception("shadow probe: the latency hook failed")

    # ---------------------------------------------------------------- lifecycle
    def drain(self, timeout: float) -> bool:
        """Wait until every queued probe has settled; False if some are still pending after `timeout` s."""
        deadline = time.monotonic() + timeout
        with self._settled:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._settled.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Stop the worker (a running probe gets up to `timeout` s; queued ones are dropped)."""
        self._stop.set()
        self._wake.set()
        self._worker.join(timeout)
