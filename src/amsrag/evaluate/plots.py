"""PNG figures of a run (matplotlib, Agg backend): quality vs retriever calls, latency breakdown, reliability."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from amsrag.plotting import pyplot
from amsrag.types import COMPLEXITIES

STAGE_ORDER = ("embed", "classify", "retrieve:bm25", "retrieve:dense", "retrieve:graph", "fusion", "mmr")


def quality_vs_calls(report: dict[str, Any], path: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, metric in zip(axes, ("ndcg@5", "f1"), strict=True):
        for name, s in report["systems"].items():
            y = s.get(metric)
            if y is None:
                continue
            x = s["retriever_calls_per_query"]
            ci = s["ci95"].get(metric)
            yerr = np.array([[y - ci[0]], [ci[1] - y]]) if ci else None
            ax.errorbar(x, y, yerr=yerr, fmt="o", capsize=3)
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_xlabel("retriever calls per query")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    fig.suptitle("Quality vs retriever calls (one point per system, 95% CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def latency_breakdown(report: dict[str, Any], path: Path) -> Path:
    plt = pyplot()
    names = list(report["systems"])
    seen = {k for n in names for k in report["systems"][n]["latency_breakdown_ms"]}
    stages = [s for s in STAGE_ORDER if s in seen] + sorted(seen - set(STAGE_ORDER))
    fig, ax = plt.subplots(figsize=(max(7, 0.6 * len(names) + 3), 4.5))
    bottom = np.zeros(len(names))
    for stage in stages:
        vals = np.array([report["systems"][n]["latency_breakdown_ms"].get(stage) or 0.0 for n in names])
        ax.bar(names, vals, bottom=bottom, label=stage)
        bottom += vals
    ax.scatter(names, [report["systems"][n]["latency_ms"]["mean"] for n in names], color="k", marker="_", s=200,
               label="measured mean (retrievers run in parallel)", zorder=3)
    ax.set_ylabel("mean ms per query")
    ax.set_title("Retrieval latency by stage")
    ax.tick_params(axis="x", rotation=60, labelsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def reliability(run_predictions: dict[str, Any], truth: list[str | None], path: Path) -> Path | None:
    """Reliability diagram of the classifier's three-way confidence on queries with a known class."""
    from amsrag.calibration import reliability_bins

    known = np.array([t in COMPLEXITIES for t in truth])
    if not known.any():
        return None
    y = np.array([COMPLEXITIES.index(t) for t in truth if t in COMPLEXITIES])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    for name, lk, pk in (("uncalibrated", "label_uncalibrated", "probs_uncalibrated"),
                         ("calibrated", "label", "probs")):
        label = np.asarray(run_predictions[lk])[known]
        conf = np.asarray(run_predictions[pk])[known].max(axis=1)
        bins = reliability_bins(conf, label == y)
        ok = bins.count > 0
        ax.plot(bins.confidence[ok], bins.accuracy[ok], "o-", label=name)
    ax.set_xlabel("confidence (alpha)")
    ax.set_ylabel("accuracy")
    ax.set_title("Classifier reliability on the eval queries")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
