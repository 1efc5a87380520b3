"""Monitoring over many answers (issue 22, seed 003 §6–7): drift of the routing against a reference, the
monitor report over the query log, shadow-path probes. The per-answer proxy signals they read are computed
after generation, in `amsrag.audit.signals`."""
