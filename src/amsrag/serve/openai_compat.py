"""OpenAI-compatible chat completions, so any OpenAI client can use amsrag as a model.

The last user message is the question; the model name picks the system (`amsrag` = full,
`amsrag-NAME` = system NAME); a `where` field (an OpenAI client's `extra_body={"where": {...}}`) is the
metadata filter of `/v1/ask`, and `amsrag.filter` in the response names it. Citations come back
twice: as `[n]` markers and a "Sources" list in the message text, and as structured `citations`
(plus the full `amsrag` trace) beside `choices`. Streaming sends the same answer as server-sent
events in OpenAI's chunk format (the answer is computed first, then streamed word by word, ending
with the citations and `[DONE]`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from amsrag.access.errors import ApiError
from amsrag.filters import Where
from amsrag.pipeline.results import check_question
from amsrag.pipeline.systems import SYSTEMS
from amsrag.serve.app import WHERE_HELP
from amsrag.serve.limits import Admission
from amsrag.serve.service import Service

BASE_MODEL = "amsrag"


def model_ids() -> list[str]:
    return [BASE_MODEL, *(f"{BASE_MODEL}-{name}" for name in SYSTEMS)]


def system_for_model(model: str) -> str:
    if model == BASE_MODEL:
        return "full"
    prefix = BASE_MODEL + "-"
    if model.startswith(prefix) and model[len(prefix):] in SYSTEMS:
        return model[len(prefix):]
    raise ApiError(404, "model_not_found", f"unknown model {model!r}; GET /v1/models lists: {', '.join(model_ids())}")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatBody(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, max_tokens...: accepted, not used
    model: str = BASE_MODEL
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    n: Literal[1] = 1
    where: dict[str, Any] | None = Field(None, description=WHERE_HELP)


def last_user_text(messages: list[ChatMessage]) -> str:
    for m in reversed(messages):
        if m.role != "user":
            continue
        if isinstance(m.content, str):
            return m.content
        if isinstance(m.content, list):  # content parts: the text ones
            parts = [p for p in m.content if isinstance(p, dict) and p.get("type") == "text"]
            for i, part in enumerate(parts):
                if not isinstance(part.get("text", ""), str):
                    raise ApiError(422, "invalid_request", f"a text content part's `text` must be a string, got "
                                   f"{type(part['text']).__name__} (the last user message's text part {i})")
            return " ".join(p.get("text", "") for p in parts)
        break
    raise ApiError(422, "invalid_request", "no user message with text content: the last user message is the question")


def message_text(result: dict[str, Any]) -> str:
    if not result["citations"]:
        return result["answer"]
    marks = " ".join(f"[{i}]" for i in range(1, len(result["citations"]) + 1))
    by_id = {s["id"]: s for s in result.get("sources", [])}
    lines = [f"[{i}] {by_id.get(c, {}).get('title') or c} ({c})" for i, c in enumerate(result["citations"], 1)]
    return f"{result['answer']} {marks}\n\nSources:\n" + "\n".join(lines)


def citations_field(result: dict[str, Any]) -> list[dict[str, Any]]:
    by_id = {s["id"]: s for s in result.get("sources", [])}
    return [{"index": i, "id": c, "title": by_id.get(c, {}).get("title", ""), "text": by_id.get(c, {}).get("text", "")}
            for i, c in enumerate(result["citations"], 1)]


def amsrag_field(result: dict[str, Any]) -> dict[str, Any]:
    """The amsrag-specific part of a completion: abstention, the trace and, under a filter, the filter
    (`{"where", "allowed", "passages"}`, as in the trace)."""
    out: dict[str, Any] = {"abstained": result["abstained"], "trace": result["trace"]}
    if "filter" in result["trace"]:
        out["filter"] = result["trace"]["filter"]
    return out


def _usage(result: dict[str, Any], text: str) -> dict[str, int]:
    gen = result["trace"].get("generator") or {}
    prompt = int(gen.get("prompt_tokens") or 0)
    output = int(gen.get("output_tokens") or 0) or len(text.split())
    return {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}


def add_openai_routes(app: FastAPI, service: Service, admission: Admission, auth: list) -> None:
    limit = service.config.max_question_chars

    @app.get("/v1/models", dependencies=auth, tags=["openai"], summary="Models (one per amsrag system)")
    async def models() -> dict[str, Any]:
        created = int(service.started)
        return {"object": "list", "data": [{"id": m, "object": "model", "created": created, "owned_by": "amsrag"}
                                           for m in model_ids()]}

    @app.post("/v1/chat/completions", dependencies=auth, tags=["openai"],
              summary="OpenAI-compatible chat completion (the last user message is the question)")
    async def chat(body: ChatBody):
        system = system_for_model(body.model)
        question = check_question(last_user_text(body.messages), limit)  # QuestionError: 422, the engine's message
        where = Where.from_json(body.where)  # a malformed filter: InputError, 400 invalid_input
        result = await admission.call(service.ask, question, system, False, "openai", where)
        text = message_text(result)
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        extra = {"citations": citations_field(result), "amsrag": amsrag_field(result)}
        if not body.stream:
            return {"id": cid, "object": "chat.completion", "created": created, "model": body.model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": _usage(result, text), **extra}
        return StreamingResponse(_stream(cid, created, body.model, text, extra), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _stream(cid: str, created: int, model: str, text: str, extra: dict[str, Any]) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **more}
        return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    words = text.split(" ")
    for i, word in enumerate(words):
        yield chunk({"content": word if i == 0 else " " + word})
    yield chunk({}, "stop", **extra)
    yield "data: [DONE]\n\n"
