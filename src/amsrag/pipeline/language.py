"""The question's language as the engine sees it, and what this index cannot do for it.

The trace records the detected language (`trace["language"]`); a warning names each part of the index that
cannot read the question's language: an English-only dense encoder (MiniLM maps most Chinese characters to
[UNK]), or BM25 built before amsrag segmented Chinese (one token per run of Han characters).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amsrag.config import AmsragConfig
from amsrag.embed.encoder import MINILM_MODEL
from amsrag.lazy import extra_hint
from amsrag.text.language import UNDETERMINED, detect_language

ENGLISH_ONLY_ENCODERS = frozenset({MINILM_MODEL})
MULTILINGUAL_ENCODER = "multilingual-e5-small-q4"  # what a warning suggests
LANGUAGE_NAMES = {"zh": "Chinese", "ja": "Japanese", "ko": "Korean", "en": "English"}


@dataclass(frozen=True, slots=True)
class LanguageTrace:
    code: str  # ISO 639-1, or "und"
    mixed: bool  # two scripts (Chinese with English terms)
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "mixed": self.mixed, "warnings": list(self.warnings)}


def question_language(question: str, config: AmsragConfig) -> LanguageTrace:
    lang = detect_language(question)
    warnings: list[str] = []
    name = LANGUAGE_NAMES.get(lang.code, lang.code)
    if lang.code not in ("en", UNDETERMINED) and config.embedding.model in ENGLISH_ONLY_ENCODERS:
        warnings.append(
            f"the question is in {name}, and this index's dense encoder ({config.embedding.model}) reads English "
            f"only: dense retrieval and the classifier see little of it. Build the index with "
            f"`[embedding] model = \"{MULTILINGUAL_ENCODER}\"` for {name} documents ({extra_hint('multilingual')}).")
    if lang.code == "zh" and config.bm25.cjk == "none":
        warnings.append("this index's BM25 keeps each run of Chinese characters as one token (it was built before "
                        "amsrag segmented Chinese, or with `bm25.cjk = \"none\"`): rebuild it to search Chinese.")
    return LanguageTrace(lang.code, lang.mixed, tuple(warnings))


def index_language_warnings(config: AmsragConfig, languages: Mapping[str, int]) -> list[str]:
    """What an ingest job should say about the languages of the passages it read (`JobReport.languages`)."""
    if config.embedding.model not in ENGLISH_ONLY_ENCODERS:
        return []
    total = sum(languages.values())
    other = {code: n for code, n in languages.items() if code not in ("en", UNDETERMINED)}
    cjk = sum(n for code, n in other.items() if code in ("zh", "ja", "ko"))
    if not total or (cjk == 0 and sum(other.values()) < 0.05 * total):
        return []
    shown = ", ".join(f"{LANGUAGE_NAMES.get(c, c)} {n}" for c, n in sorted(other.items(), key=lambda kv: -kv[1])[:4])
    return [f"{sum(other.values())} of {total} passages are not in English ({shown}), and this index's dense "
            f"encoder ({config.embedding.model}) reads English only: build it with "
            f"`[embedding] model = \"{MULTILINGUAL_ENCODER}\"` (a --config file; {extra_hint('multilingual')}) "
            f"so dense retrieval finds them."]
