"""Monitoring after generation (issue 22, seed 003 §6–7): the five proxy signals of one answer, and what
reads them over many (the metrics, the monitor report, drift, shadow probes, the review queue)."""

from amsrag.monitor.signals import ProxySignals, proxy_signals

__all__ = ["ProxySignals", "proxy_signals"]
