"""`run_batches`: the encoders' bulk loop, batches of texts run one after another or several at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
