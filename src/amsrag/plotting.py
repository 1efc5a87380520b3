"""matplotlib for figures written to files: the evaluation's and the monitor's (issue 41: a ground-floor module,
so the monitor draws without standing on the evaluation)."""

from __future__ import annotations


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
