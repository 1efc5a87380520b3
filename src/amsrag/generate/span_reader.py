"""The trained span reader: a fine-tuned MiniLM span/answer-type model on int8 ONNX, run without torch.

Every window of every given passage is read in one batch; each window's best span (max start+end logit)
is scored against the window's no-answer score ([CLS] start+end), so scores are comparable across passages
and across windows of one passage. When all passages fit in `joint_tokens` together they are also read as
one context (a bridge passage and the answer passage side by side). A 3-way head on [CLS] says span / yes /
no; "A or B?" questions are answered with one of the two options. The confidence is a probability that the
answer is right, calibrated on held-out data (card `calibration`); below the card's threshold the reader
abstains ("insufficient evidence"). The artifact is `reader.onnx` with its card `reader.json`.

The modules: `reader_windows` (the inputs: windows of word pieces, batches), `reader_spans` (the outputs: span
candidates, `ReaderResult`, answer support), `reader_model` (`SpanReader`), `reader_generator`
(`SpanReaderGenerator`, the `Generator`). Every name stays importable from here.
"""

from __future__ import annotations

from amsrag.generate.reader_generator import SpanReaderGenerator
from amsrag.generate.reader_model import (
    ARTIFACT,
    CARD_FILE,
    MODEL_FILE,
    TYPE_LABELS,
    InferFn,
    ReaderArtifactError,
    SpanReader,
    default_directory,
)
from amsrag.generate.reader_spans import (
    Alternative,
    ReaderResult,
    SpanCandidate,
    SpanSupport,
    SupportReading,
    first_line,
    option_dashes,
)
from amsrag.generate.reader_windows import (
    CHARS_PER_QUESTION_TOKEN,
    JOINT_SEP,
    Window,
    WindowMaker,
    context_of,
    pad_batch,
)

__all__ = [
    "ARTIFACT",
    "CARD_FILE",
    "CHARS_PER_QUESTION_TOKEN",
    "JOINT_SEP",
    "MODEL_FILE",
    "TYPE_LABELS",
    "Alternative",
    "InferFn",
    "ReaderArtifactError",
    "ReaderResult",
    "SpanCandidate",
    "SpanReader",
    "SpanReaderGenerator",
    "SpanSupport",
    "SupportReading",
    "Window",
    "WindowMaker",
    "context_of",
    "default_directory",
    "first_line",
    "option_dashes",
    "pad_batch",
]
