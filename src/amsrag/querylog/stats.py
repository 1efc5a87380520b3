"""A summary of a query log's entries: `amsrag ops querylog stats`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from amsrag.querylog.entry import QueryLogEntry, iso


def summarise(entries: Iterable[QueryLogEntry]) -> dict[str, Any]:
    """Counts by route label, strategy, system and source; abstention and flagged rates (flagged among the
    audited answers); total latency percentiles; the time span."""
    n = abstained = audited = flagged = escalated = 0
    by: dict[str, Counter[str]] = {k: Counter() for k in ("route_label", "label", "strategy", "system", "source")}
    ms: list[float] = []
    first = last = None
    for e in entries:
        n += 1
        abstained += e.abstained
        audited += e.audit is not None
        flagged += e.flagged
        escalated += e.escalations > 0
        for key, counter in by.items():
            counter[str(getattr(e, key) or "-")] += 1
        if e.total_ms is not None:
            ms.append(e.total_ms)
        first = e.ts if first is None or e.ts < first else first
        last = e.ts if last is None or e.ts > last else last
    pct = np.percentile(ms, [50, 95]).round(1).tolist() if ms else [None, None]
    return {
        "entries": n, "first": iso(first) if first else None, "last": iso(last) if last else None,
        **{f"by_{key}": dict(counter.most_common()) for key, counter in by.items()},
        "abstained": abstained, "abstention_rate": round(abstained / n, 4) if n else None,
        "escalated": escalated, "escalation_rate": round(escalated / n, 4) if n else None,
        "audited": audited, "flagged": flagged, "flagged_rate": round(flagged / audited, 4) if audited else None,
        "total_ms_p50": pct[0], "total_ms_p95": pct[1],
    }
