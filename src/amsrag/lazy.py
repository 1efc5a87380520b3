"""Names a package `__init__` exports, imported on first use (PEP 562), so importing one light submodule
(`amsrag.store.base`, `amsrag.ingest.formats`) does not load its heavy siblings (scikit-learn through the
themes, spaCy, onnxruntime) and `amsrag --help` stays fast."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`: `exports` maps each public name to the module that
    defines it; the first access imports that module and keeps the value on the package."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__


def installed(module: str) -> bool:
    """Whether `module` (an optional extra's library) can be imported, without importing it. A `None` entry in
    `sys.modules` (how an import is blocked) counts as absent."""
    if module in sys.modules:
        return sys.modules[module] is not None
    return importlib.util.find_spec(module) is not None


def extra_hint(extra: str) -> str:
    """How to install an optional extra of amsrag, for a message."""
    return f"pip install 'amsrag[{extra}]'"


_LEAN: list[bool] = [False]


def lean_imports(on: bool = True) -> None:
    """Let `import_lightgbm` hide scikit-learn from LightGBM in this process.

    For a process that uses only LightGBM's `Booster`, such as the command line's `ask`. LightGBM imports
    scikit-learn (1.2 s on a two-core machine, 90 % of its import) only for its scikit-learn estimators. A
    library caller keeps the default, because lightgbm's estimators would stay unusable in a lean process.
    """
    _LEAN[0] = on


def import_lightgbm() -> Any:
    """The `lightgbm` module. In a lean process (`lean_imports`) where scikit-learn is not loaded yet, it is
    imported with scikit-learn hidden: a `None` in `sys.modules` makes LightGBM's optional import fail."""
    if "lightgbm" in sys.modules or not _LEAN[0] or "sklearn" in sys.modules:
        return importlib.import_module("lightgbm")
    sys.modules["sklearn"] = None  # type: ignore[assignment]
    try:
        return importlib.import_module("lightgbm")
    finally:
        del sys.modules["sklearn"]
