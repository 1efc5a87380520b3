"""`amsrag --version` and `amsrag index init`: a commented configuration that reads back as the one it shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from amsrag import __version__
from amsrag.cli.main import app
from amsrag.config import AmsragConfig

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"amsrag {__version__}"


def test_init_writes_every_key_commented_and_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["index", "init"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "amsrag.toml").read_text("utf-8")
    assert AmsragConfig.load(tmp_path / "amsrag.toml") == AmsragConfig()
    for section, field in AmsragConfig.model_fields.items():
        assert f"[{section}]" in text
        for key in field.annotation.model_fields:  # type: ignore[union-attr]
            assert f"\n{key} = " in text or f"# {key} = (unset)" in text or f"[{section}.{key}" in text, key
    assert "# dense encoder of an index: all-MiniLM-L6-v2-int8" in text
    refused = runner.invoke(app, ["index", "init"])
    assert refused.exit_code == 2 and "amsrag.toml exists; pass --force" in refused.output


def test_init_from_an_index_and_an_edit_builds(tmp_path: Path) -> None:
    config = AmsragConfig()
    config.chunking.max_tokens = 64
    config.router.theta_high = 0.8
    index_dir = tmp_path / "index"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nThe quick brown fox jumps over the lazy dog.\n", encoding="utf-8")
    from amsrag.store.open import create_index

    create_index(index_dir, config).close()
    result = runner.invoke(app, ["index", "init", str(tmp_path / "from-index.toml"), "--index", str(index_dir)])
    assert result.exit_code == 0, result.output
    written = AmsragConfig.load(tmp_path / "from-index.toml")
    assert written == config and written.router.theta_high == 0.8
    edited = (tmp_path / "from-index.toml").read_text("utf-8").replace("theta_high = 0.8", "theta_high = 0.85")
    (tmp_path / "edited.toml").write_text(edited, encoding="utf-8")
    built = runner.invoke(app, ["index", "build", str(docs), "--index", str(tmp_path / "built"), "--config",
                                str(tmp_path / "edited.toml"), "--graph", "title", "--quiet"])
    assert built.exit_code == 0, built.output
    assert AmsragConfig.load(tmp_path / "built" / "config.toml").router.theta_high == 0.85
