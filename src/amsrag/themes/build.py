"""Building the theme model (k-means over the passage vectors) and updating it in place of a rebuild.

k-means runs on the L2-normalised vectors (Euclidean k-means on the unit sphere ranks like cosine):
scikit-learn's `KMeans` (k-means++, `N_INIT` restarts, fixed seed) up to `MINIBATCH_ABOVE` passages,
`MiniBatchKMeans` above. With `k == 0` the number of themes is chosen by the silhouette (cosine) of
k-means fits on a seeded sample of at most `K_SAMPLE` passages, over a geometric ladder from 2 to `max_k`
(ratio `K_RATIO`) plus the rule of thumb sqrt(n / 2) and its neighbours (`SQRT_FACTORS`); of the k within
`SILHOUETTE_TOLERANCE` of the best silhouette, the one nearest min(sqrt(n / 2), max_k) (`pick_k`). A ladder
around sqrt(n / 2) alone misses corpora of few large themes (4 clear topics in 60,000 passages), and the bare
argmax follows noise where the silhouette is flat (docs/benchmarks/themes.md measures both).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from scipy import sparse
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.metrics import silhouette_score

from amsrag.config import ThemeConfig
from amsrag.errors import InputError
from amsrag.indexes.theme_terms import count_terms, widen
from amsrag.indexes.themes import Themes, UpdateState, pool_size, ranked_terms
from amsrag.progress import Advance, NullProgress, Progress

PassageBatch = tuple[Sequence[str], Sequence[str], np.ndarray]  # (ids, texts, vectors)

# k-means++ restarts of the final fit (docs/benchmarks/themes.md: mean ARI 0.75 with 1, 0.80 with 4, 0.85 with 8)
N_INIT = 8
# themes hold this many passages on average at least: on a small corpus the silhouette keeps rising towards
# near-singleton clusters (196 demo passages chose 57 themes without this bound)
MIN_MEAN_SIZE = 8
MINIBATCH_ABOVE = 50_000
K_SAMPLE = 3000
K_RATIO = 1.25
SQRT_FACTORS = (0.8, 1.0, 1.25)
SILHOUETTE_TOLERANCE = 0.10  # share of the best silhouette within which the prior decides
DRIFT_MIN_ADDED = 20  # the drift test waits for this many added passages (a mean of a few is noise)


def _unit(vectors: np.ndarray) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise InputError(f"vectors must be a 2-d array, got shape {v.shape}")
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _check_batch(ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
    if not len(ids):
        v = np.asarray(vectors, dtype=np.float32)
        return v if v.ndim == 2 else np.zeros((0, 0), np.float32)
    v = _unit(vectors)
    if not len(ids) == len(texts) == len(v):
        raise InputError(f"ids, texts and vectors differ in length ({len(ids)}, {len(texts)}, {len(v)})")
    if len(set(ids)) != len(ids):
        raise InputError("passage ids repeat")
    return v


def kmeans(x: np.ndarray, k: int, seed: int, n_init: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels, centres) of a seeded k-means fit."""
    if len(x) > MINIBATCH_ABOVE:
        mb = MiniBatchKMeans(n_clusters=k, random_state=seed, n_init=n_init, batch_size=4096, max_iter=100)
        labels = mb.fit_predict(x)
        return labels.astype(np.int32), mb.cluster_centers_
    km = KMeans(n_clusters=k, random_state=seed, n_init=n_init)
    labels = km.fit_predict(x)
    return labels.astype(np.int32), km.cluster_centers_


def k_candidates(n: int, max_k: int) -> list[int]:
    """The k values tried for `n` passages: 2, 2 x K_RATIO, ... up to min(max_k, n - 1), and SQRT_FACTORS x
    sqrt(n / 2) within those bounds."""
    hi = max(2, min(max_k, n - 1, n // MIN_MEAN_SIZE))
    out = {hi}
    k = 2.0
    while k < hi:
        out.add(round(k))
        k *= K_RATIO
    base = math.sqrt(n / 2)
    out |= {min(hi, max(2, round(base * f))) for f in SQRT_FACTORS}
    return sorted(out)


def choose_k(x: np.ndarray, config: ThemeConfig, advance: Advance | None = None) -> tuple[int, dict[int, float]]:
    """The k chosen by `pick_k` from the silhouettes (cosine) of k-means fits on a seeded sample, and every
    candidate's score; `advance(1)` after each candidate."""
    rng = np.random.default_rng(config.seed)
    sample = x if len(x) <= K_SAMPLE else x[np.sort(rng.choice(len(x), K_SAMPLE, replace=False))]
    scores: dict[int, float] = {}
    for k in k_candidates(len(x), config.max_k):
        if k >= len(sample):
            continue
        labels, _ = kmeans(sample, k, config.seed, n_init=2)
        if len(np.unique(labels)) >= 2:
            scores[k] = float(silhouette_score(sample, labels, metric="cosine"))
        if advance is not None:
            advance(1)
    return pick_k(scores, len(x), config.max_k), scores


def pick_k(scores: dict[int, float], n: int, max_k: int) -> int:
    """Of the k whose silhouette is within SILHOUETTE_TOLERANCE of the best, the one closest (in log scale)
    to the prior min(sqrt(n / 2), max_k): the silhouette decides when it clearly prefers a k (4 topics in
    60,000 passages), the prior when it is flat (a 25k-passage Wikipedia sample: 0.038-0.048 for every k)."""
    if not scores:
        return 2
    best = max(scores.values())
    near = [k for k, v in scores.items() if v >= best - SILHOUETTE_TOLERANCE * abs(best)]
    prior = min(math.sqrt(n / 2), max_k)
    return min(near, key=lambda k: (abs(math.log(k / prior)), k))


def _pools(x: np.ndarray, ids: Sequence[str], labels: np.ndarray, centroids: np.ndarray, size: int
           ) -> tuple[tuple[tuple[str, ...], ...], np.ndarray]:
    """Per theme, the `size` members closest to its centroid (ties by id) and their vectors."""
    k, dim = centroids.shape
    vecs = np.zeros((k, size, dim), dtype=np.float32)
    out: list[tuple[str, ...]] = []
    sims = np.einsum("ij,ij->i", x, centroids[labels]) if len(x) else np.zeros(0, np.float32)
    for t in range(k):
        members = np.flatnonzero(labels == t)
        order = sorted(members.tolist(), key=lambda i: (-float(sims[i]), ids[i]))[:size]
        out.append(tuple(ids[i] for i in order))
        if order:
            vecs[t, : len(order)] = x[order]
    return tuple(out), vecs


def _normalised(means: np.ndarray) -> np.ndarray:
    return (means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def _empty(config: ThemeConfig, ids: Sequence[str], dim: int) -> Themes:
    return Themes(config, tuple(ids), np.full(len(ids), -1, np.int32), np.zeros(0, np.int64),
                  np.zeros((0, dim)), (), sparse.csr_matrix((0, 0), dtype=np.int64), (),
                  np.zeros((0, pool_size(config), dim), np.float32), (), UpdateState(len(ids), 0.0), dim)


def build_themes(ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray, config: ThemeConfig,
                 progress: Progress | None = None) -> Themes:
    """The theme model of a corpus (passage ids, the texts the labels come from, their vectors).

    No themes (every passage -1) when themes are disabled or there are fewer than `min_passages` passages.
    `progress` (amsrag.progress) gets the tasks "themes: choose k", "themes: k-means", "themes: label terms"."""
    x = _check_batch(ids, texts, vectors)
    dim = x.shape[1] if x.ndim == 2 and x.shape[1] else 0
    if not config.enabled or len(ids) < config.min_passages:
        return _empty(config, ids, dim)
    progress = progress or NullProgress()
    k_scores: dict[int, float] = {}
    if config.k:
        k = min(config.k, len(ids))
    else:
        with progress.task("themes: choose k", len(k_candidates(len(x), config.max_k))) as adv:
            k, k_scores = choose_k(x, config, adv)
    with progress.task("themes: k-means", 1) as adv:
        labels, _ = kmeans(x, k, config.seed, N_INIT)
        adv(1)
    sizes = np.bincount(labels, minlength=k).astype(np.int64)
    sums = np.zeros((k, dim), np.float64)
    np.add.at(sums, labels, x.astype(np.float64))
    means = sums / np.maximum(sizes, 1)[:, None]
    centroids = _normalised(means)
    with progress.task("themes: label terms", len(ids)) as adv:
        vocab, counts = count_terms(texts, labels, k, ())
        adv(len(ids))
    pool_ids, pool_vecs = _pools(x, ids, labels, centroids, pool_size(config))
    dist = 1.0 - np.einsum("ij,ij->i", x, centroids[labels])
    state = UpdateState(len(ids), float(dist.mean()))
    return Themes(config, tuple(ids), labels, sizes, means, tuple(vocab), counts, pool_ids, pool_vecs,
                  ranked_terms(counts, tuple(vocab)), state, dim, tuple(sorted(k_scores.items())))


def _rebuild_reasons(cfg: ThemeConfig, sizes: np.ndarray, pool_ids: tuple[tuple[str, ...], ...],
                     state: UpdateState, n_after: int) -> tuple[str, ...]:
    if len(sizes) == 0:
        return (f"the corpus reached {n_after} passages (themes start at {cfg.min_passages})",) \
            if cfg.enabled and n_after >= cfg.min_passages else ()
    reasons = []
    built = max(state.built_size, 1)
    if state.added / built > cfg.rebuild_growth:
        reasons.append(f"{state.added} passages added since the build of {state.built_size} "
                       f"(> {cfg.rebuild_growth:.0%})")
    if state.removed / built > cfg.rebuild_growth:
        reasons.append(f"{state.removed} passages removed since the build of {state.built_size} "
                       f"(> {cfg.rebuild_growth:.0%})")
    if state.added >= DRIFT_MIN_ADDED and state.drift > cfg.drift_tolerance:
        reasons.append(f"added passages lie {state.added_distance:.3f} from their centroids on average, "
                       f"{state.drift:.0%} farther than the built ones ({state.baseline_distance:.3f})")
    if any(len(p) < min(cfg.representatives, int(s)) for p, s in zip(pool_ids, sizes, strict=True)):
        reasons.append("a theme has fewer representatives left than configured")
    if cfg.enabled and n_after < cfg.min_passages:
        reasons.append(f"the corpus shrank to {n_after} passages (themes start at {cfg.min_passages})")
    return tuple(reasons)


def update_themes(themes: Themes, added: PassageBatch | None = None, removed_ids: Sequence[str] = (),
                  removed: PassageBatch | None = None) -> Themes:
    """The model after removing `removed_ids` and adding `added` (ids, texts, vectors), without re-clustering.

    Each added passage joins the theme of the nearest centroid; centroids (running means of the vectors) and
    term counts take it in. A removed passage leaves its theme's size and members; when its text and vector
    are given (`removed`, e.g. read from the index before the delete) they also leave the centroid and the
    term counts, else those are kept as they are (counted in `state.removed_without_content`). Removing an
    unknown id is a no-op; adding a present id (that is not removed too) is an InputError. The result's
    `state.rebuild_due` tells whether a rebuild is due (growth, shrinkage or drift; see `ThemeConfig`)."""
    add_ids, add_texts, add_vecs = added if added is not None else ((), (), np.zeros((0, themes.dim), np.float32))
    x_add = _check_batch(add_ids, add_texts, add_vecs)
    gone = {pid for pid in removed_ids if themes.row_of(pid) is not None}
    clash = [pid for pid in add_ids if themes.row_of(pid) is not None and pid not in gone]
    if clash:
        raise InputError(f"{len(clash)} added passage ids are already in the theme model, e.g. {clash[0]!r}")
    keep = np.asarray([pid not in gone for pid in themes.passage_ids], dtype=bool)
    k = themes.k
    old_assign = themes.assignment
    sizes = themes.sizes.copy()
    sums = themes.means * themes.sizes[:, None]
    counts = themes.counts
    vocab: tuple[str, ...] = themes.vocab
    without_content = 0
    if gone and k:
        gone_themes = old_assign[~keep]
        gone_themes = gone_themes[gone_themes >= 0]
        sizes -= np.bincount(gone_themes, minlength=k)
        blind = np.bincount(gone_themes, minlength=k).astype(np.float64)  # removals without content, per theme
        if removed is not None:
            r_ids, r_texts, r_vecs = removed
            xr = _check_batch(r_ids, r_texts, r_vecs)
            pick = [i for i, pid in enumerate(r_ids) if pid in gone]
            r_themes = np.asarray([old_assign[themes.row_of(r_ids[i]) or 0] for i in pick], dtype=np.int32)
            np.subtract.at(sums, r_themes, xr[pick].astype(np.float64))
            blind -= np.bincount(r_themes, minlength=k)
            v, sub = count_terms([r_texts[i] for i in pick], r_themes, k, vocab)
            vocab = tuple(v)
            counts = widen(counts, len(vocab)) - sub
            counts.data = np.maximum(counts.data, 0)
            counts.eliminate_zeros()
        # a removal without its vector takes the theme's mean out: the mean stays where it was
        sums -= themes.means * blind[:, None]
        without_content = int(blind.sum())
    if k and len(add_ids):
        sims = x_add @ themes.centroids.T
        labels = np.argmax(sims, axis=1).astype(np.int32)
        dist = 1.0 - sims[np.arange(len(labels)), labels]
        sizes += np.bincount(labels, minlength=k)
        np.add.at(sums, labels, x_add.astype(np.float64))
        v, add = count_terms(add_texts, labels, k, vocab)
        vocab = tuple(v)
        counts = widen(counts, len(vocab)) + add
    else:
        labels = np.full(len(add_ids), -1, np.int32)
        dist = np.zeros(0)
    # an emptied theme keeps its place (new passages may join it)
    means = np.where(sizes[:, None] > 0, sums / np.maximum(sizes, 1)[:, None], themes.means)
    ids = tuple(pid for pid, kept in zip(themes.passage_ids, keep, strict=True) if kept) + tuple(add_ids)
    assignment = np.concatenate([old_assign[keep], labels]).astype(np.int32)
    pool_ids, pool_vecs = _updated_pools(themes, gone, add_ids, x_add, labels, _normalised(means) if k else means)
    s = themes.state
    state = UpdateState(s.built_size, s.baseline_distance, s.added + len(add_ids), s.added_distance_sum
                        + float(dist.sum()), s.removed + len(gone), s.removed_without_content + without_content)
    reasons = _rebuild_reasons(themes.config, sizes, pool_ids, state, len(ids))
    state = replace(state, rebuild_due=bool(reasons), rebuild_reasons=reasons)
    counts = sparse.csr_matrix(counts, dtype=np.int64)
    return Themes(themes.config, ids, assignment, sizes, means, vocab, counts, pool_ids, pool_vecs,
                  ranked_terms(counts, vocab) if k else (), state, themes.dim, themes.k_scores)


def _updated_pools(themes: Themes, gone: set[str], add_ids: Sequence[str], x_add: np.ndarray,
                   labels: np.ndarray, centroids: np.ndarray) -> tuple[tuple[tuple[str, ...], ...], np.ndarray]:
    """Each theme's representative candidates re-ranked against its new centroid: the old ones still
    present and the added members, the best `pool_size` kept."""
    size = pool_size(themes.config)
    vecs = np.zeros_like(themes.pool_vectors)
    out: list[tuple[str, ...]] = []
    for t in range(themes.k):
        cand_ids = [pid for pid in themes.pool_ids[t] if pid not in gone]
        cand_vecs = [themes.pool_vectors[t, j] for j, pid in enumerate(themes.pool_ids[t]) if pid not in gone]
        for i in np.flatnonzero(labels == t).tolist():
            cand_ids.append(add_ids[i])
            cand_vecs.append(x_add[i])
        if not cand_ids:
            out.append(())
            continue
        cv = np.stack(cand_vecs)
        sims = cv @ centroids[t]
        order = sorted(range(len(cand_ids)), key=lambda j: (-float(sims[j]), cand_ids[j]))[:size]
        out.append(tuple(cand_ids[j] for j in order))
        vecs[t, : len(order)] = cv[order]
    return tuple(out), vecs
