"""Any OpenAI-compatible chat-completions server (vLLM, Ollama, llama.cpp server, OpenAI, DashScope
compatible mode, …) over httpx: timeouts, bounded retries with exponential backoff, SSE streaming,
token logprobs when the server offers them."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from amsrag.config import GeneratorConfig
from amsrag.generate.base import EvidencePassage, Generation, GeneratorError, check_passages
from amsrag.generate.confidence import logprob_confidence, mean_entropy, token_logprobs
from amsrag.generate.prompt import (
    build_prompt,
    char_estimate,
    char_truncate,
    closed_book_messages,
    parse_answer,
)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 30.0


class OpenAIGenerator:
    name = "openai"
    knows = True
    streaming = True

    def __init__(self, config: GeneratorConfig | None = None, top_logprobs: int = 5) -> None:
        import httpx

        self.config = config or GeneratorConfig(name="openai")
        self.base_url = self.config.base_url.rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise GeneratorError(f"base_url must start with http:// or https://, got {self.config.base_url!r}")
        self.logprobs = True  # until the server says otherwise
        self.top_logprobs = top_logprobs
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.config.api_key_env, "") if self.config.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        timeout = httpx.Timeout(self.config.read_timeout_s, connect=self.config.connect_timeout_s)
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ public
    def generate(self, question: str, passages: Sequence[EvidencePassage]) -> Generation:
        t0 = time.perf_counter()
        passages = check_passages(passages)
        budget = self.config.n_ctx - self.config.max_tokens
        prompt = build_prompt(question, passages, budget, char_estimate, char_truncate)
        reply = self._complete(prompt.messages)
        parsed = parse_answer(reply["text"], prompt.passages)
        return Generation(
            parsed.answer, parsed.citations, reply["confidence"], parsed.abstained, reply["prompt_tokens"],
            reply["output_tokens"], (time.perf_counter() - t0) * 1000, self.name,
            {"model": reply["model"], "raw": reply["text"], "citation_source": parsed.citation_source,
             "invalid_citations": parsed.invalid_citations, "passages_in_prompt": len(prompt.passages),
             "truncated_passages": prompt.truncated, "entropy": reply["entropy"], "retries": reply["retries"]})

    def complete(self, prompt: str) -> str:
        """The model's reply to one user message (the global route's map and reduce steps, text-to-SQL)."""
        return str(self._complete([{"role": "user", "content": prompt}])["text"])

    def closed_book(self, question: str) -> Generation:
        t0 = time.perf_counter()
        reply = self._complete(closed_book_messages(question))
        parsed = parse_answer(reply["text"], [])
        return Generation(parsed.answer, (), reply["confidence"], parsed.abstained, reply["prompt_tokens"],
                          reply["output_tokens"], (time.perf_counter() - t0) * 1000, self.name,
                          {"model": reply["model"], "raw": reply["text"], "closed_book": True,
                           "entropy": reply["entropy"], "retries": reply["retries"]})

    def stream(self, question: str, passages: Sequence[EvidencePassage]) -> Iterator[str]:
        """The answer's text as the server produces it (raw, citation markers included)."""
        passages = check_passages(passages)
        prompt = build_prompt(question, passages, self.config.n_ctx - self.config.max_tokens, char_estimate,
                              char_truncate)
        for event in self._stream_events(self._body(prompt.messages, stream=True)):
            delta = (event.get("choices") or [{}])[0].get("delta") or {}
            if delta.get("content"):
                yield delta["content"]

    # ------------------------------------------------------------------ transport
    def _body(self, messages: list[dict[str, str]], stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.config.model or "default", "messages": messages,
                                "max_tokens": self.config.max_tokens, "temperature": self.config.temperature,
                                "seed": self.config.seed, "stream": stream}
        if self.logprobs:
            body.update({"logprobs": True, "top_logprobs": self.top_logprobs})
        return body

    def _complete(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        if self.config.stream:
            return self._complete_streamed(messages)
        try:
            data, retries = self._post(self._body(messages, stream=False))
        except _Rejected:
            if not self.logprobs:
                raise
            self.logprobs = False  # the server refused logprobs: ask again without them
            data, retries = self._post(self._body(messages, stream=False))
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise GeneratorError(f"{self.base_url}: unexpected response (no choices[0].message): {exc!r}") from None
        usage = data.get("usage") or {}
        lps, tops = token_logprobs(choice.get("logprobs"))
        return {"text": text, "model": data.get("model", ""), "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                "output_tokens": int(usage.get("completion_tokens", len(lps))), "confidence": logprob_confidence(lps),
                "entropy": mean_entropy(tops), "retries": retries}

    def _complete_streamed(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        parts: list[str] = []
        lps: list[float] = []
        tops: list[list[float]] = []
        usage: dict[str, Any] = {}
        model = ""
        chunks = 0
        for event in self._stream_events(self._body(messages, stream=True)):
            model = event.get("model", model)
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                content = (choice.get("delta") or {}).get("content")
                if content:
                    parts.append(content)
                    chunks += 1
                a, b = token_logprobs(choice.get("logprobs"))
                lps += a
                tops += b
        return {"text": "".join(parts), "model": model, "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                "output_tokens": int(usage.get("completion_tokens", len(lps) or chunks)),
                "confidence": logprob_confidence(lps), "entropy": mean_entropy(tops), "retries": 0}

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """POST /chat/completions with retries; the decoded JSON and the number of retries used."""
        response, retries = self._request(body, stream=False)
        try:
            return response.json(), retries
        except ValueError:
            raise GeneratorError(f"{self.base_url}/chat/completions: the response is not JSON: "
                                 f"{response.text[:200]!r}") from None

    def _stream_events(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Server-sent events of a streamed completion, decoded, until `data: [DONE]`."""
        import httpx

        response, _ = self._request(body, stream=True)
        try:
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    return
                try:
                    yield json.loads(payload)
                except json.JSONDecodeError:
                    raise GeneratorError(f"{self.base_url}: malformed stream event {payload[:120]!r}") from None
        except httpx.TimeoutException as exc:
            raise GeneratorError(f"{self.base_url}: the stream stalled longer than the read timeout "
                                 f"({self.config.read_timeout_s:g} s): {exc}") from None
        finally:
            response.close()

    def _request(self, body: dict[str, Any], stream: bool):
        """Send with retries on 429/5xx and connection failures (a read timeout is final: the server is slow)."""
        import httpx

        url = "/chat/completions"
        attempts = self.config.retries + 1
        last, retry_after = "", None
        for attempt in range(attempts):
            if attempt:
                time.sleep(self._delay(attempt, retry_after))
            retry_after = None
            try:
                response = self._client.send(self._client.build_request("POST", url, json=body), stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
                last = f"connection failed ({type(exc).__name__}: {exc})"
                continue
            except httpx.TimeoutException as exc:
                raise GeneratorError(f"{self.base_url}{url}: no response within the read timeout "
                                     f"({self.config.read_timeout_s:g} s; {type(exc).__name__})") from None
            except httpx.TransportError as exc:
                raise GeneratorError(f"{self.base_url}{url}: {type(exc).__name__}: {exc}") from None
            if response.status_code < 400:
                return response, attempt
            text = response.read().decode("utf-8", "replace")[:300]
            response.close()
            if response.status_code in RETRY_STATUS:
                last, retry_after = f"HTTP {response.status_code}: {text}", response.headers.get("retry-after")
                continue
            if response.status_code in (400, 422) and self.logprobs and "logprob" in text.lower():
                raise _Rejected(text)
            raise GeneratorError(f"{self.base_url}{url}: HTTP {response.status_code}: {text}")
        raise GeneratorError(f"{self.base_url}{url}: no answer after {attempts} attempt(s): {last}")

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """Exponential backoff; a server's Retry-After (seconds) is honoured up to MAX_RETRY_AFTER_S."""
        delay = self.config.backoff_s * 2 ** (attempt - 1)
        if retry_after:
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(retry_after), MAX_RETRY_AFTER_S))
        return delay


class _Rejected(GeneratorError):
    """The server rejected the request's logprobs fields."""
