"""The encoders' bulk machinery: `token_batches` groups texts of similar token count under a token budget,
`run_batches` runs the batches one after another or several at once, `onnx_session` opens an encoder's ONNX
model on the CPU."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def run_batches(batches: Sequence[np.ndarray], run: Callable[[np.ndarray], np.ndarray], out: np.ndarray,
                threads: int = 1, progress: Callable[[int], None] | None = None,
                thread_name: str = "amsrag-embed") -> np.ndarray:
    """`out[idx] = run(idx)` for each batch `idx` of row indices, in order; `progress` gets each batch's size.
    With `threads` > 1 and more than one batch, that many batches run at once: `run` must be thread-safe and
    release the GIL (onnxruntime's `run` and ctypes calls do). Results are taken in batch order, here."""
    if threads > 1 and len(batches) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=thread_name) as pool:
            for idx, vecs in zip(batches, pool.map(run, batches), strict=True):
                out[idx] = vecs
                if progress is not None:
                    progress(len(idx))
        return out
    for idx in batches:
        out[idx] = run(idx)
        if progress is not None:
            progress(len(idx))
    return out


def token_batches(lengths: Sequence[int], batch_tokens: int, max_rows: int) -> list[np.ndarray]:
    """Indices of `lengths` in batches of similar token count: sorted by length (stably), then cut greedily so
    that rows x padded width (the longest row of the batch) stays within `batch_tokens` and a batch holds at
    most `max_rows` rows. A text longer than the budget gets a batch of its own."""
    if len(lengths) == 0:
        return []
    lens = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lens, kind="stable")
    batches: list[np.ndarray] = []
    begin = 0
    for pos in range(1, len(order) + 1):
        if pos == len(order):
            batches.append(order[begin:pos])
            break
        rows = pos - begin + 1  # the batch with order[pos] added; that text is its widest (ascending order)
        if rows > max_rows or rows * int(lens[order[pos]]) > batch_tokens:
            batches.append(order[begin:pos])
            begin = pos
    return batches


def onnx_session(model: str | bytes, threads: int, mem_arena: bool) -> Any:  # -> onnxruntime.InferenceSession
    """An encoder's CPU session (a model file or its bytes): `threads` intra-op threads, none spinning."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    # Spinning threads burn a core that a second process on these 2-core machines needs.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    opts.enable_cpu_mem_arena = mem_arena
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
