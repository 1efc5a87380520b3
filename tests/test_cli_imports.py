"""`amsrag --help` and `import amsrag.cli` load no heavy library: they are imported where used (issue 41)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("sklearn", "lightgbm", "spacy", "torch", "fastapi", "matplotlib", "onnxruntime")
SRC = Path(__file__).resolve().parent.parent / "src"

PROBE = """
import contextlib, io, json, sys
import importlib
import amsrag.cli
from amsrag.cli.main import app
argv, also = json.loads(sys.argv[1]), sys.argv[2:]
for name in also:
    importlib.import_module(name)
if argv:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        app(argv)
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def loaded_after(argv: list[str], *also: str) -> set[str]:
    """The top-level modules a fresh interpreter holds after importing amsrag.cli (and the modules `also`)
    and running `argv`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), *also], capture_output=True, text=True,
                          env=env, check=True)
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [[], ["--help"], ["ask", "--help"], ["index", "build", "--help"]],
                         ids=["import", "help", "ask-help", "index-build-help"])
def test_cli_help_imports_nothing_heavy(argv: list[str]) -> None:
    loaded = loaded_after(argv)
    assert "amsrag" in loaded  # the probe ran the package under test
    assert sorted(loaded & set(HEAVY)) == []


def test_probe_sees_a_heavy_import() -> None:
    # the check can fail: the themes' k-means (scikit-learn) loaded beside the CLI is seen
    assert "sklearn" in loaded_after(["--help"], "amsrag.themes.build")


LEAN_PROBE = """
import json, sys
from amsrag.lazy import import_lightgbm, lean_imports
lean_imports({lean})
lgb = import_lightgbm()
import numpy as np
x = np.random.default_rng(0).random((40, 3))
booster = lgb.train({{"verbose": -1, "min_data_in_leaf": 2}}, lgb.Dataset(x, x[:, 0]), num_boost_round=3)
print(json.dumps(["sklearn" in sys.modules, lgb.compat.SKLEARN_INSTALLED, len(booster.predict(x))]))
"""


@pytest.mark.parametrize("lean", [True, False])
def test_a_lean_process_loads_lightgbm_without_scikit_learn(lean: bool) -> None:
    # `amsrag ask` is lean: LightGBM's Booster without the 1.2 s of scikit-learn; a library caller is not
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", LEAN_PROBE.format(lean=lean)], capture_output=True, text=True,
                          env=env, check=True)
    sklearn_loaded, lgb_sees_sklearn, predicted = json.loads(proc.stdout.strip().splitlines()[-1])
    assert predicted == 40
    assert sklearn_loaded == lgb_sees_sklearn == (not lean)
