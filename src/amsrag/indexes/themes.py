"""The theme model of a corpus: an immutable value, saved as `themes.npz` + `themes.json`.

Theme ids are 0..k-1 and stay fixed across `update_themes`; a passage's theme is -1 when the corpus has no
themes (fewer than `min_passages` passages, or themes disabled). Each theme keeps the running mean of its
passages' vectors (the centroid is that mean normalised), its term counts (the c-TF-IDF labels are derived
from them) and a pool of the passages closest to its centroid with their vectors, from which the
representatives are taken, so that an update can re-rank them without the rest of the corpus.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError
from scipy import sparse

from amsrag.artifacts import write_npz
from amsrag.config import ThemeConfig
from amsrag.errors import IndexCorruptError, IndexNotFoundError
from amsrag.indexes.theme_terms import top_terms

FORMAT_VERSION = 1
CARD_FILE = "themes.json"
ARRAYS_FILE = "themes.npz"
TERM_POOL = 32  # ranked terms kept per theme: the labels are the first `label_terms`; search matches all


def pool_size(config: ThemeConfig) -> int:
    """Candidates kept per theme for its representatives (re-ranked on update)."""
    return max(4 * config.representatives, 12)


@dataclass(frozen=True, slots=True)
class UpdateState:
    """What changed since the last full build, and whether a rebuild is due (the caller decides)."""

    built_size: int  # passages at the last build
    baseline_distance: float  # their mean cosine distance to their theme's centroid
    added: int = 0
    added_distance_sum: float = 0.0  # sum of the added passages' cosine distances to their centroid on arrival
    removed: int = 0
    removed_without_content: int = 0  # removals whose vector and text were not given: centroid and terms kept
    rebuild_due: bool = False
    rebuild_reasons: tuple[str, ...] = ()

    @property
    def added_distance(self) -> float:
        """Mean cosine distance of the passages added since the build to their centroid (0 if none)."""
        return self.added_distance_sum / self.added if self.added else 0.0

    @property
    def drift(self) -> float:
        """added_distance / baseline_distance - 1: how much worse the added passages fit than the built ones."""
        if not self.added or self.baseline_distance <= 0:
            return 0.0
        return self.added_distance / self.baseline_distance - 1.0


@dataclass(frozen=True, slots=True)
class Theme:
    id: int
    size: int
    centroid: np.ndarray  # unit float32 vector
    label_terms: tuple[str, ...]
    term_scores: tuple[float, ...]  # c-TF-IDF weight of each label term
    representatives: tuple[str, ...]  # passage ids, closest to the centroid first


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Themes:
    config: ThemeConfig
    passage_ids: tuple[str, ...]
    assignment: np.ndarray  # int32 theme per passage (aligned with passage_ids), -1: none
    sizes: np.ndarray  # int64 (k,)
    means: np.ndarray  # float64 (k, dim): running mean of the theme's passage vectors
    vocab: tuple[str, ...]
    counts: sparse.csr_matrix  # int64 (k, len(vocab)) term counts per theme
    pool_ids: tuple[tuple[str, ...], ...]  # per theme, candidates for representatives, best first
    pool_vectors: np.ndarray  # float32 (k, pool, dim), row j of theme t is pool_ids[t][j]'s vector (zeros after)
    terms: tuple[tuple[tuple[str, float], ...], ...]  # per theme, the ranked c-TF-IDF terms (TERM_POOL of them)
    state: UpdateState
    dim: int
    k_scores: tuple[tuple[int, float], ...] = ()  # the silhouette of each k tried when k was chosen (else empty)

    def __post_init__(self) -> None:
        for name in ("assignment", "sizes", "means", "pool_vectors"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    # ------------------------------------------------------------------ views
    @property
    def k(self) -> int:
        return int(self.sizes.shape[0])

    @property
    def n_passages(self) -> int:
        return len(self.passage_ids)

    @property
    def rebuild_due(self) -> bool:
        return self.state.rebuild_due

    @cached_property
    def centroids(self) -> np.ndarray:
        """(k, dim) float32 unit vectors."""
        norms = np.linalg.norm(self.means, axis=1, keepdims=True)
        c = (self.means / np.maximum(norms, 1e-12)).astype(np.float32)
        c.setflags(write=False)
        return c

    @cached_property
    def _row_of(self) -> dict[str, int]:
        return {pid: i for i, pid in enumerate(self.passage_ids)}

    def row_of(self, passage_id: str) -> int | None:
        return self._row_of.get(passage_id)

    def theme_of(self, passage_id: str) -> int | None:
        """The theme of a passage; None for an unknown id or a corpus without themes."""
        row = self._row_of.get(passage_id)
        if row is None:
            return None
        t = int(self.assignment[row])
        return t if t >= 0 else None

    def theme(self, theme_id: int) -> Theme:
        if not 0 <= theme_id < self.k:
            raise IndexError(f"theme {theme_id} out of range 0..{self.k - 1}")
        n = self.config.label_terms
        ranked = self.terms[theme_id][:n]
        return Theme(theme_id, int(self.sizes[theme_id]), self.centroids[theme_id],
                     tuple(t for t, _ in ranked), tuple(s for _, s in ranked),
                     self.pool_ids[theme_id][: self.config.representatives])

    @property
    def themes(self) -> tuple[Theme, ...]:
        return tuple(self.theme(t) for t in range(self.k))

    def members(self, theme_id: int) -> list[str]:
        return [self.passage_ids[i] for i in np.flatnonzero(self.assignment == theme_id)]

    # ------------------------------------------------------------------ I/O
    def save(self, directory: Path | str) -> Path:
        """Write `themes.npz`, then `themes.json` (with the npz's sha256), each to a temporary file renamed
        over the old one: a reader sees the old pair or the new one, never half a file."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {
            "passage_ids": np.asarray(self.passage_ids, dtype=str) if self.passage_ids else np.zeros(0, "<U1"),
            "assignment": self.assignment.astype(np.int32),
            "sizes": self.sizes.astype(np.int64),
            "means": self.means.astype(np.float64),
            "vocab": np.asarray(self.vocab, dtype=str) if self.vocab else np.zeros(0, "<U1"),
            "counts_data": self.counts.data.astype(np.int64),
            "counts_indices": self.counts.indices.astype(np.int32),
            "counts_indptr": self.counts.indptr.astype(np.int64),
            "pool_vectors": self.pool_vectors.astype(np.float32),
        }
        npz_path = directory / ARRAYS_FILE
        _atomic_write(npz_path, lambda p: write_npz(p, arrays, dtype=None))
        s = self.state
        card = {
            "format_version": FORMAT_VERSION,
            "config": self.config.model_dump(mode="json"),
            "k": self.k, "dim": self.dim, "n_passages": self.n_passages, "n_terms": len(self.vocab),
            "terms": [[[t, w] for t, w in ranked] for ranked in self.terms],
            "pool_ids": [list(p) for p in self.pool_ids],
            "k_scores": [[k, v] for k, v in self.k_scores],
            "state": {"built_size": s.built_size, "baseline_distance": s.baseline_distance, "added": s.added,
                      "added_distance_sum": s.added_distance_sum, "removed": s.removed,
                      "removed_without_content": s.removed_without_content, "rebuild_due": s.rebuild_due,
                      "rebuild_reasons": list(s.rebuild_reasons)},
            "npz_sha256": hashlib.sha256(npz_path.read_bytes()).hexdigest(),
        }
        text = json.dumps(card, indent=1, sort_keys=True) + "\n"
        _atomic_write(directory / CARD_FILE, lambda p: p.write_text(text, encoding="utf-8"))
        return directory

    @classmethod
    def load(cls, directory: Path | str) -> Themes:
        """Read a saved model; IndexNotFoundError when there is none, IndexCorruptError naming the bad file."""
        directory = Path(directory)
        card_path, npz_path = directory / CARD_FILE, directory / ARRAYS_FILE
        if not card_path.is_file() and not npz_path.is_file():
            raise IndexNotFoundError(f"{directory}: no theme model ({CARD_FILE} + {ARRAYS_FILE}); build one first")
        for p in (card_path, npz_path):
            if not p.is_file():
                raise IndexCorruptError(f"{p}: missing (the theme model is incomplete); rebuild the themes")
        # `save` replaces the npz, then the card: a reader between the two renames sees a new npz under the
        # old card, so a mismatch is read once more before it counts as corruption
        for attempt in range(2):
            card = _read_card(card_path)
            data = npz_path.read_bytes()
            if hashlib.sha256(data).hexdigest() == card.get("npz_sha256"):
                break
            if attempt == 0:
                time.sleep(0.05)
        else:
            raise IndexCorruptError(f"{npz_path}: sha256 does not match {card_path}; rebuild the themes")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise IndexCorruptError(f"{npz_path}: not a readable npz ({exc}); rebuild the themes") from None
        try:
            return _from_saved(card, arrays)
        except (KeyError, TypeError, ValueError, IndexError, ValidationError) as exc:
            raise IndexCorruptError(f"{card_path} / {npz_path}: inconsistent theme model ({exc}); "
                                    "rebuild the themes") from None


def _atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_card(path: Path) -> dict[str, Any]:
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexCorruptError(f"{path}: not valid JSON ({exc}); rebuild the themes") from None
    if not isinstance(card, dict):
        raise IndexCorruptError(f"{path}: expected a JSON object, got {type(card).__name__}; rebuild the themes")
    if card.get("format_version") != FORMAT_VERSION:
        raise IndexCorruptError(f"{path}: theme format {card.get('format_version')!r}, this amsrag reads "
                                f"{FORMAT_VERSION}; rebuild the themes")
    return card


def _from_saved(card: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Themes:
    k, dim = int(card["k"]), int(card["dim"])
    ids = tuple(str(x) for x in arrays["passage_ids"].tolist())
    vocab = tuple(str(x) for x in arrays["vocab"].tolist())
    assignment = arrays["assignment"].astype(np.int32)
    sizes = arrays["sizes"].astype(np.int64)
    means = arrays["means"].astype(np.float64)
    counts = sparse.csr_matrix((arrays["counts_data"], arrays["counts_indices"], arrays["counts_indptr"]),
                               shape=(k, len(vocab)), dtype=np.int64)
    pool_vectors = arrays["pool_vectors"].astype(np.float32)
    pool_ids = tuple(tuple(str(x) for x in p) for p in card["pool_ids"])
    terms = tuple(tuple((str(t), float(w)) for t, w in ranked) for ranked in card["terms"])
    if len(assignment) != len(ids) or len(ids) != int(card["n_passages"]):
        raise ValueError("passage count differs between the arrays and the card")
    if sizes.shape != (k,) or means.shape != (k, dim) or len(pool_ids) != k or len(terms) != k:
        raise ValueError(f"per-theme arrays do not all have {k} themes of dimension {dim}")
    if pool_vectors.shape[:1] != (k,) or (k and pool_vectors.shape[2] != dim):
        raise ValueError("pool vectors have the wrong shape")
    if len(assignment) and (int(assignment.min()) < -1 or int(assignment.max()) >= k):
        raise ValueError("a passage's theme is out of range")
    if k and not np.array_equal(np.bincount(assignment[assignment >= 0], minlength=k), sizes):
        raise ValueError("theme sizes differ from the passages' themes")
    st = card["state"]
    state = UpdateState(int(st["built_size"]), float(st["baseline_distance"]), int(st["added"]),
                        float(st["added_distance_sum"]), int(st["removed"]), int(st["removed_without_content"]),
                        bool(st["rebuild_due"]), tuple(str(r) for r in st["rebuild_reasons"]))
    return Themes(ThemeConfig.model_validate(card["config"]), ids, assignment, sizes, means, vocab, counts,
                  pool_ids, pool_vectors, terms, state, dim,
                  tuple((int(k), float(v)) for k, v in card.get("k_scores", [])))


def ranked_terms(counts: sparse.csr_matrix, vocab: tuple[str, ...]) -> tuple[tuple[tuple[str, float], ...], ...]:
    return tuple(tuple(r) for r in top_terms(counts, vocab, TERM_POOL))
