"""The base of every configuration section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


# One [section] of the TOML file: unknown keys are refused, assignments validated. (No docstring: a section's
# own docstring is its comment in `amsrag index init` and its description in the JSON schema.)
class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
