"""Drift of the routing distribution (issue 22, seed 003 §7.1 step 5: "if the gray zone swells, retrain").

The classifier was calibrated on one distribution of questions; when the traffic moves away from it, its
confidences stop meaning what they did. Three signals of a window of recent answers are compared with a
reference (`DriftReference`, "the calibration split"):

- the routing alpha: population stability index (PSI) over ten bins cut at the reference's deciles;
- the route mix (the class routing acted on): PSI over the three classes;
- the gray-zone share (alpha in `[monitor] gray_zone_low..gray_zone_high`): PSI over in/out.

PSI = sum_i (w_i - r_i) ln(w_i / r_i) over shares smoothed with half a count per bin, so an empty bin
costs a bounded amount instead of an infinite one. The alarm is any PSI at or above 0.25, the conventional
"significant shift" level. With no drift the PSI of k bins between a window of n answers and a reference of
N is about (k - 1)(1/n + 1/N) (the chi-square approximation): 0.05 ± 0.025 for the alpha's ten bins at
n = 200, N = 2,000, so 0.25 sits eight standard deviations above it and a stream from the reference's
distribution does not cross it (docs/benchmarks/drift.md measures both directions). The detector gives no
verdict before its window is full: at n = 50 the same null PSI is 0.2 ± 0.1, too close to the threshold.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amsrag.errors import InputError
from amsrag.types import COMPLEXITIES

if TYPE_CHECKING:
    from amsrag.config import ClassifierConfig, MonitorConfig
    from amsrag.querylog.entry import QueryLogEntry

REFERENCE_FILE = "drift_reference.json"  # in an embedded index's directory
FORMAT_VERSION = 1
ALPHA_BINS = 10
SMOOTHING = 0.5  # counts added to every bin before shares are taken
PSI_ALARM = 0.25
WINDOW = 200
SIGNALS = ("alpha", "route", "gray_zone")


def shipped_reference_path() -> Path:
    """The reference shipped in the package: the shipped classifier's calibration split (see its card)."""
    return Path(str(resources.files("amsrag") / "data" / "monitor" / REFERENCE_FILE))


@dataclass(frozen=True, slots=True)
class RouteObservation:
    """What routing acted on for one answer: the class and its confidence (alpha)."""

    label: str
    alpha: float


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def observation_from_signals(signals: Mapping[str, Any] | None) -> RouteObservation | None:
    """The routing of an answer from its proxy signals (trace["signals"]); None when it was not routed."""
    if not signals:
        return None
    label, alpha = signals.get("route_label"), _finite(signals.get("route_alpha"))
    return RouteObservation(str(label), alpha) if label and alpha is not None else None


def observation_from_entry(entry: QueryLogEntry) -> RouteObservation | None:
    """The routing of a query log row: its route columns, else the proxy signals it stored."""
    alpha = _finite(entry.route_alpha)
    if entry.route_label and alpha is not None:
        return RouteObservation(entry.route_label, alpha)
    proxy = (entry.signals or {}).get("proxy")
    return observation_from_signals(proxy if isinstance(proxy, Mapping) else None)


def psi(reference: Sequence[float], window: Sequence[float], smoothing: float = SMOOTHING) -> float:
    """The population stability index of `window` against `reference` (counts per bin, aligned), with
    `smoothing` counts added to every bin of both."""
    r = np.asarray(reference, dtype=float) + smoothing
    w = np.asarray(window, dtype=float) + smoothing
    if r.shape != w.shape or r.ndim != 1 or len(r) < 2:
        raise ValueError(f"psi needs two aligned count vectors of two bins or more, got {r.shape} and {w.shape}")
    r, w = r / r.sum(), w / w.sum()
    return float(np.sum((w - r) * np.log(w / r)))


def route_labels(counts: Mapping[str, int]) -> list[str]:
    """The classes a route mix is compared over: the three complexities, then any other label seen."""
    return list(COMPLEXITIES) + sorted(set(counts) - set(COMPLEXITIES))


def in_band(alpha: float, band: tuple[float, float]) -> bool:
    return band[0] <= alpha <= band[1]


def classifier_identity(config: ClassifierConfig) -> str:
    """Which classifier routes: its artifact's npz sha256 (12 hex digits) and the index's hop temperature."""
    from amsrag.classify.model import shipped_artifact_dir

    card = Path(config.artifact) / "classifier.json" if config.artifact else shipped_artifact_dir() / "classifier.json"
    try:
        sha = str(json.loads(card.read_text("utf-8")).get("npz_sha256", ""))[:12] or "unknown"
    except (OSError, ValueError):
        sha = "unreadable"
    return f"classifier {sha}" + (f", hop temperature {config.hop_temperature:.4g}" if config.hop_temperature else "")


@dataclass(frozen=True, slots=True)
class DriftReference:
    """The distribution the classifier's confidences are trusted on: alpha counts in bins cut at
    `alpha_edges` (the reference's own deciles, inner edges only), the route mix, the gray-zone count
    under the band `gray_zone`, how many answers (`n`), where they came from and which classifier routed."""

    alpha_edges: tuple[float, ...]
    alpha_counts: tuple[int, ...]
    route_counts: dict[str, int]
    gray_count: int
    n: int
    gray_zone: tuple[float, float]
    source: str
    classifier: str = ""
    created: str = ""
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.alpha_counts) != len(self.alpha_edges) + 1:
            raise InputError(f"drift reference: {len(self.alpha_counts)} alpha counts for {len(self.alpha_edges)} "
                             "inner edges (there must be one more count than edges)")
        if list(self.alpha_edges) != sorted(self.alpha_edges) or self.n < 1 or sum(self.alpha_counts) != self.n:
            raise InputError("drift reference: the alpha edges must be sorted and the counts must add up to n >= 1")

    @classmethod
    def from_observations(cls, observations: Iterable[RouteObservation], gray_zone: tuple[float, float],
                          source: str, classifier: str = "", bins: int = ALPHA_BINS,
                          settings: Mapping[str, Any] | None = None) -> DriftReference:
        obs = list(observations)
        if len(obs) < bins:
            raise InputError(f"a drift reference needs at least {bins} routed answers, got {len(obs)}")
        alphas = np.array([o.alpha for o in obs])
        edges = tuple(float(e) for e in np.unique(np.quantile(alphas, np.linspace(0, 1, bins + 1)[1:-1])))
        counts = np.bincount(np.searchsorted(edges, alphas, side="right"), minlength=len(edges) + 1)
        return cls(edges, tuple(int(c) for c in counts), dict(Counter(o.label for o in obs)),
                   sum(in_band(o.alpha, gray_zone) for o in obs), len(obs), (float(gray_zone[0]), float(gray_zone[1])),
                   source, classifier, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                   {"bins": bins, **(settings or {})})

    def bin_of(self, alpha: float) -> int:
        return int(np.searchsorted(self.alpha_edges, alpha, side="right"))

    @property
    def alpha_shares(self) -> list[float]:
        return [c / self.n for c in self.alpha_counts]

    @property
    def route_mix(self) -> dict[str, float]:
        return {k: self.route_counts.get(k, 0) / self.n for k in route_labels(self.route_counts)}

    @property
    def gray_share(self) -> float:
        return self.gray_count / self.n

    def to_dict(self) -> dict[str, Any]:
        return {"format": "amsrag-drift-reference", "version": FORMAT_VERSION, "source": self.source,
                "classifier": self.classifier, "created": self.created, "n": self.n,
                "alpha_edges": list(self.alpha_edges), "alpha_counts": list(self.alpha_counts),
                "route_counts": dict(sorted(self.route_counts.items())), "gray_zone": list(self.gray_zone),
                "gray_count": self.gray_count, "settings": self.settings}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "drift reference") -> DriftReference:
        if data.get("format") != "amsrag-drift-reference" or data.get("version") != FORMAT_VERSION:
            raise InputError(f"{where}: not an amsrag drift reference of version {FORMAT_VERSION} (format "
                             f"{data.get('format')!r}, version {data.get('version')!r}); rebuild it with "
                             "`amsrag ops monitor baseline`")
        try:
            return cls(tuple(float(e) for e in data["alpha_edges"]), tuple(int(c) for c in data["alpha_counts"]),
                       {str(k): int(v) for k, v in data["route_counts"].items()}, int(data["gray_count"]),
                       int(data["n"]), (float(data["gray_zone"][0]), float(data["gray_zone"][1])),
                       str(data["source"]), str(data.get("classifier", "")), str(data.get("created", "")),
                       dict(data.get("settings") or {}))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputError(f"{where}: malformed drift reference ({type(exc).__name__}: {exc}); rebuild it with "
                             "`amsrag ops monitor baseline`") from None

    def save(self, path: Path | str) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n", "utf-8")
        return path

    @classmethod
    def load(cls, path: Path | str) -> DriftReference:
        path = Path(path)
        try:
            data = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            raise InputError(f"{path}: no drift reference (make one with `amsrag ops monitor baseline`)") from None
        except ValueError as exc:
            raise InputError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise InputError(f"{path}: not a drift reference (a JSON object)")
        return cls.from_dict(data, str(path))


def reference_for_index(spec: str | Path) -> tuple[DriftReference, Path]:
    """The index's own reference (`drift_reference.json` beside an embedded index), else the shipped one."""
    from amsrag.querylog.open import is_postgres_url

    own = None if is_postgres_url(spec) else Path(spec) / REFERENCE_FILE
    path = own if own is not None and own.is_file() else shipped_reference_path()
    return DriftReference.load(path), path


@dataclass(frozen=True, slots=True)
class DriftStatus:
    """The verdict on the current window: per-signal PSI, the shares behind them, the alarm and what to do."""

    answers: int  # routed answers in the window
    window: int
    ready: bool  # the window is full: only then is there a verdict
    psi: dict[str, float]  # alpha, route, gray_zone
    threshold: float
    alarm: bool
    alarmed_by: list[str]
    route_mix: dict[str, float]
    reference_route_mix: dict[str, float]
    gray_share: float | None
    reference_gray_share: float
    reference_source: str
    recommendation: str

    def to_dict(self) -> dict[str, Any]:
        return {"answers": self.answers, "window": self.window, "ready": self.ready,
                "psi": {k: round(v, 4) for k, v in self.psi.items()}, "threshold": self.threshold,
                "alarm": self.alarm, "alarmed_by": list(self.alarmed_by),
                "route_mix": {k: round(v, 4) for k, v in self.route_mix.items()},
                "reference_route_mix": {k: round(v, 4) for k, v in self.reference_route_mix.items()},
                "gray_share": None if self.gray_share is None else round(self.gray_share, 4),
                "reference_gray_share": round(self.reference_gray_share, 4),
                "reference_source": self.reference_source, "recommendation": self.recommendation}


class DriftDetector:
    """The last `window` routed answers against `reference`; `status()` after any `observe`. Counts are kept
    incrementally (a status costs a few bins, whatever the window), under a lock: the service's threads share
    one detector. `band`: the gray zone of the window's answers (default: the reference's own)."""

    def __init__(self, reference: DriftReference, window: int = WINDOW, threshold: float = PSI_ALARM,
                 band: tuple[float, float] | None = None, index: str | None = None) -> None:
        if window < 1:
            raise InputError(f"the drift window must hold at least one answer, got {window}")
        if not threshold > 0:
            raise InputError(f"the drift threshold must be positive, got {threshold}")
        self.reference = reference
        self.window = window
        self.threshold = threshold
        self.band = band or reference.gray_zone
        self.index = index  # named in the recommendation's commands
        self._recent: deque[tuple[int, str, bool]] = deque()
        self._alpha = [0] * len(reference.alpha_counts)
        self._routes: Counter[str] = Counter()
        self._gray = 0
        self._lock = threading.Lock()

    @classmethod
    def for_config(cls, reference: DriftReference, config: MonitorConfig, **kwargs: Any) -> DriftDetector:
        return cls(reference, window=config.drift_window, threshold=config.drift_threshold,
                   band=(config.gray_zone_low, config.gray_zone_high), **kwargs)

    def observe(self, observation: RouteObservation | None) -> None:
        if observation is None:
            return
        item = (self.reference.bin_of(observation.alpha), observation.label, in_band(observation.alpha, self.band))
        with self._lock:
            self._recent.append(item)
            self._add(item, 1)
            if len(self._recent) > self.window:
                self._add(self._recent.popleft(), -1)

    def observe_signals(self, signals: Mapping[str, Any] | None) -> None:
        self.observe(observation_from_signals(signals))

    def _add(self, item: tuple[int, str, bool], sign: int) -> None:
        b, label, gray = item
        self._alpha[b] += sign
        self._routes[label] += sign
        self._gray += sign * gray

    def status(self) -> DriftStatus:
        ref = self.reference
        with self._lock:
            n, alpha, routes, gray = len(self._recent), list(self._alpha), dict(self._routes), self._gray
        labels = route_labels({**ref.route_counts, **{k: v for k, v in routes.items() if v}})
        values = {"alpha": psi(ref.alpha_counts, alpha) if n else 0.0,
                  "route": psi([ref.route_counts.get(k, 0) for k in labels], [routes.get(k, 0) for k in labels])
                  if n else 0.0,
                  "gray_zone": psi([ref.gray_count, ref.n - ref.gray_count], [gray, n - gray]) if n else 0.0}
        ready = n >= self.window
        alarmed = [k for k in SIGNALS if ready and values[k] >= self.threshold]
        mix = {k: routes.get(k, 0) / n for k in labels} if n else {}
        status = DriftStatus(n, self.window, ready, values, self.threshold, bool(alarmed), alarmed, mix,
                             {k: ref.route_counts.get(k, 0) / ref.n for k in labels},
                             gray / n if n else None, ref.gray_share, ref.source, "")
        return _with_recommendation(status, self.index)


def _with_recommendation(s: DriftStatus, index: str | None) -> DriftStatus:
    where = index or "DIR"
    if not s.ready:
        text = (f"no verdict yet: {s.answers} of the {s.window} routed answers a window needs (a smaller window "
                f"would alarm on noise)")
    elif not s.alarm:
        worst = max(s.psi, key=lambda k: s.psi[k])
        text = (f"no drift: every PSI is below {s.threshold:g} (highest: {worst} {s.psi[worst]:.3f}); the "
                f"classifier's confidences still describe this traffic, nothing to do")
    else:
        why = []
        if "route" in s.alarmed_by:
            moved = max(s.route_mix, key=lambda k: s.route_mix[k] - s.reference_route_mix.get(k, 0.0))
            why.append(f"the route mix moved towards {moved} ({s.route_mix[moved]:.0%} of the window, "
                       f"{s.reference_route_mix.get(moved, 0.0):.0%} in the reference)")
        if "gray_zone" in s.alarmed_by and s.gray_share is not None:
            verb = "swelled" if s.gray_share > s.reference_gray_share else "shrank"
            why.append(f"the gray zone {verb} ({s.gray_share:.0%} of the window, {s.reference_gray_share:.0%} in "
                       f"the reference)")
        if "alpha" in s.alarmed_by:
            why.append(f"the routing confidence (alpha) is distributed differently (PSI {s.psi['alpha']:.2f})")
        text = (f"drift: {'; '.join(why)}. The classifier is calibrated for other traffic: recalibrate it on a few "
                f"hundred labelled questions of this traffic (`amsrag train classifier calibrate --qa LABELLED.jsonl "
                f"--index {where}`; `amsrag train classifier label` can label them, `amsrag train classifier train` "
                f"retrains when the gray zone keeps swelling), then take a new reference from the traffic it now "
                f"serves (`amsrag ops monitor baseline --index {where} --from-log --since DATE`)")
    return replace(s, recommendation=text)
