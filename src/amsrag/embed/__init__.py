"""Sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) through onnxruntime + tokenizers, no torch."""

from amsrag.embed.encoder import Encoder, MiniLMEncoder, load_tokenizer, model_id_for, passage_text_for_embedding

__all__ = ["Encoder", "MiniLMEncoder", "load_tokenizer", "model_id_for", "passage_text_for_embedding"]
