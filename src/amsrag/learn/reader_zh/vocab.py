"""The reader's vocabulary: e5's SentencePiece pieces trimmed to those CMRC's training text uses, plus every
single-character piece (so any character e5 knows stays representable), plus the four specials.

The trimmed tokenizer runs the same unigram Viterbi over the kept pieces with e5's scores; the embedding
matrix keeps the rows of the kept pieces (250k → a few tens of thousands: the artifact stays small).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.embed.e5_weights import E5Checkpoint, normalizer_map, unigram_tokenizer
from amsrag.generate.zh_reader import META, NORMALIZER_FILE, TOKENIZER_FILE, ZhTokenizer


def trim(ck: E5Checkpoint, texts: Iterable[str]) -> tuple[ZhTokenizer, np.ndarray, dict[str, Any]]:
    """(trimmed tokenizer, kept e5 ids in new-id order, stats): specials first (ids 0-3 unchanged)."""
    full = ZhTokenizer(unigram_tokenizer([(p, float(s)) for p, s in zip(ck.pieces, ck.scores, strict=True)],
                                         ck.unk), normalizer_map(ck))
    used: set[int] = set()
    n_texts = 0
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        n_texts += 1
        if len(batch) >= 512:
            used.update(i for ids, _ in full.encode_batch(batch) for i in ids)
            batch = []
    if batch:
        used.update(i for ids, _ in full.encode_batch(batch) for i in ids)
    single = {i for i, p in enumerate(ck.pieces) if len(p.replace(META, "")) <= 1}
    specials = [ck.bos, ck.pad, ck.eos, ck.unk]
    if specials != [0, 1, 2, 3]:
        raise ValueError(f"unexpected e5 special ids {specials}")
    keep = specials + sorted((used | single) - set(specials))
    kept = np.array(keep, dtype=np.int64)
    pieces = [(ck.pieces[i], float(ck.scores[i])) for i in keep]
    tok = ZhTokenizer(unigram_tokenizer(pieces, 3), full.norm)
    stats = {"e5_pieces": len(ck.pieces), "kept": len(keep), "used_by_train_text": len(used),
             "single_char_pieces": len(single), "texts_scanned": n_texts}
    return tok, kept, stats


def save(tok: ZhTokenizer, out: Path) -> None:
    tok.tok.save(str(out / TOKENIZER_FILE))
    (out / NORMALIZER_FILE).write_text(json.dumps(tok.norm, ensure_ascii=False, sort_keys=True), encoding="utf-8")
