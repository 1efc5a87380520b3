"""`amsrag eval --sections …`: the sections appended to an eval report (report.md, report.json): the five-way
taxonomy, tables and themes, and Chinese (CMRC 2018)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from amsrag.errors import InputError

SECTIONS = ("taxonomy", "tables", "themes", "cmrc")


def _taxonomy(data_dir: Path, cache: Path, seed: int, log: Callable[[str], None]) -> tuple[dict[str, Any], list[str]]:
    from amsrag.learn.taxonomy import mixed

    questions = mixed.mixed_questions(data_dir, 600, 600, 300, seed)
    index = mixed.build_mixed_index(cache / "mixed-index", data_dir, log)
    with index:
        result = mixed.run_mixed(index, questions, log=log)
    return result, mixed.markdown(result)


def _tables(data_dir: Path, cache: Path, seed: int, log: Callable[[str], None]) -> tuple[dict[str, Any], list[str]]:
    from amsrag.learn.tables.evaluate import held_out_accuracy, markdown

    result = held_out_accuracy(data_dir, log=log)
    return result, markdown(result)


def _themes(data_dir: Path, cache: Path, seed: int, log: Callable[[str], None]) -> tuple[dict[str, Any], list[str]]:
    from amsrag.learn.themes.recovery import clean_recovery, markdown

    result = clean_recovery(data_dir, cache, log=log)
    return result, markdown(result)


def _cmrc(data_dir: Path, cache: Path, seed: int, log: Callable[[str], None]) -> tuple[dict[str, Any], list[str]]:
    from amsrag.evaluate.cmrc import markdown, run_cmrc

    result = run_cmrc(data_dir, cache, seed, log=log)
    return result, markdown(result)


RUNNERS = {"taxonomy": _taxonomy, "tables": _tables, "themes": _themes, "cmrc": _cmrc}


def append_sections(out: Path, names: Sequence[str], data_dir: Path | None, cache_dir: Path | None, seed: int,
                    log: Callable[[str], None] = print) -> dict[str, Any]:
    from amsrag.config import cache_root
    from amsrag.ingest.dataset_facts import default_data_dir

    unknown = [n for n in names if n not in RUNNERS]
    if unknown:
        raise InputError(f"unknown eval section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    data = data_dir or default_data_dir()
    cache = cache_dir or cache_root() / "eval"
    report_path, md_path = out / "report.json", out / "report.md"
    report = json.loads(report_path.read_text(encoding="utf-8"))
    command = f"amsrag eval --sections {','.join(names)}"
    lines: list[str] = [f"Sections below: `{command}` (seed {seed}; each names its data).", ""]
    for name in names:
        log(f"eval section {name}")
        result, md = RUNNERS[name](data, cache, seed, log)
        report.setdefault("sections", {})[name] = result
        lines += md
    report_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    md_path.write_text(md_path.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + "\n".join(lines) + "\n",
                       encoding="utf-8")
    return report
