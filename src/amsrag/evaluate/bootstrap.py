"""Non-parametric bootstrap over queries (DESIGN §7): percentile CIs and paired tests.

One matrix of resampled query indices is drawn per run (seeded) and shared by every system and
metric, so the resamples are paired across systems. Values are per-query arrays where NaN marks a
query the metric does not apply to (it is left out of each resample's mean).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

B_DEFAULT = 1000


@dataclass(frozen=True, slots=True)
class Bootstrap:
    indices: np.ndarray  # (B, n) query indices

    @classmethod
    def draw(cls, n: int, b: int = B_DEFAULT, seed: int = 0) -> Bootstrap:
        if n < 1:
            raise ValueError("the bootstrap needs at least one query")
        rng = np.random.default_rng(seed)
        return cls(rng.integers(0, n, size=(b, n), dtype=np.int32))

    @property
    def b(self) -> int:
        return int(self.indices.shape[0])

    def means(self, values: np.ndarray) -> np.ndarray:
        """The mean of each resample (NaN queries left out; NaN if a resample holds none)."""
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (self.indices.shape[1],):
            raise ValueError(f"expected {self.indices.shape[1]} values, got shape {v.shape}")
        sample = v[self.indices]
        ok = ~np.isnan(sample)
        count = ok.sum(axis=1)
        total = np.where(ok, sample, 0.0).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    def ci(self, values: np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
        """Percentile interval of the mean; None when no query has a value."""
        m = self.means(values)
        m = m[~np.isnan(m)]
        if m.size == 0:
            return None
        tail = (1.0 - level) / 2 * 100
        lo, hi = np.percentile(m, [tail, 100 - tail])
        return float(lo), float(hi)

    def paired_p(self, values: np.ndarray, baseline: np.ndarray) -> float | None:
        """Two-sided paired-bootstrap p-value of mean(values - baseline) = 0 over the queries where both are set.

        The resampled differences are centred on the observed one (the null distribution), and
        p = (1 + #{|d*_b - d| >= |d|}) / (B + 1). Identical systems give p = 1.
        """
        a, b = np.asarray(values, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
        diff = a - b  # NaN where either is missing
        if np.all(np.isnan(diff)):
            return None
        observed = float(np.nanmean(diff))
        if np.nanmax(np.abs(diff)) == 0.0:
            return 1.0
        boot = self.means(diff)
        boot = boot[~np.isnan(boot)]
        extreme = np.sum(np.abs(boot - observed) >= abs(observed) - 1e-12)
        return float((1 + extreme) / (boot.size + 1))
