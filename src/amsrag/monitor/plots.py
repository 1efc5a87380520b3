"""The monitor report's figures (matplotlib on the Agg backend, `amsrag.plotting`, as the evaluation draws)."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.audit.signals import RATES
from amsrag.plotting import pyplot

SHORT = {"escalated": "escalated", "gray_zone": "gray zone", "flagged": "flagged", "disagreement": "disagreement",
         "sufficiency_failed": "insufficient"}


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)
    return path


def _times(values: list[str]) -> list[datetime]:
    return [datetime.fromisoformat(v.replace("Z", "+00:00")) for v in values]


def signals_over_time(report: dict[str, Any], path: Path) -> Path:
    plt = pyplot()
    rows = report["buckets"]
    x = _times([r["start"] for r in rows])
    fig, axes = plt.subplots(len(RATES), 1, figsize=(9, 1.8 * len(RATES) + 0.6), sharex=True)
    for ax, rate in zip(axes, RATES, strict=True):
        ax.plot(x, [r[rate] for r in rows], marker="o", ms=3)
        ax.set_ylabel(SHORT[rate], fontsize=8)
        ax.set_ylim(-0.02, max(0.1, max(r[rate] for r in rows) * 1.15))
        ax.grid(alpha=0.3)
    if len(x) == 1:  # one bucket: matplotlib would otherwise span years around it
        axes[-1].set_xlim(x[0] - timedelta(hours=1), x[0] + timedelta(hours=1))
    axes[-1].tick_params(axis="x", rotation=30, labelsize=7)
    fig.suptitle(f"Proxy signals per {report['bucket']} bucket (share of answers)")
    return _save(fig, path)


def support_by_route(report: dict[str, Any], path: Path) -> Path:
    plt = pyplot()
    data = report["series"]["support"]
    routes = sorted(data)
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(routes) + 2), 4))
    ax.boxplot([data[r] for r in routes], showmeans=True)
    ax.set_xticks(range(1, len(routes) + 1), [f"{r}\n(n={len(data[r])})" for r in routes])
    ax.set_ylabel("citation support (audit)")
    ax.set_ylim(0, 1)
    ax.set_title("Citation support by route")
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def alpha_vs_reference(report: dict[str, Any], path: Path) -> Path:
    plt = pyplot()
    shares = report["alpha_shares"]
    edges = [0.0, *shares["edges"], 1.0]
    names = [f"{lo:.4f}–{hi:.4f}" for lo, hi in pairwise(edges)]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(x - 0.2, shares["reference"], 0.4, label="reference")
    ax.bar(x + 0.2, shares["log"], 0.4, label="query log (range)")
    ax.set_xticks(x, names, rotation=45, fontsize=7)
    ax.set_xlabel("routing alpha (bins at the reference's deciles)")
    ax.set_ylabel("share of routed answers")
    ax.set_title(f"Alpha against the reference (last-window PSI {report['verdict']['psi']['alpha']:.3f})")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def route_mix(report: dict[str, Any], path: Path) -> Path:
    plt = pyplot()
    mix = report["route_mix"]
    labels = list(mix["reference"])
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for i, (key, title) in enumerate((("reference", "reference"), ("log", "whole range"),
                                      ("window", "last window"))):
        ax.bar(x + (i - 1) * 0.27, [mix[key].get(k, 0.0) for k in labels], 0.27, label=title)
    ax.set_xticks(x, labels)
    ax.set_ylabel("share of routed answers")
    ax.set_title(f"Route mix (last-window PSI {report['verdict']['psi']['route']:.3f})")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def drift_psi(report: dict[str, Any], path: Path) -> Path:
    plt = pyplot()
    series = report["series"]["drift"]
    x = [d["entry"] for d in series]
    fig, ax = plt.subplots(figsize=(9, 4))
    for key, title in (("alpha", "alpha"), ("route", "route mix"), ("gray_zone", "gray-zone share")):
        ax.plot(x, [d[key] for d in series], label=title)
    ax.axhline(report["threshold"], color="r", ls="--", lw=1, label=f"alarm (PSI {report['threshold']:g})")
    ax.set_xlabel(f"log entry (each point: the {report['window']} routed answers before it)")
    ax.set_ylabel("PSI against the reference")
    ax.set_title("Drift over rolling windows")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)
