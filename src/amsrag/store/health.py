"""What `index check` reports and `index repair` did, for every backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CheckReport:
    """The verdict of an index check: `problems` empty means healthy; `checked` says what was looked at;
    `repairable` names the derived components `repair` would rebuild."""

    location: str
    checked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    repairable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, message: str, component: str | None = None) -> None:
        self.problems.append(message)
        if component is not None and component not in self.repairable:
            self.repairable.append(component)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.location, "ok": self.ok, "checked": self.checked, "problems": self.problems,
                "repairable": self.repairable}


@dataclass
class RepairReport:
    location: str
    rebuilt: list[str] = field(default_factory=list)
    reembedded: int = 0  # passages whose stored vector was missing (everything else reused)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.location, "rebuilt": self.rebuilt, "reembedded": self.reembedded,
                "seconds": round(self.seconds, 3)}
