"""Theme recovery on a corpus with known topics (issue 19): the 20 SQuAD articles as 20 themes, optionally
mixed with unlabelled noise passages. `benchmarks/themes.py` reports it in full; `amsrag eval --sections themes`
runs the clean part. Definitions (head word, purity, label quality) in docs/benchmarks/themes.md."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

from amsrag.config import EmbeddingConfig, ThemeConfig
from amsrag.embed import MiniLMEncoder
from amsrag.indexes.theme_terms import stem, stopwords
from amsrag.ingest import load_qa
from amsrag.themes import Themes, build_themes
from amsrag.themes.build import choose_k
from amsrag.types import Passage

SQUAD_FILE = Path("squad") / "squad_v1.1_subset_20articles.json"
VECTORS_FILE = "themes-squad-text-vectors.npz"


def squad_data(data_dir: Path, cache: Path) -> tuple[list[Passage], np.ndarray]:
    """The SQuAD subset's paragraphs (title = article) and their vectors, embedded without the title (it is
    the label), cached in `cache`."""
    passages = load_qa(data_dir / SQUAD_FILE).passages
    encoder = MiniLMEncoder(EmbeddingConfig())
    hashes = [p.content_hash for p in passages]
    path = cache / VECTORS_FILE
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            if z["hashes"].tolist() == hashes and str(z["model_id"]) == encoder.model_id:
                return passages, z["vectors"]
    vectors = encoder.encode([p.text for p in passages])
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, hashes=np.asarray(hashes), vectors=vectors, model_id=np.asarray(encoder.model_id))
    return passages, vectors


def head_words(title: str) -> tuple[str, list[str]]:
    tokens = [t for t in re.findall(r"\b[^\W\d_]{3,}\b", title.lower()) if t not in stopwords()]
    head = max(tokens, key=len) if tokens else ""  # max keeps the first of equal length
    return head, [t for t in tokens if len(t) >= 4]


def purity(labels: np.ndarray, clusters: np.ndarray) -> float:
    total = 0
    for c in np.unique(clusters):
        total += Counter(labels[clusters == c].tolist()).most_common(1)[0][1]
    return total / len(labels)


def evaluate(themes: Themes, ids: list[str], titles: list[str]) -> dict:
    """ARI, purity and label quality over the labelled passages `ids` (article `titles`)."""
    clusters = np.asarray([themes.theme_of(pid) for pid in ids])
    labels = np.unique(titles, return_inverse=True)[1]
    hits = lenient = 0
    per_article = {}
    for title in sorted(set(titles)):
        mine = clusters[[t == title for t in titles]]
        theme = Counter(mine.tolist()).most_common(1)[0][0]
        terms = themes.theme(theme).label_terms
        term_stems = set(stem(terms))
        head, longer = head_words(title)
        hit = head != "" and stem([head])[0] in term_stems
        soft = any(s in term_stems for s in stem(longer)) or hit
        hits += hit
        lenient += soft
        per_article[title] = {"theme": theme, "head_word": head, "hit": hit, "terms": list(terms),
                              "share_in_theme": round(float(np.mean(mine == theme)), 3)}
    return {"k": themes.k, "ari": round(float(adjusted_rand_score(labels, clusters)), 4),
            "purity": round(purity(labels, clusters), 4),
            "label_quality": round(hits / len(per_article), 3),
            "label_quality_lenient": round(lenient / len(per_article), 3), "articles": per_article}


def recovery(squad: list[Passage], sq_vecs: np.ndarray, noise: list[Passage], noise_vecs: np.ndarray,
             sweep_k: bool = True) -> dict:
    out: dict = {}
    ids, titles = [p.id for p in squad], [p.title for p in squad]
    for name, extra, extra_vecs in (("clean", [], np.zeros((0, sq_vecs.shape[1]), np.float32)),
                                    ("noisy", noise, noise_vecs)):
        all_p = squad + extra
        all_ids, texts = [p.id for p in all_p], [p.text for p in all_p]
        vecs = np.vstack([sq_vecs, extra_vecs]).astype(np.float32)
        k_auto, scores = choose_k(vecs / np.linalg.norm(vecs, axis=1, keepdims=True), ThemeConfig())
        runs = {}
        for label, cfg in (("auto", ThemeConfig()), ("k20", ThemeConfig(k=20))):
            t = time.perf_counter()
            themes = build_themes(all_ids, texts, vecs, cfg)
            runs[label] = {**evaluate(themes, ids, titles), "build_s": round(time.perf_counter() - t, 2)}
        sweep = {}
        for k in sorted(scores) if sweep_k else ():
            ev = evaluate(build_themes(all_ids, texts, vecs, ThemeConfig(k=k)), ids, titles)
            sweep[k] = {"silhouette": round(scores[k], 4), "ari": ev["ari"], "purity": ev["purity"],
                        "label_quality": ev["label_quality"]}
        argmax = max(scores, key=lambda k: (scores[k], -k))
        out[name] = {"passages": len(all_p), "noise": len(extra), "auto_k": k_auto, "argmax_k": argmax,
                     "runs": runs, "k_sweep": sweep}
    return out


def clean_recovery(data_dir: Path, cache: Path, log: Callable[[str], None] = print) -> dict:
    """The SQuAD articles alone (no noise): auto-k and k = 20, without the k sweep."""
    squad, vecs = squad_data(data_dir, cache)
    log(f"themes: {len(squad)} SQuAD paragraphs")
    empty = np.zeros((0, vecs.shape[1]), np.float32)
    return recovery(squad, vecs, [], empty, sweep_k=False)["clean"]


def markdown(result: dict) -> list[str]:
    lines = ["## Theme recovery (the 20 SQuAD articles as 20 themes)", "",
             "| run | k | ARI | purity | label quality | lenient |", "|---|---:|---:|---:|---:|---:|"]
    for name, run in result["runs"].items():
        lines.append(f"| {name} | {run['k']} | {run['ari']} | {run['purity']} | {run['label_quality']} | "
                     f"{run['label_quality_lenient']} |")
    return [*lines, ""]
