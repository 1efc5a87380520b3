"""Training of the retrieval evaluator: features over candidate lists, logistic regression, calibration,
tri-state threshold tuning, held-out metrics. Deterministic for a seed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.calibration import ece, reliability_bins
from amsrag.correct.actions import aggregate_scores
from amsrag.correct.evaluator import (
    EvalCalibration,
    RelevanceModel,
    RetrievalEvaluator,
    ScoreCalibrator,
    TreeEnsemble,
)
from amsrag.correct.features import FEATURE_NAMES, PassageView, list_features
from amsrag.correct.text import analyse_query, ner_version, passage_labels, sentence_text_for_embedding
from amsrag.embed.encoder import Encoder, passage_text_for_embedding
from amsrag.learn.common import standardise
from amsrag.learn.evaluator.data import DataConfig, PoolQuestion, load_pools, pools_sha256
from amsrag.learn.evaluator.embedding import cached_labels, embed_cached, open_cache, seed_from_corpus_vectors
from amsrag.progress import NullProgress, Progress
from amsrag.text.sentences import split_sentences

LIST_K = 5  # candidate-list size used for the tri-state threshold tuning (the pipeline's default k)


@dataclass(frozen=True, slots=True)
class EvaluatorTrainConfig:
    seed: int = 13
    per_dataset: int = 700
    distractors: int = 6
    nq_negatives: int = 4
    c: float = 1.0
    model: str = "gbdt"  # gbdt | logistic
    trees: int = 200
    learning_rate: float = 0.05
    max_leaf_nodes: int = 15
    calibration: EvalCalibration = "platt"
    aggregate: str = "max"
    correct_precision: float = 0.90  # P(list holds a gold passage | S >= upper) on the cal split
    incorrect_precision: float = 0.80  # P(list holds no gold passage | S < lower) on the cal split

    def data_config(self) -> DataConfig:
        return DataConfig(seed=self.seed, per_dataset=self.per_dataset, distractors=self.distractors,
                          nq_negatives=self.nq_negatives)


@dataclass(slots=True)
class Rows:
    """One row per (list, passage): features, label, question index, list id, kind of list."""

    x: np.ndarray
    y: np.ndarray
    question: np.ndarray
    list_id: np.ndarray
    split: np.ndarray  # str
    dataset: np.ndarray  # str
    kind: np.ndarray  # "pool" (every candidate) | "negatives" (the pool without its gold passages)


@dataclass(slots=True)
class Prepared:
    pools: list[PoolQuestion]
    qvec: np.ndarray  # (n_questions, 384)
    views: list[list[PassageView]]  # per question, aligned with its paragraphs
    sha256: str


def prepare(data_dir: Path, config: EvaluatorTrainConfig, encoder: Encoder, cache_dir: Path | None = None,
            corpus_vectors: Path | None = None, progress: Progress | None = None) -> Prepared:
    """Load the pools and compute (cached) question, paragraph and sentence vectors and NER labels."""
    progress = progress or NullProgress()
    pools = load_pools(data_dir, config.data_config())
    unique = list({p.key: p for q in pools for p in q.paragraphs}.values())
    if corpus_vectors is not None:
        seed_from_corpus_vectors(open_cache(encoder, cache_dir), corpus_vectors, [(p.title, p.text) for p in unique])
    with progress.task("embedding questions", len(pools)) as advance:
        qvec = embed_cached([q.question for q in pools], encoder, cache_dir, advance)
    with progress.task("embedding paragraphs", len(unique)) as advance:
        pvec = embed_cached([passage_text_for_embedding(p.title, p.text) for p in unique], encoder, cache_dir, advance)
    sentences = [split_sentences(p.text) or [p.text] for p in unique]
    flat = [sentence_text_for_embedding(p.title, s) for p, ss in zip(unique, sentences, strict=True) for s in ss]
    with progress.task("embedding sentences", len(flat)) as advance:
        svec = embed_cached(flat, encoder, cache_dir, advance)
    with progress.task("NER over paragraphs", None):
        labels = cached_labels([p.text for p in unique], passage_labels, cache_dir, ner_version())
    by_key: dict[str, PassageView] = {}
    at = 0
    for i, (p, ss) in enumerate(zip(unique, sentences, strict=True)):
        by_key[p.key] = PassageView(p.title, p.text, pvec[i], svec[at : at + len(ss)], labels[i])
        at += len(ss)
    views = [[by_key[p.key] for p in q.paragraphs] for q in pools]
    return Prepared(pools, qvec, views, pools_sha256(pools, config.data_config()))


def build_rows(prep: Prepared) -> Rows:
    """Two candidate lists per question: its whole pool, and the pool without its gold passages (so the
    model also sees lists where the best candidate is irrelevant, as after a misrouted retrieval)."""
    xs, ys, qs, lids, splits, dsets, kinds = [], [], [], [], [], [], []
    lid = 0
    for qi, (q, views) in enumerate(zip(prep.pools, prep.views, strict=True)):
        info = analyse_query(q.question, [p.title for p in q.paragraphs])
        gold = np.array([p.gold for p in q.paragraphs])
        for kind, idx in (("pool", np.arange(len(views))), ("negatives", np.flatnonzero(~gold))):
            if len(idx) == 0:
                continue
            xs.append(list_features(info, prep.qvec[qi], [views[i] for i in idx]))
            ys.append(gold[idx].astype(int))
            n = len(idx)
            qs.append(np.full(n, qi))
            lids.append(np.full(n, lid))
            splits += [q.split] * n
            dsets += [q.dataset] * n
            kinds += [kind] * n
            lid += 1
    return Rows(np.vstack(xs), np.concatenate(ys), np.concatenate(qs), np.concatenate(lids), np.array(splits),
                np.array(dsets), np.array(kinds))


def fit_gbdt(x: np.ndarray, y: np.ndarray, config: EvaluatorTrainConfig) -> TreeEnsemble:
    from sklearn.ensemble import HistGradientBoostingClassifier

    gb = HistGradientBoostingClassifier(max_iter=config.trees, learning_rate=config.learning_rate,
                                        max_leaf_nodes=config.max_leaf_nodes, early_stopping=False,
                                        random_state=config.seed)
    gb.fit(x, y)
    model = TreeEnsemble.from_sklearn(gb)
    if not np.allclose(model.logits(x[:256]), gb.decision_function(x[:256]), atol=1e-8):
        raise RuntimeError("tree export does not reproduce scikit-learn's decision function")
    return model


def fit_model(x: np.ndarray, y: np.ndarray, c: float, seed: int) -> RelevanceModel:
    from sklearn.linear_model import LogisticRegression

    mean, scale = standardise(x)
    lr = LogisticRegression(C=c, max_iter=5000, random_state=seed).fit((x - mean) / scale, y)
    return RelevanceModel(lr.coef_[0].astype(np.float64), float(lr.intercept_[0]), mean, scale)


def tuning_lists(prep: Prepared, split: str, scores_of: Callable[[int, np.ndarray], np.ndarray],
                 how: str, k: int = LIST_K) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per question of `split`, two top-k lists ranked by dense cosine: from the whole pool (holds a gold
    passage or not, as dense ranks it) and from the pool without gold (a miss). Returns (S, has_gold, dataset)."""
    s_out, y_out, d_out = [], [], []
    for qi, q in enumerate(prep.pools):
        if q.split != split:
            continue
        gold = np.array([p.gold for p in q.paragraphs])
        cos = np.array([v.vector @ prep.qvec[qi] for v in prep.views[qi]])
        for idx in (np.arange(len(gold)), np.flatnonzero(~gold)):
            top = idx[np.argsort(-cos[idx], kind="stable")[:k]]
            if len(top) == 0:
                continue
            s_out.append(aggregate_scores(scores_of(qi, top), how))
            y_out.append(bool(gold[top].any()))
            d_out.append(q.dataset)
    return np.array(s_out), np.array(y_out), d_out


def tune_thresholds(s: np.ndarray, has_gold: np.ndarray, correct_precision: float,
                    incorrect_precision: float) -> dict[str, float]:
    """upper = the lowest S whose lists at or above it hold a gold passage with precision >= target;
    lower = the highest S whose lists below it miss every gold passage with precision >= target (<= upper)."""
    grid = np.round(np.arange(0.0, 1.0001, 0.01), 2)
    upper = 1.0
    for t in grid:
        m = s >= t
        if m.sum() >= 10 and has_gold[m].mean() >= correct_precision:
            upper = float(t)
            break
    lower = 0.0
    for t in grid[::-1]:
        m = s < t
        if m.sum() >= 10 and (~has_gold[m]).mean() >= incorrect_precision:
            lower = float(t)
            break
    lower = min(lower, upper)
    return {"upper": upper, "lower": lower}


def tri_state_rates(s: np.ndarray, has_gold: np.ndarray, upper: float, lower: float) -> dict[str, Any]:
    correct, incorrect = s >= upper, s < lower
    ambiguous = ~correct & ~incorrect

    def share(m: np.ndarray, of: np.ndarray) -> float:
        return round(float(m[of].mean()), 4) if of.any() else 0.0

    return {"n_lists": len(s),
            "with_gold": {"correct": share(correct, has_gold), "ambiguous": share(ambiguous, has_gold),
                          "incorrect": share(incorrect, has_gold), "n": int(has_gold.sum())},
            "without_gold": {"correct": share(correct, ~has_gold), "ambiguous": share(ambiguous, ~has_gold),
                             "incorrect": share(incorrect, ~has_gold), "n": int((~has_gold).sum())},
            "precision_correct": round(float(has_gold[correct].mean()), 4) if correct.any() else None,
            "precision_incorrect": round(float((~has_gold[incorrect]).mean()), 4) if incorrect.any() else None}


def binary_metrics(p: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    from sklearn.metrics import average_precision_score, brier_score_loss, roc_auc_score

    if len(np.unique(y)) < 2:  # ROC-AUC is undefined on one class (tiny runs)
        return {"n": len(y), "positives": int(np.sum(y)), "roc_auc": None, "average_precision": None,
                "ece": round(ece(p, y), 4) if len(y) else None, "brier": None, "reliability": []}
    bins = reliability_bins(p, y)
    return {"n": len(y), "positives": int(y.sum()),
            "roc_auc": round(float(roc_auc_score(y, p)), 4), "average_precision": round(float(
                average_precision_score(y, p)), 4),
            "ece": round(ece(p, y), 4), "brier": round(float(brier_score_loss(y, p)), 4),
            "reliability": [{"lower": round(float(lo), 3), "upper": round(float(hi), 3), "count": int(c),
                             "accuracy": None if np.isnan(a) else round(float(a), 4),
                             "confidence": None if np.isnan(cf) else round(float(cf), 4)}
                            for lo, hi, c, a, cf in zip(bins.lower, bins.upper, bins.count, bins.accuracy,
                                                        bins.confidence, strict=True)]}


def train(prep: Prepared, config: EvaluatorTrainConfig, model_id: str,
          encoder: Encoder | None = None) -> tuple[RetrievalEvaluator, dict[str, Any]]:
    rows = build_rows(prep)
    tr, cal, te = (rows.split == s for s in ("train", "cal", "test"))
    linear = fit_model(rows.x[tr], rows.y[tr], config.c, config.seed)
    if config.model not in ("gbdt", "logistic"):
        raise ValueError(f"unknown model {config.model!r}; use gbdt or logistic")
    model = fit_gbdt(rows.x[tr], rows.y[tr], config) if config.model == "gbdt" else linear
    z = model.logits(rows.x)
    calibrator = ScoreCalibrator.fit(config.calibration, z[cal], rows.y[cal])
    p = np.clip(calibrator(z), 0, 1)
    evaluator = RetrievalEvaluator(model, calibrator, encoder=encoder)

    # Tri-state thresholds on the calibration split, from per-question scores of top-k lists.
    def scores_of(qi: int, idx: np.ndarray) -> np.ndarray:
        q = prep.pools[qi]
        info = analyse_query(q.question, [q.paragraphs[i].title for i in idx])
        return evaluator.score_features(list_features(info, prep.qvec[qi], [prep.views[qi][i] for i in idx]))

    s_cal, g_cal, _ = tuning_lists(prep, "cal", scores_of, config.aggregate)
    thresholds = tune_thresholds(s_cal, g_cal, config.correct_precision, config.incorrect_precision)
    s_te, g_te, d_te = tuning_lists(prep, "test", scores_of, config.aggregate)
    d_te_arr = np.array(d_te)
    report: dict[str, Any] = {
        "rows": {s: int((rows.split == s).sum()) for s in ("train", "cal", "test")},
        "questions": {s: sum(q.split == s for q in prep.pools) for s in ("train", "cal", "test")},
        "test": binary_metrics(p[te], rows.y[te]),
        "test_uncalibrated": {k: v for k, v in binary_metrics(1 / (1 + np.exp(-z[te])), rows.y[te]).items()
                              if k != "reliability"},
        "test_by_dataset": {d: {k: v for k, v in binary_metrics(p[te & (rows.dataset == d)],
                                                                 rows.y[te & (rows.dataset == d)]).items()
                                if k != "reliability"} for d in sorted(set(rows.dataset[te].tolist()))},
        "cal": {k: v for k, v in binary_metrics(p[cal], rows.y[cal]).items() if k != "reliability"},
        "thresholds": {**thresholds, "aggregate": config.aggregate, "k": LIST_K,
                       "correct_precision": config.correct_precision,
                       "incorrect_precision": config.incorrect_precision},
        "tri_state_cal": tri_state_rates(s_cal, g_cal, **thresholds),
        "tri_state_test": tri_state_rates(s_te, g_te, **thresholds),
        "tri_state_test_by_dataset": {d: tri_state_rates(s_te[d_te_arr == d], g_te[d_te_arr == d], **thresholds)
                                      for d in sorted(set(d_te))},
        "linear_coefficients": {n: round(float(c), 4) for n, c in zip(FEATURE_NAMES, linear.coef, strict=True)},
        "linear_test_roc_auc": binary_metrics(1 / (1 + np.exp(-linear.logits(rows.x[te]))), rows.y[te])["roc_auc"],
    }
    evaluator.meta = {
        "embedding_model": model_id,
        "training_data": {"sha256": prep.sha256, "questions": len(prep.pools), **report["rows"]},
        "train_config": asdict(config),
        "thresholds": report["thresholds"],
        "metrics": {"test_roc_auc": report["test"]["roc_auc"], "test_ece": report["test"]["ece"]},
    }
    return evaluator, report


def evaluate(evaluator: RetrievalEvaluator, prep: Prepared, config: EvaluatorTrainConfig) -> dict[str, Any]:
    """Held-out metrics of a trained evaluator on `prep` (the test split), with its own thresholds."""
    rows = build_rows(prep)
    te = rows.split == "test"
    p = evaluator.score_features(rows.x)
    th = evaluator.thresholds or {"upper": 0.5, "lower": 0.2, "aggregate": config.aggregate}

    def scores_of(qi: int, idx: np.ndarray) -> np.ndarray:
        q = prep.pools[qi]
        info = analyse_query(q.question, [q.paragraphs[i].title for i in idx])
        return evaluator.score_features(list_features(info, prep.qvec[qi], [prep.views[qi][i] for i in idx]))

    s_te, g_te, d_te = tuning_lists(prep, "test", scores_of, th.get("aggregate", "max"))
    d = np.array(d_te)
    return {"thresholds": th, "test": binary_metrics(p[te], rows.y[te]),
            "test_by_dataset": {ds: {k: v for k, v in binary_metrics(p[te & (rows.dataset == ds)],
                                                                    rows.y[te & (rows.dataset == ds)]).items()
                                     if k != "reliability"} for ds in sorted(set(rows.dataset[te].tolist()))},
            "tri_state_test": tri_state_rates(s_te, g_te, th["upper"], th["lower"]),
            "tri_state_test_by_dataset": {ds: tri_state_rates(s_te[d == ds], g_te[d == ds], th["upper"], th["lower"])
                                          for ds in sorted(set(d_te))}}
