"""Language detection for passages and queries: the writing system first, py3langid for the rest.

Han, kana and hangul are decided by their share of the letters (a statistical model is not needed to see
that a text is Chinese, and short queries fool one: py3langid calls "what is S、M、G、V" Cantonese). Text in
other scripts goes to py3langid (the langid.py model, 97 languages, shipped inside the package). A text
with too few letters is "und". Detection reads at most `MAX_CHARS` characters.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

MAX_CHARS = 2_000
MAIN_SCRIPT_SHARE = 0.3  # a CJK script with at least this share of the letters decides the language
MIXED_SHARE = 0.05  # a second script with at least this share makes the text mixed
MIN_LETTERS = 3
UNDETERMINED = "und"
CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})

_HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_KANA = r"\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HANGUL = r"\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
HAN_RE = re.compile(f"[{_HAN}]")
_KANA_RE = re.compile(f"[{_KANA}]")
_HANGUL_RE = re.compile(f"[{_HANGUL}]")
_LETTER_RE = re.compile(r"[^\W\d_]", re.UNICODE)

_model: Any = None
_model_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Language:
    code: str  # ISO 639-1 ("en", "zh", ...) or "und"
    han_share: float  # Han characters / letters
    mixed: bool  # a second script holds at least MIXED_SHARE of the letters (Chinese text with English terms)

    @property
    def is_cjk(self) -> bool:
        return self.code in CJK_LANGUAGES


def _langid() -> Any:
    global _model
    with _model_lock:
        if _model is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            _model = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=False)
        return _model


def preload() -> None:
    """Start loading py3langid's model in a background thread (its LZMA decompression, 0.6 s, releases the
    GIL): a one-shot process such as `amsrag ask` overlaps it with opening the index and the encoder."""
    if _model is None:
        threading.Thread(target=_langid, name="langid-load", daemon=True).start()


def _by_script(sample: str) -> tuple[str | None, float, bool]:
    """(the language if the writing system decides it, else None; Han share; mixed): too few letters is "und",
    a CJK script's share of the letters decides ja, ko or zh."""
    letters = len(_LETTER_RE.findall(sample))
    if letters < MIN_LETTERS:
        return UNDETERMINED, 0.0, False
    han = len(HAN_RE.findall(sample))
    kana = len(_KANA_RE.findall(sample))
    hangul = len(_HANGUL_RE.findall(sample))
    cjk = han + kana + hangul
    han_share = han / letters
    mixed = cjk / letters >= MIXED_SHARE and (letters - cjk) / letters >= MIXED_SHARE
    if kana and (han + kana) / letters >= MAIN_SCRIPT_SHARE:
        return "ja", han_share, mixed
    if hangul / letters >= MAIN_SCRIPT_SHARE:
        return "ko", han_share, mixed
    if han_share >= MAIN_SCRIPT_SHARE:
        return "zh", han_share, mixed
    return None, han_share, mixed


def is_chinese(text: str) -> bool:
    """`detect_language(text).code == "zh"` without loading py3langid's model (0.7 s): only the writing system
    decides Chinese, since a py3langid guess of a CJK language becomes "und"."""
    return _by_script(text[:MAX_CHARS])[0] == "zh"


def detect_language(text: str) -> Language:
    """The language of `text` (its first MAX_CHARS characters)."""
    sample = text[:MAX_CHARS]
    code, han_share, mixed = _by_script(sample)
    if code is None:
        code, _score = _langid().classify(sample)
        if code in CJK_LANGUAGES or code == "yue":  # a CJK guess for text whose letters are mostly not CJK
            code = UNDETERMINED
    return Language(str(code), han_share, mixed)


def has_han(text: str) -> bool:
    return HAN_RE.search(text) is not None
