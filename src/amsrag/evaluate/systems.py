"""The rows of one evaluation run: a system by name, or an adaptive system at other router thresholds
(`full@0.90/0.60`), and the engine each row runs on."""

from __future__ import annotations

import re
from dataclasses import dataclass

from amsrag.errors import InputError
from amsrag.pipeline import Engine
from amsrag.pipeline.systems import SYSTEMS, system_spec

THRESHOLD_ROWS: tuple[tuple[float, float], ...] = ((0.85, 0.55), (0.90, 0.60), (0.92, 0.62), (0.95, 0.65))
DEFAULT_SYSTEMS: tuple[str, ...] = (
    "bm25", "dense", "graph", "A0", "A1", "A2", "A3", "A4", "adaptive-rag", "fixed-learned", "learned", "experts",
    "full",
    *(f"full@{h:.2f}/{lo:.2f}" for h, lo in THRESHOLD_ROWS),
)
_THRESHOLD_NAME = re.compile(r"^(?P<system>[A-Za-z0-9-]+)@(?P<high>[0-9.]+)/(?P<low>[0-9.]+)$")


@dataclass(frozen=True, slots=True)
class SystemRow:
    name: str  # as reported
    system: str  # Engine system name
    thresholds: tuple[float, float] | None = None  # router (theta_high, theta_low) override


def parse_systems(text: str | None) -> list[SystemRow]:
    """`"bm25,full,full@0.85/0.55"` -> rows (default: every system and the sensitivity rows)."""
    names = [n.strip() for n in text.split(",") if n.strip()] if text else list(DEFAULT_SYSTEMS)
    if not names:
        raise InputError("--systems names no system")
    rows: list[SystemRow] = []
    for name in dict.fromkeys(names):
        m = _THRESHOLD_NAME.match(name)
        if m:
            system_spec(m["system"])
            try:
                high, low = float(m["high"]), float(m["low"])
            except ValueError:
                raise InputError(f"bad thresholds in {name!r}; write e.g. full@0.90/0.60") from None
            if not 0 <= low < high <= 1:
                raise InputError(f"{name}: thresholds need 0 <= theta_low < theta_high <= 1")
            if not system_spec(m["system"]).adaptive:
                raise InputError(f"{name}: thresholds only apply to adaptive systems (full, A2-A4, adaptive-rag)")
            rows.append(SystemRow(name, m["system"], (high, low)))
        elif name in SYSTEMS:
            rows.append(SystemRow(name, name))
        else:
            raise InputError(f"unknown system {name!r}; choose among {', '.join(SYSTEMS)} "
                             "or NAME@THETA_HIGH/THETA_LOW (e.g. full@0.90/0.60)")
    return rows


def engine_for(base: Engine, row: SystemRow) -> Engine:
    if row.thresholds is None:
        return base
    config = base.config.model_copy(deep=True)
    config.router.theta_high, config.router.theta_low = row.thresholds
    return Engine(base.index, classifier=base.classifier, generator_knows=base.generator_knows, config=config)
