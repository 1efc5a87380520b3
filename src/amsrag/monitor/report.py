"""The monitor report of a query log (`amsrag ops monitor report`): the five proxy signals over time, citation
support by route, the routing distribution against the drift reference, drift over rolling windows, and the
verdict with what to do. `build_report` reads the entries once; `write_report` writes report.md and PNGs."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.audit.signals import INSUFFICIENT_ACTIONS, RATES, ProxySignals
from amsrag.lazy import extra_hint, installed
from amsrag.monitor.drift import (
    DriftDetector,
    DriftReference,
    RouteObservation,
    in_band,
    observation_from_entry,
    route_labels,
)
from amsrag.querylog.entry import QueryLogEntry, iso

RATE_TITLES = {"escalated": "escalation rate", "gray_zone": "gray-zone share", "flagged": "flagged share",
               "disagreement": "evidence-confidence disagreement share",
               "sufficiency_failed": "sufficiency-failure share"}
BUCKETS = (timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=15), timedelta(hours=1),
           timedelta(hours=6), timedelta(days=1), timedelta(days=7), timedelta(days=30))
MAX_BUCKETS = 40  # the finest bucket that keeps the time axis at or under this many
MAX_DRIFT_POINTS = 500  # rolling-window PSI points kept for the plot


@dataclass(frozen=True, slots=True)
class LogPoint:
    """What the report reads of one entry."""

    ts: datetime
    route: str  # the class routing acted on ("none": not routed)
    observation: RouteObservation | None
    escalated: bool
    gray_zone: bool
    flagged: bool
    disagreement: bool
    sufficiency_failed: bool
    support: float | None


def point_of(entry: QueryLogEntry, band: tuple[float, float]) -> LogPoint:
    """The entry's proxy signals (stored under signals["proxy"]; rows from before they existed are read from
    their columns); the gray zone is recomputed from the routing alpha with `band`, the monitor's own."""
    obs = observation_from_entry(entry)
    proxy = (entry.signals or {}).get("proxy")
    gray = obs is not None and in_band(obs.alpha, band)
    route = obs.label if obs is not None else (entry.route_label or "none")
    if isinstance(proxy, dict):
        s = ProxySignals.from_dict(proxy)
        return LogPoint(entry.ts, route, obs, s.escalated, gray, s.flagged, s.disagreement, s.sufficiency_failed,
                        s.support)
    audit = entry.audit or {}
    support = audit.get("support")
    return LogPoint(entry.ts, route, obs, entry.escalations > 0, gray, entry.flagged, False,
                    entry.corrective_action in INSUFFICIENT_ACTIONS,
                    float(support) if isinstance(support, int | float) and not isinstance(support, bool) else None)


def bucket_width(first: datetime, last: datetime) -> timedelta:
    span = last - first
    return next((b for b in BUCKETS if span / b <= MAX_BUCKETS), BUCKETS[-1])


def _floor(ts: datetime, width: timedelta, origin: datetime) -> datetime:
    return origin + width * ((ts - origin) // width)


def _quantiles(values: list[float]) -> dict[str, Any]:
    a = np.array(values)
    q = np.quantile(a, [0.1, 0.5, 0.9]).round(4).tolist()
    return {"n": len(values), "mean": round(float(a.mean()), 4), "p10": q[0], "p50": q[1], "p90": q[2]}


def build_report(entries: Iterable[QueryLogEntry], reference: DriftReference, band: tuple[float, float],
                 window: int, threshold: float, index: str,
                 advance: Callable[[int], None] | None = None) -> dict[str, Any]:
    """The report's numbers (JSON-ready); `series` holds what the figures draw."""
    points: list[LogPoint] = []
    detector = DriftDetector(reference, window=window, threshold=threshold, band=band, index=index)
    drift: list[dict[str, Any]] = []
    first_alarm: dict[str, Any] | None = None
    alarmed_windows = ready_windows = 0
    max_psi = dict.fromkeys(("alpha", "route", "gray_zone"), 0.0)
    routed = 0
    for i, entry in enumerate(entries):
        p = point_of(entry, band)
        points.append(p)
        if p.observation is not None:
            routed += 1
            detector.observe(p.observation)
            s = detector.status()
            if s.ready:
                ready_windows += 1
                alarmed_windows += s.alarm
                max_psi = {k: max(v, s.psi[k]) for k, v in max_psi.items()}
                if s.alarm and first_alarm is None:
                    first_alarm = {"ts": iso(p.ts), "entry": i + 1, "signals": s.alarmed_by}
                drift.append({"entry": i + 1, "ts": p.ts, **s.psi})
        if advance is not None and (i + 1) % 100 == 0:
            advance(100)
    if advance is not None and len(points) % 100:
        advance(len(points) % 100)
    verdict = detector.status()
    out: dict[str, Any] = {"index": index, "entries": len(points), "routed": routed,
                           "reference": {"source": reference.source, "n": reference.n,
                                         "classifier": reference.classifier, "created": reference.created},
                           "gray_zone": list(band), "window": window, "threshold": threshold,
                           "verdict": verdict.to_dict()}
    if not points:
        return out
    first, last = points[0].ts, points[-1].ts
    width = bucket_width(first, last)
    origin = _floor(first, width, datetime(2000, 1, 3, tzinfo=first.tzinfo))  # a Monday: weeks start on Mondays
    buckets: dict[datetime, list[LogPoint]] = defaultdict(list)
    for p in points:
        buckets[_floor(p.ts, width, origin)].append(p)
    rows = [{"start": iso(start), "answers": len(ps),
             **{r: round(sum(getattr(p, r) for p in ps) / len(ps), 4) for r in RATES}}
            for start, ps in sorted(buckets.items())]
    support: dict[str, list[float]] = defaultdict(list)
    for p in points:
        if p.support is not None:
            support[p.route].append(p.support)
    obs = [p.observation for p in points if p.observation is not None]
    alpha_counts = np.bincount([reference.bin_of(o.alpha) for o in obs], minlength=len(reference.alpha_counts))
    mix = Counter(o.label for o in obs)
    labels = route_labels({**reference.route_counts, **mix})
    stride = max(1, len(drift) // MAX_DRIFT_POINTS)
    kept = drift[::stride] + ([drift[-1]] if drift and (len(drift) - 1) % stride else [])
    out.update({
        "first": iso(first), "last": iso(last), "bucket": str(width),
        "totals": {r: round(sum(getattr(p, r) for p in points) / len(points), 4) for r in RATES},
        "buckets": rows,
        "support_by_route": {k: _quantiles(v) for k, v in sorted(support.items())},
        "alpha_shares": {"reference": [round(x, 4) for x in reference.alpha_shares],
                         "log": [round(c / len(obs), 4) for c in alpha_counts] if obs else [],
                         "edges": list(reference.alpha_edges)},
        "route_mix": {"reference": {k: round(reference.route_counts.get(k, 0) / reference.n, 4) for k in labels},
                      "log": {k: round(mix.get(k, 0) / len(obs), 4) for k in labels} if obs else {},
                      "window": verdict.to_dict()["route_mix"]},
        "drift": {"windows": ready_windows, "alarmed_windows": alarmed_windows, "first_alarm": first_alarm,
                  "max_psi": {k: round(v, 4) for k, v in max_psi.items()}},
        "series": {"support": dict(support), "drift": [{**d, "ts": iso(d["ts"])} for d in kept]},
    })
    return out


def write_report(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """report.md and the figures in `out_dir`; the files written."""
    from amsrag.monitor import plots

    out_dir.mkdir(parents=True, exist_ok=True)
    figures: list[Path] = []
    if report["entries"] and installed("matplotlib"):
        figures.append(plots.signals_over_time(report, out_dir / "signals_over_time.png"))
        if report["support_by_route"]:
            figures.append(plots.support_by_route(report, out_dir / "citation_support_by_route.png"))
        if report["routed"]:
            figures.append(plots.alpha_vs_reference(report, out_dir / "alpha_vs_reference.png"))
            figures.append(plots.route_mix(report, out_dir / "route_mix.png"))
        if report["series"]["drift"]:
            figures.append(plots.drift_psi(report, out_dir / "drift_psi.png"))
    md = out_dir / "report.md"
    note = "" if installed("matplotlib") else f"Not drawn: matplotlib is not installed ({extra_hint('plots')})."
    md.write_text(markdown(report, [f.name for f in figures], note), "utf-8")
    return [md, *figures]


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def markdown(report: dict[str, Any], figures: list[str], figures_note: str = "") -> str:
    v = report["verdict"]
    lines = [f"# Monitor report: {report['index']}", ""]
    if not report["entries"]:
        lines += ["The query log has **no entries** in the range: nothing to report. Answers are logged while "
                  "`[query_log] enabled = true` (or `amsrag serve --query-log`, `amsrag ask --log`).", ""]
        return "\n".join(lines)
    verdict = "DRIFT" if v["alarm"] else "no drift" if v["ready"] else "no verdict yet"
    lines += [f"{report['entries']} answers from {report['first']} to {report['last']} ({report['routed']} routed "
              f"by the classifier); time buckets of {report['bucket']}.", "",
              f"## Verdict: {verdict}", "", v["recommendation"] + ".", "",
              f"Drift compares the last {report['window']} routed answers with the reference "
              f"({report['reference']['source']}, {report['reference']['n']} answers, "
              f"{report['reference']['classifier'] or 'classifier unknown'}): population stability index (PSI) of "
              f"the routing alpha, the route mix and the gray-zone share (alpha in {report['gray_zone'][0]:g}–"
              f"{report['gray_zone'][1]:g}); the alarm is a PSI at or above {report['threshold']:g}.", ""]
    if report.get("reference_note"):
        lines += [f"**Note:** {report['reference_note']}", ""]
    lines += ["| signal | PSI, last window | highest PSI in the range |", "|---|---:|---:|"]
    for k in ("alpha", "route", "gray_zone"):
        highest = f"{report['drift']['max_psi'][k]:.3f}" if report["drift"]["windows"] else "— (no full window)"
        lines.append(f"| {k} | {v['psi'][k]:.3f} | {highest} |")
    d = report["drift"]
    lines += ["", f"{d['alarmed_windows']} of {d['windows']} full windows in the range alarmed" +
              (f"; the first at entry {d['first_alarm']['entry']} ({d['first_alarm']['ts']}, "
               f"{', '.join(d['first_alarm']['signals'])})." if d["first_alarm"] else "."), ""]
    lines += ["## Proxy signals", "", "| signal | whole range |", "|---|---:|"]
    lines += [f"| {RATE_TITLES[r]} | {_pct(report['totals'][r])} |" for r in RATES]
    lines += ["", "| route | audited answers | mean support | p10 | p50 | p90 |", "|---|---:|---:|---:|---:|---:|"]
    for route, q in report["support_by_route"].items():
        lines.append(f"| {route} | {q['n']} | {q['mean']:.3f} | {q['p10']:.3f} | {q['p50']:.3f} | {q['p90']:.3f} |")
    if not report["support_by_route"]:
        lines.append("| — | 0 (no answer was audited) | | | | |")
    mix = report["route_mix"]
    lines += ["", "| route | reference | whole range | last window |", "|---|---:|---:|---:|"]
    for k in mix["reference"]:
        lines.append(f"| {k} | {_pct(mix['reference'][k])} | {_pct(mix['log'].get(k))} | "
                     f"{_pct(mix['window'].get(k))} |")
    lines += ["", "## Figures", "", *([figures_note] if figures_note else [])]
    lines += [f"![{name}]({name})" for name in figures]
    lines += ["", "## Per time bucket", "", "| start (UTC) | answers | " + " | ".join(RATE_TITLES[r] for r in RATES)
              + " |", "|---|---:|" + "---:|" * len(RATES)]
    for row in report["buckets"]:
        lines.append(f"| {row['start']} | {row['answers']} | " + " | ".join(_pct(row[r]) for r in RATES) + " |")
    return "\n".join(lines) + "\n"
