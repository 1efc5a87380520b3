"""Text of scanned PDF pages by OCR: the `ocr` extra, RapidOCR (Apache-2.0) running PP-OCRv4's detection and
recognition models on onnxruntime, their weights inside its wheel (nothing is downloaded).

A page is rendered at `RENDER_DPI` in grey, read into boxes of text with a score, and the boxes are set back into
lines: a box joins a line when its vertical middle lies within the line's height, a line reads left to right.
Results under `MIN_SCORE` are dropped (specks and rules read as characters), and NFKC folds the full-width
punctuation the bilingual recognition model tends to give Latin text. That model often drops the spaces of a
Latin line ("theexactdistributionterms"): a line with more than `RUN_TOGETHER` letters per space gets its long
letter runs split into words by wordninja (MIT; English unigram frequencies), and a space after sentence
punctuation or a section number that runs into a capital. One engine per process, one page at a time
(`intra_op_num_threads` 1: the two cores stay shared with the encoder).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from typing import Any

from amsrag.lazy import installed

MODULE = "rapidocr_onnxruntime"
RENDER_DPI = 150
MIN_SCORE = 0.5
RUN_TOGETHER = 12  # letters per space above which a line has lost its spaces (English prose: ~5)
_LETTER_RUN = re.compile(r"[A-Za-z]{6,}")
_JOINED = re.compile(r"(?<=[a-z][.,;:!?])(?=[A-Z])|(?<=\d)(?=[A-Z][a-z])")

_ENGINE: list[Any] = []
_LOCK = threading.Lock()


def available() -> bool:
    """Whether the `ocr` extra is installed."""
    return installed(MODULE)


class OcrUnavailable(RuntimeError):
    """The `ocr` extra is installed but its engine does not load (a missing system library, a broken install)."""


def _engine() -> Any:
    if not _ENGINE:
        try:
            from rapidocr_onnxruntime import RapidOCR

            _ENGINE.append(RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1))
        except (ImportError, OSError, RuntimeError) as exc:  # opencv without libGL, onnxruntime without its models
            raise OcrUnavailable(f"{type(exc).__name__}: {exc}") from exc
    return _ENGINE[0]


def respace(line: str) -> str:
    """`line` with its words apart again when the recognition model ran them together (module doc)."""
    letters = sum(c.isalpha() for c in line)
    if letters <= RUN_TOGETHER * (line.count(" ") + 1):
        return line
    import wordninja

    line = _LETTER_RUN.sub(lambda m: " ".join(wordninja.split(m.group())), line)
    return _JOINED.sub(" ", line)


def lines_of(result: Sequence[Any]) -> list[str]:
    """RapidOCR's `[box, text, score]` results (box: four corner points) as lines of text, top to bottom."""
    boxes = []
    for box, text, score in result:
        text = unicodedata.normalize("NFKC", str(text)).strip()
        if float(score) < MIN_SCORE or not text:
            continue
        ys = [float(point[1]) for point in box]
        boxes.append((min(ys), max(ys), min(float(point[0]) for point in box), text))
    boxes.sort()
    lines: list[tuple[float, float, list[tuple[float, str]]]] = []
    for top, bottom, left, text in boxes:
        middle = (top + bottom) / 2
        if lines and lines[-1][0] <= middle <= lines[-1][1]:
            line_top, line_bottom, words = lines[-1]
            words.append((left, text))
            lines[-1] = (line_top, max(line_bottom, bottom), words)
        else:
            lines.append((top, bottom, [(left, text)]))
    return [respace(" ".join(text for _, text in sorted(words))) for _, _, words in lines]


def page_lines(page: Any) -> list[str]:
    """The lines of one pypdfium2 page, read by OCR."""
    image = page.render(scale=RENDER_DPI / 72, grayscale=True).to_numpy()
    with _LOCK:
        result, _ = _engine()(image)
    return lines_of(result or [])
