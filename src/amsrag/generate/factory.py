"""Build the configured generator."""

from __future__ import annotations

from amsrag.config import AmsragConfig, GeneratorConfig
from amsrag.embed.encoder import Encoder
from amsrag.errors import InputError
from amsrag.generate.base import Generator

GENERATORS = ("extractive", "heuristic", "llamacpp", "openai")


def make_generator(config: GeneratorConfig | AmsragConfig | None = None, encoder: Encoder | None = None,
                   name: str | None = None) -> Generator:
    """The generator `config.name` (or `name`) names. `encoder`: the shared query encoder (the heuristic
    reader only; pass `index.encoder` so one model serves the whole process)."""
    if isinstance(config, AmsragConfig):
        config = config.generator
    config = config or GeneratorConfig()
    name = name or config.name
    if name not in GENERATORS:
        raise InputError(f"unknown generator {name!r}; use one of: {', '.join(GENERATORS)}")
    if name != config.name:
        config = config.model_copy(update={"name": name})
    if name == "extractive":
        from amsrag.generate.reader_generator import SpanReaderGenerator

        return SpanReaderGenerator.from_config(config)
    if name == "heuristic":
        from amsrag.generate.heuristic import HeuristicGenerator

        if encoder is None:
            from amsrag.embed.encoder import MiniLMEncoder

            return HeuristicGenerator(MiniLMEncoder(), config)
        return HeuristicGenerator(encoder, config)
    if name == "llamacpp":
        from amsrag.generate.llamacpp import LlamaCppGenerator

        return LlamaCppGenerator(config)
    from amsrag.generate.openai_compat import OpenAIGenerator

    return OpenAIGenerator(config)
