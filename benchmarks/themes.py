"""Corpus themes: recovery of the 20 SQuAD articles, label quality, auto-k, incremental update, global search speed.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/themes.py          # -> docs/benchmarks/themes.{md,json}

Data. The 920 paragraphs of `squad/squad_v1.1_subset_20articles.json`, each labelled with its article title,
embedded *without* their title (the title is the label: embedding it would leak the answer) with the repo's
encoder (cached in bench-cache/themes-squad-text-vectors.npz); the label terms come from the paragraph text
alone for the same reason. Noise: the 1,000 random Wikipedia passages of `flashrag/wiki_sample_corpus_1000.jsonl`
and the first 1,000 distinct paragraphs of `hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl`, with the
vectors already cached for the benchmark corpus (bench-cache/corpus-vectors.npz, embedded as "title. text").
ARI and purity are computed over the SQuAD paragraphs only (the noise has no labels): in the noisy runs the
noise is clustered with them and can pull paragraphs into noise themes or merge articles.

Label quality: an article's theme is the one holding most of its paragraphs; the article counts as labelled
when that theme's top `label_terms` (8) terms contain its title's *head word*: the longest title token (letters
only, >= 3 letters, lower-cased, stop words removed; the first of equal length), compared by Snowball stem
("huguenots" matches "Huguenot"). The lenient variant accepts any such title token of >= 4 letters.

Speed: global search over the ~25k-passage benchmark corpus (bench-cache/corpus-vectors.npz; the texts from
the corpus files) with themes built once; the query vectors are encoded beforehand (query encoding is the
dense retriever's cost, reported apart).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

from amsrag.config import EmbeddingConfig
from amsrag.embed import MiniLMEncoder
from amsrag.ingest import load_qa
from amsrag.learn.themes.recovery import recovery
from amsrag.learn.themes.recovery import squad_data as squad_data_in
from amsrag.themes import ThemeConfig, Themes, build_themes, update_themes
from amsrag.themes.build import N_INIT, kmeans
from amsrag.themes.search import compose_answer, global_search
from amsrag.types import Passage
from common import CACHE, ROOT, SHARED_DATA, load_benchmark, percentiles

SQUAD = SHARED_DATA / "squad" / "squad_v1.1_subset_20articles.json"
NOISE_FILES = ["flashrag/wiki_sample_corpus_1000.jsonl", "hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl"]
NOISE_PER_FILE = 1000
SQUAD_VECTORS = CACHE / "themes-squad-text-vectors.npz"
COMMAND = "OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/themes.py"
QUESTIONS = [
    "What topics does the corpus cover?", "Summarise the collection.", "What are the main subjects?",
    "What are the main themes of these documents?", "Give an overview of the corpus.",
    "What are the recurring themes about war?", "Which topics discuss music?", "Which themes are about football?",
    "What topics relate to politics and elections?", "What are the recurring themes about films and actors?",
    "Which topics discuss science?", "What are the main subjects related to religion?",
    "Which themes cover American history?", "What topics concern television series?",
    "Which themes are about rivers and geography?", "What recurring topics involve companies and business?",
]


def squad_data() -> tuple[list[Passage], np.ndarray]:
    return squad_data_in(SHARED_DATA, CACHE)


def cached_vectors() -> tuple[dict[str, int], np.ndarray]:
    with np.load(CACHE / "corpus-vectors.npz", allow_pickle=False) as z:
        return {h: i for i, h in enumerate(z["hashes"].tolist())}, z["vectors"]


def noise_data(exclude: set[str]) -> tuple[list[Passage], np.ndarray]:
    index, vectors = cached_vectors()
    out: list[Passage] = []
    for rel in NOISE_FILES:
        taken = 0
        for p in load_qa(SHARED_DATA / rel).passages:
            h = p.content_hash
            if h in index and h not in exclude and p.id not in exclude:
                out.append(p)
                exclude.add(h)
                taken += 1
                if taken == NOISE_PER_FILE:
                    break
    return out, vectors[[index[p.content_hash] for p in out]]


def restarts(sq_vecs: np.ndarray, titles: list[str]) -> dict:
    """ARI of k-means (k = 20, clean SQuAD) by number of k-means++ restarts, over five seeds."""
    x = (sq_vecs / np.linalg.norm(sq_vecs, axis=1, keepdims=True)).astype(np.float32)
    labels = np.unique(titles, return_inverse=True)[1]
    out = {}
    for n_init in (1, 2, 4, 8):
        aris, secs = [], []
        for seed in range(13, 18):
            t = time.perf_counter()
            got, _ = kmeans(x, 20, seed, n_init)
            secs.append(time.perf_counter() - t)
            aris.append(float(adjusted_rand_score(labels, got)))
        out[n_init] = {"ari_mean": round(float(np.mean(aris)), 4), "ari_min": round(min(aris), 4),
                       "ari_max": round(max(aris), 4), "seconds": round(float(np.mean(secs)), 3)}
    return out


def incremental(squad: list[Passage], sq_vecs: np.ndarray, noise: list[Passage], noise_vecs: np.ndarray) -> dict:
    rng = np.random.default_rng(13)
    order = rng.permutation(len(squad))
    cut = int(0.7 * len(squad))
    first, rest = order[:cut], order[cut:]
    ids, titles = [p.id for p in squad], [p.title for p in squad]
    texts = [p.text for p in squad]
    labels = np.unique(titles, return_inverse=True)[1]
    out: dict = {}
    for label, cfg in (("auto", ThemeConfig()), ("k20", ThemeConfig(k=20))):
        base = build_themes([ids[i] for i in first], [texts[i] for i in first], sq_vecs[first], cfg)
        t = time.perf_counter()
        upd = update_themes(base, ([ids[i] for i in rest], [texts[i] for i in rest], sq_vecs[rest]))
        update_s = time.perf_counter() - t
        full = build_themes(ids, texts, sq_vecs, cfg)
        u = np.asarray([upd.theme_of(p) for p in ids])
        f = np.asarray([full.theme_of(p) for p in ids])
        out[label] = {
            "k": base.k, "ari_updated": round(float(adjusted_rand_score(labels, u)), 4),
            "ari_rebuild": round(float(adjusted_rand_score(labels, f)), 4),
            "ari_updated_vs_rebuild": round(float(adjusted_rand_score(f, u)), 4),
            "ari_added_only": round(float(adjusted_rand_score(labels[rest], u[rest])), 4),
            "update_ms": round(update_s * 1000, 1), "rebuild_due": upd.rebuild_due,
            "drift": round(upd.state.drift, 3), "reasons": list(upd.state.rebuild_reasons)}
    # drift: 30% more passages that are all noise (under the 50% growth threshold) should flag a rebuild
    base = build_themes(ids, texts, sq_vecs, ThemeConfig())
    m = int(0.3 * len(squad))
    noisy = update_themes(base, ([p.id for p in noise[:m]], [p.text for p in noise[:m]], noise_vecs[:m]))
    out["noise_added"] = {"added": m, "rebuild_due": noisy.rebuild_due, "drift": round(noisy.state.drift, 3),
                          "baseline_distance": round(base.state.baseline_distance, 4),
                          "reasons": list(noisy.state.rebuild_reasons)}
    same = update_themes(build_themes([ids[i] for i in first], [texts[i] for i in first], sq_vecs[first],
                                      ThemeConfig()), ([ids[i] for i in rest[:m]], [texts[i] for i in rest[:m]],
                                                       sq_vecs[rest[:m]]))
    out["same_distribution_added"] = {"added": len(rest[:m]), "rebuild_due": same.rebuild_due,
                                      "drift": round(same.state.drift, 3)}
    return out


def latency(encoder: MiniLMEncoder) -> dict:
    index, vectors = cached_vectors()
    t = time.perf_counter()
    passages, _ = load_benchmark()
    by_hash = {p.content_hash: p for p in passages}
    hashes = sorted(index, key=index.__getitem__)
    corpus = [by_hash[h] for h in hashes if h in by_hash]
    vecs = vectors[[index[p.content_hash] for p in corpus]]
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    themes = build_themes([p.id for p in corpus], [f"{p.title}\n{p.text}" for p in corpus], vecs, ThemeConfig())
    build_s = time.perf_counter() - t
    tmp = CACHE / "themes-latency"
    t = time.perf_counter()
    themes.save(tmp)
    save_s = time.perf_counter() - t
    t = time.perf_counter()
    themes = Themes.load(tmp)
    load_model_s = time.perf_counter() - t
    size = sum(f.stat().st_size for f in tmp.iterdir())
    t = time.perf_counter()
    qvecs = [encoder.encode_query(q) for q in QUESTIONS]
    encode_ms = (time.perf_counter() - t) * 1000 / len(QUESTIONS)
    search_ms, answer_ms = [], []
    modes = Counter()
    for _ in range(20):
        for q, v in zip(QUESTIONS, qvecs, strict=True):
            t = time.perf_counter()
            r = global_search(q, v, themes)
            t2 = time.perf_counter()
            compose_answer(r)
            answer_ms.append((time.perf_counter() - t2) * 1000)
            search_ms.append((t2 - t) * 1000)
            modes[r.mode] += 1
    examples = {}
    for q, v in zip(QUESTIONS, qvecs, strict=True):
        r = global_search(q, v, themes)
        examples[q] = {"mode": r.mode, "focus": list(r.focus_terms), "themes": [
            {"terms": list(t.label_terms[:5]), "size": t.size, "score": round(t.score, 3)} for t in r.themes[:5]]}
    return {"passages": themes.n_passages, "k": themes.k, "corpus_load_s": round(load_s, 1),
            "build_s": round(build_s, 1), "k_scores": {k: round(v, 4) for k, v in themes.k_scores},
            "save_s": round(save_s, 2),
            "load_s": round(load_model_s, 2), "model_bytes": size, "query_encode_ms": round(encode_ms, 1),
            "search_ms": percentiles(search_ms), "compose_answer_ms": percentiles(answer_ms),
            "queries": len(search_ms), "modes": dict(modes), "examples": examples,
            "largest_themes": [{"terms": list(t.label_terms), "size": int(t.size)}
                               for t in sorted(themes.themes, key=lambda t: -t.size)[:10]]}


def markdown(res: dict) -> str:
    rec, inc, lat = res["recovery"], res["incremental"], res["latency"]
    lines = ["# Corpus themes and global search", "",
             f"Command: `{COMMAND}` (every number below; {res['seconds']:.0f} s on this 2-core machine, shared: "
             f"1-minute load average {res['load_average'][0]} at the start, {res['load_average'][1]} at the end, "
             "so the times are upper bounds). "
             "Data and definitions: the docstring of benchmarks/themes.py. SQuAD paragraphs embedded without "
             "their titles; ARI / purity over the 920 SQuAD paragraphs against their 20 article titles; label "
             "quality = share of the 20 articles whose plurality theme's top-8 terms contain the title's head word "
             "(longest non-stop-word title token, stem match; lenient: any title token of ≥ 4 letters).", "",
             "## Theme recovery", "",
             "| corpus | passages | k | ARI | purity | label quality | lenient | build s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in ("clean", "noisy"):
        r = rec[name]
        for label in ("auto", "k20"):
            x = r["runs"][label]
            lines.append(f"| {name}{' +' + str(r['noise']) + ' noise' if r['noise'] else ''}, "
                         f"{'auto-k' if label == 'auto' else 'k = 20'} | {r['passages']} | {x['k']} | {x['ari']} | "
                         f"{x['purity']} | {x['label_quality']:.0%} | {x['label_quality_lenient']:.0%} | "
                         f"{x['build_s']} |")
    lines += ["", "Auto-k: silhouette (cosine) of k-means on the sample, for each candidate k (a x1.25 ladder from 2 "
              "to max_k = 64, plus 0.8 / 1 / 1.25 x sqrt(n/2)), next to what a full build with that k scores. "
              "The choice: of the k within 10% of the best silhouette, the one nearest min(sqrt(n/2), 64) in log "
              "scale.", ""]
    for name in ("clean", "noisy"):
        r = rec[name]
        am = r["k_sweep"][r["argmax_k"]]
        lines += [f"{name}: chosen k = {r['auto_k']} (the bare silhouette argmax would be k = {r['argmax_k']}: "
                  f"ARI {am['ari']}, label quality {am['label_quality']:.0%}):", "",
                  "| k | silhouette | ARI | purity | label quality |",
                  "|---:|---:|---:|---:|---:|"]
        for k, x in r["k_sweep"].items():
            lines.append(f"| {k} | {x['silhouette']} | {x['ari']} | {x['purity']} | {x['label_quality']:.0%} |")
        lines.append("")
    lines += [f"k-means++ restarts (`n_init`; the build uses {N_INIT}): ARI on clean SQuAD at k = 20 over seeds 13-17:",
              "", "| n_init | mean ARI | min | max | s per fit |", "|---:|---:|---:|---:|---:|"]
    for n_init, x in res["restarts"].items():
        lines.append(f"| {n_init} | {x['ari_mean']} | {x['ari_min']} | {x['ari_max']} | {x['seconds']} |")
    lines += ["", "Labels of the clean auto-k run, per article:", "", "| article | head word | hit | theme terms |",
              "|---|---|---|---|"]
    for title, a in rec["clean"]["runs"]["auto"]["articles"].items():
        lines.append(f"| {title} | {a['head_word']} | {'yes' if a['hit'] else 'no'} | {', '.join(a['terms'])} |")
    lines += ["", "## Incremental update", "",
              "Build on a seeded 70% of the SQuAD paragraphs, `update_themes` the other 30%, against a full "
              "rebuild on all of them:", "",
              "| k | ARI updated | ARI rebuild | ARI updated vs rebuild | ARI of the added 30% | update ms | "
              "rebuild due | drift |", "|---|---:|---:|---:|---:|---:|---|---:|"]
    for label in ("auto", "k20"):
        x = inc[label]
        lines.append(f"| {'auto' if label == 'auto' else '20'} ({x['k']}) | {x['ari_updated']} | {x['ari_rebuild']} | "
                     f"{x['ari_updated_vs_rebuild']} | {x['ari_added_only']} | {x['update_ms']} | "
                     f"{x['rebuild_due']} | {x['drift']} |")
    n, s = inc["noise_added"], inc["same_distribution_added"]
    lines += ["", f"Drift flag: adding {n['added']} noise passages (growth 30%, under the 50% threshold) to the "
              f"clean model: drift {n['drift']:+.0%}, rebuild due {n['rebuild_due']} ({'; '.join(n['reasons'])}). "
              f"Adding {s['added']} held-out SQuAD paragraphs instead: drift {s['drift']:+.0%}, rebuild due "
              f"{s['rebuild_due']}.", "",
              "## Global search speed", "",
              f"{lat['passages']} passages of the benchmark corpus (texts from the corpus files, cached vectors), "
              f"themes built once with auto-k: k = {lat['k']} (silhouette {min(lat['k_scores'].values()):.3f}-"
              f"{max(lat['k_scores'].values()):.3f} over the candidates: flat), build {lat['build_s']} s, saved model "
              f"{lat['model_bytes'] / 1e6:.1f} MB (save {lat['save_s']} s, load {lat['load_s']} s). "
              f"{lat['queries']} searches ({len(QUESTIONS)} questions x 20; modes {lat['modes']}):", "",
              "| step | p50 ms | p95 ms |", "|---|---:|---:|",
              f"| global_search | {lat['search_ms']['p50']} | {lat['search_ms']['p95']} |",
              f"| compose_answer | {lat['compose_answer_ms']['p50']} | {lat['compose_answer_ms']['p95']} |",
              f"| query encoding (dense retriever's, for reference; mean) | {lat['query_encode_ms']} | |", "",
              "Largest themes of that corpus:", ""]
    for t in lat["largest_themes"]:
        lines.append(f"- {t['size']}: {', '.join(t['terms'])}")
    lines += ["", "Example selections:", ""]
    for q, e in lat["examples"].items():
        sel = "; ".join(f"{', '.join(t['terms'][:3])} ({t['size']})" for t in e["themes"][:3])
        lines.append(f"- {q} → {e['mode']}{' ' + repr(' '.join(e['focus'])) if e['focus'] else ''}: {sel}"
                     f"{' …' if len(e['themes']) > 3 else ''}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = ap.parse_args()
    t0 = time.perf_counter()
    load_before = os.getloadavg()[0]
    squad, sq_vecs = squad_data()
    noise, noise_vecs = noise_data({p.content_hash for p in squad} | {p.id for p in squad})
    res = {"recovery": recovery(squad, sq_vecs, noise, noise_vecs),
           "restarts": restarts(sq_vecs, [p.title for p in squad]),
           "incremental": incremental(squad, sq_vecs, noise, noise_vecs),
           "latency": latency(MiniLMEncoder(EmbeddingConfig()))}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["load_average"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    res["command"] = COMMAND
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "themes.json").write_text(json.dumps(res, indent=1, default=str) + "\n", encoding="utf-8")
    (args.out / "themes.md").write_text(markdown(res), encoding="utf-8")
    print(markdown(res))


if __name__ == "__main__":
    main()
