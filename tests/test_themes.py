"""Corpus themes: k-means themes with c-TF-IDF labels, incremental update, save/load, global search."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from amsrag.errors import IndexCorruptError, IndexNotFoundError, InputError
from amsrag.indexes.theme_terms import ctfidf, tokenize
from amsrag.themes import ThemeConfig, Themes, build_themes, update_themes
from amsrag.themes.build import k_candidates, pick_k
from amsrag.themes.search import (
    MAP_ANSWERS,
    compose_answer,
    global_search,
    looks_global,
    map_reduce,
    map_reduce_prompts,
    read_question,
)
from amsrag.types import Passage

TOPICS = {
    "astronomy": ["planet", "telescope", "orbit", "galaxy", "star", "comet", "nebula", "astronomer", "moon", "solar"],
    "baking": ["flour", "oven", "dough", "bread", "yeast", "butter", "pastry", "recipe", "baker", "sugar"],
    "football": ["goal", "striker", "league", "match", "referee", "stadium", "midfielder", "coach", "penalty",
                 "season"],
    "volcano": ["lava", "eruption", "magma", "crater", "volcanic", "ash", "summit", "volcano", "pyroclastic",
                "caldera"],
}
FILLER = ["people", "often", "said", "that", "many", "years", "later", "several", "reports", "described", "such",
          "things", "in", "detail"]
DIM = 48


def synthetic(n_per_topic: int, seed: int, topics: tuple[str, ...] = tuple(TOPICS), prefix: str = "p",
              centres_seed: int = 7) -> tuple[list[str], list[str], np.ndarray, list[str]]:
    """Passages of clear topics: text drawn from the topic's words and shared filler, vector = the topic's
    centre (fixed by `centres_seed`) plus noise."""
    centres = np.random.default_rng(centres_seed).normal(size=(len(TOPICS), DIM))
    rng = np.random.default_rng(seed)
    ids, texts, vecs, labels = [], [], [], []
    for name in topics:
        t = list(TOPICS).index(name)
        for i in range(n_per_topic):
            words = list(rng.choice(TOPICS[name], 6)) + list(rng.choice(FILLER, 6))
            rng.shuffle(words)
            ids.append(f"{prefix}-{name}-{i}")
            texts.append(" ".join(words).capitalize() + ".")
            vecs.append(centres[t] + rng.normal(scale=0.35, size=DIM))
            labels.append(name)
    v = np.asarray(vecs, dtype=np.float32)
    return ids, texts, v / np.linalg.norm(v, axis=1, keepdims=True), labels


@pytest.fixture(scope="module")
def corpus():
    return synthetic(60, seed=1)


@pytest.fixture(scope="module")
def themes(corpus):
    ids, texts, vecs, _ = corpus
    return build_themes(ids, texts, vecs, ThemeConfig())


def _topic_of(themes: Themes, labels: list[str], ids: list[str]) -> dict[str, int]:
    """The theme holding most of each topic's passages."""
    out = {}
    for name in TOPICS:
        got = [themes.theme_of(pid) for pid, lab in zip(ids, labels, strict=True) if lab == name]
        out[name] = max(set(got), key=got.count)
    return out


def test_tokenize_keeps_unstemmed_words_of_three_letters_without_stopwords():
    assert tokenize("The Huguenots fled to 1685 Prussia, as an ox and the cats.") == [
        "huguenots", "fled", "prussia", "cats"]


def test_ctfidf_follows_bertopic():
    from scipy import sparse

    counts = sparse.csr_matrix(np.array([[4, 0, 2], [0, 6, 2]]))
    w = ctfidf(counts).toarray()
    # tf = count / theme tokens; idf = log(1 + mean tokens per theme / term count over themes)
    assert w[0, 0] == pytest.approx(4 / 6 * np.log(1 + 7 / 4))
    assert w[1, 2] == pytest.approx(2 / 8 * np.log(1 + 7 / 4))
    assert w[0, 1] == 0


def test_themes_recovered_with_labels(corpus, themes):
    ids, _, _, labels = corpus
    assert themes.k == 4  # chosen automatically
    got = [themes.theme_of(pid) for pid in ids]
    assert adjusted_rand_score(labels, got) == pytest.approx(1.0)
    for name, t in _topic_of(themes, labels, ids).items():
        theme = themes.theme(t)
        assert theme.size == 60
        assert set(theme.label_terms) <= set(TOPICS[name])  # the filler words, shared by all, never label
        assert len(theme.label_terms) == 8
        assert len(theme.representatives) == 3
        assert all(themes.theme_of(r) == t for r in theme.representatives)
        assert np.linalg.norm(theme.centroid) == pytest.approx(1.0, abs=1e-5)


def test_fixed_k_and_determinism(corpus):
    ids, texts, vecs, _ = corpus
    a = build_themes(ids, texts, vecs, ThemeConfig(k=6))
    b = build_themes(ids, texts, vecs, ThemeConfig(k=6))
    assert a.k == 6
    assert np.array_equal(a.assignment, b.assignment)
    assert a.terms == b.terms and a.pool_ids == b.pool_ids
    assert np.array_equal(a.means, b.means)


def test_small_or_disabled_corpus_has_no_themes(corpus):
    ids, texts, vecs, _ = corpus
    small = build_themes(ids[:30], texts[:30], vecs[:30], ThemeConfig())
    assert small.k == 0 and small.n_passages == 30 and small.theme_of(ids[0]) is None
    assert build_themes(ids, texts, vecs, ThemeConfig(enabled=False)).k == 0
    r = global_search("What topics does the corpus cover?", vecs[0], small)
    assert r.themes == () and "no themes" in r.selection
    assert compose_answer(r)[1] == ()
    grown = update_themes(small, (ids[30:60], texts[30:60], vecs[30:60]))
    assert grown.k == 0 and grown.n_passages == 60
    assert grown.rebuild_due and "reached 60" in grown.state.rebuild_reasons[0]


def test_candidate_ks_span_two_to_max_k_and_sqrt_half_n():
    ks = k_candidates(920, 64)
    assert ks[0] == 2 and ks[-1] == 64 and {17, 21, 27} <= set(ks)  # sqrt(460) = 21.4
    assert k_candidates(100_000, 64)[-1] == 64
    assert k_candidates(40, 64)[-1] == 5  # at least MIN_MEAN_SIZE passages per theme on average
    assert k_candidates(196, 64)[-1] == 24
    assert k_candidates(3, 64) == [2]


def test_pick_k_follows_a_clear_silhouette_else_the_prior():
    assert pick_k({4: 0.8, 8: 0.5, 16: 0.3}, 60_000, 64) == 4
    assert pick_k({8: 0.046, 12: 0.048, 19: 0.0465, 36: 0.040, 64: 0.0427}, 25_000, 64) == 19  # flat: near 64
    assert pick_k({15: 0.206, 23: 0.206, 45: 0.14}, 920, 64) == 23  # tie: nearer sqrt(460)


@pytest.mark.slow
def test_few_themes_in_a_large_corpus_are_found():
    ids, texts, vecs, labels = synthetic(15_000, seed=5)  # 60,000 passages: MiniBatchKMeans
    themes = build_themes(ids, texts, vecs, ThemeConfig())
    assert themes.k == 4
    assert adjusted_rand_score(labels, themes.assignment) == pytest.approx(1.0)


def test_update_assigns_new_passages_to_their_topic(corpus, themes):
    ids, _, _, labels = corpus
    where = _topic_of(themes, labels, ids)
    n_ids, n_texts, n_vecs, n_labels = synthetic(10, seed=2, prefix="new")
    up = update_themes(themes, (n_ids, n_texts, n_vecs))
    assert up.n_passages == themes.n_passages + 40
    for pid, lab in zip(n_ids, n_labels, strict=True):
        assert up.theme_of(pid) == where[lab]
    assert sorted(up.sizes.tolist()) == [70, 70, 70, 70]
    assert not up.rebuild_due  # same distribution, 17% growth
    assert abs(up.state.drift) < 0.25
    # the centroid moved as a running mean: the mean of all 70 members
    t = where["baking"]
    members = np.vstack([corpus[2][[i for i, lab in enumerate(labels) if lab == "baking"]],
                         n_vecs[[i for i, lab in enumerate(n_labels) if lab == "baking"]]])
    assert np.allclose(up.means[t], members.mean(axis=0), atol=1e-5)
    assert themes.n_passages == 240  # the old model is unchanged (immutable)


def test_removal_shrinks_sizes_and_terms(corpus, themes):
    ids, texts, vecs, labels = corpus
    t = _topic_of(themes, labels, ids)["volcano"]
    gone = [pid for pid, lab in zip(ids, labels, strict=True) if lab == "volcano"][:40]
    pick = [ids.index(p) for p in gone]
    up = update_themes(themes, removed_ids=[*gone, "unknown-id"],
                       removed=(gone, [texts[i] for i in pick], vecs[pick]))
    assert up.n_passages == 200 and int(up.sizes[t]) == 20
    assert all(up.theme_of(p) is None for p in gone)
    assert all(r not in gone for r in up.theme(t).representatives)
    assert len(up.theme(t).representatives) == 3
    lava = up.vocab.index("lava")
    assert 0 < up.counts[t, lava] < themes.counts[t, lava]
    # without the removed passages' content: sizes shrink, the centroid stays, the removal is counted
    blind = update_themes(themes, removed_ids=gone)
    assert int(blind.sizes[t]) == 20 and blind.state.removed_without_content == 40
    assert np.allclose(blind.means[t], themes.means[t])
    # removing most of the corpus flags a rebuild
    assert update_themes(themes, removed_ids=ids[:150]).rebuild_due


def test_growth_and_drift_flag_a_rebuild(corpus):
    ids, texts, vecs, labels = corpus
    keep = [i for i, lab in enumerate(labels) if lab != "volcano"]
    base = build_themes([ids[i] for i in keep], [texts[i] for i in keep], vecs[keep], ThemeConfig(k=3))
    # a topic the model has never seen: each passage lands far from every centroid
    v_ids, v_texts, v_vecs, _ = synthetic(25, seed=3, topics=("volcano",), prefix="v")
    drifted = update_themes(base, (v_ids, v_texts, v_vecs))
    assert drifted.rebuild_due and drifted.state.drift > 0.25
    assert any("farther" in r for r in drifted.state.rebuild_reasons)
    # more than 50% growth from the same topics
    g_ids, g_texts, g_vecs, _ = synthetic(31, seed=4, topics=("astronomy", "baking", "football"), prefix="g")
    grown = update_themes(base, (g_ids, g_texts, g_vecs))
    assert grown.rebuild_due and any("added since the build" in r for r in grown.state.rebuild_reasons)
    with pytest.raises(InputError):
        update_themes(base, ([ids[0]], [texts[0]], vecs[:1]))


def test_save_load_round_trip(tmp_path, corpus, themes):
    ids, _, vecs, _ = corpus
    up = update_themes(themes, (["extra"], ["lava and magma from the crater"], vecs[-1:]), removed_ids=[ids[0]])
    up.save(tmp_path / "themes")
    back = Themes.load(tmp_path / "themes")
    assert back.passage_ids == up.passage_ids and back.vocab == up.vocab and back.terms == up.terms
    assert np.array_equal(back.assignment, up.assignment) and np.array_equal(back.means, up.means)
    assert (back.counts != up.counts).nnz == 0 and back.pool_ids == up.pool_ids
    assert back.state == up.state and back.config == up.config
    assert back.themes[0].label_terms == up.themes[0].label_terms
    assert not list((tmp_path / "themes").glob("*.tmp"))  # the temporary files were renamed


def test_corrupt_or_missing_files_are_named(tmp_path, themes):
    d = themes.save(tmp_path / "t")
    with pytest.raises(IndexNotFoundError):
        Themes.load(tmp_path / "nothing")
    npz = d / "themes.npz"
    npz.write_bytes(npz.read_bytes()[:100])
    with pytest.raises(IndexCorruptError, match=r"themes\.npz"):
        Themes.load(d)
    themes.save(d)
    (d / "themes.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(IndexCorruptError, match=r"themes\.json"):
        Themes.load(d)
    themes.save(d)
    card = json.loads((d / "themes.json").read_text(encoding="utf-8"))
    card["k"] = 5
    (d / "themes.json").write_text(json.dumps(card), encoding="utf-8")
    with pytest.raises(IndexCorruptError, match="inconsistent"):
        Themes.load(d)
    (d / "themes.npz").unlink()
    with pytest.raises(IndexCorruptError, match=r"themes\.npz"):
        Themes.load(d)


@pytest.mark.parametrize("question", [
    "What topics does the corpus cover?", "Summarise the collection.", "What are the main subjects?",
    "Give me an overview of these documents", "What themes are covered?",
])
def test_whole_corpus_questions(question, corpus, themes):
    assert read_question(question) == ("corpus", ())
    assert looks_global(question)
    r = global_search(question, corpus[2][0], themes)
    assert r.mode == "corpus" and len(r.themes) == themes.k
    assert [t.size for t in r.themes] == sorted((t.size for t in r.themes), reverse=True)
    assert sum(t.share for t in r.themes) == pytest.approx(1.0)


def test_about_x_questions_rank_the_related_theme(corpus, themes):
    ids, _, vecs, labels = corpus
    where = _topic_of(themes, labels, ids)
    q = "What are the recurring themes about lava and eruptions?"
    assert read_question(q) == ("related", ("lava", "eruptions"))
    qvec = vecs[labels.index("volcano")]  # a vector close to the volcano topic stands in for the encoded query
    r = global_search(q, qvec, themes)
    assert r.mode == "related" and r.themes[0].id == where["volcano"]
    assert len(r.themes) == 1  # the score drops sharply after it
    assert r.themes[0].term_overlap > 0
    # with no signal in the vector the label terms alone point to the theme
    r2 = global_search("Which topics discuss the telescope?", np.zeros(DIM, np.float32), themes)
    assert r2.themes[0].id == where["astronomy"]
    assert not looks_global("Who scored the penalty in the final?")


def test_compose_answer_cites_representatives(corpus, themes):
    r = global_search("What topics does the corpus cover?", corpus[2][0], themes)
    text, cites = compose_answer(r)
    assert "240 passages" in text and "4 themes" in text
    assert len(cites) == 12 and set(cites) == {p for t in r.themes for p in t.representatives}
    assert "[12]" in text and text.count("\n") == 4


def test_map_reduce_runs_map_then_reduce(corpus, themes):
    ids, texts, vecs, _ = corpus
    by_id = {pid: Passage.make(text, id=pid) for pid, text in zip(ids, texts, strict=True)}
    r = global_search("What topics does the corpus cover?", vecs[0], themes)
    maps, template = map_reduce_prompts(r.question, r, by_id)
    assert len(maps) == 4 and MAP_ANSWERS in template
    for prompt, t in zip(maps, r.themes, strict=True):
        assert all(by_id[p].text[:20] in prompt for p in t.representatives)
    calls: list[str] = []

    def complete(prompt: str) -> str:
        calls.append(prompt)
        if len(calls) <= 4:
            return "NONE" if len(calls) == 2 else f"- note {len(calls)} [1]"
        return "final answer"

    assert map_reduce(r.question, r, by_id, complete) == "final answer"
    assert len(calls) == 5 and "note 1" in calls[-1] and "note 3" in calls[-1] and "NONE" not in calls[-1]
    assert map_reduce(r.question, r, by_id, lambda p: "NONE") .startswith("No theme")


@pytest.mark.slow
def test_real_squad_articles(shared_data):
    """Four SQuAD articles, paragraphs embedded (without title) by the repo's encoder: themes follow the
    articles and their labels contain the articles' head words."""
    from amsrag.embed import MiniLMEncoder
    from amsrag.ingest import load_qa

    wanted = {"Pain": "pain", "Neolithic": "neolithic", "Gregorian calendar": "calendar",
              "Exhibition game": "games"}
    passages = [p for p in load_qa(shared_data / "squad" / "squad_v1.1_subset_20articles.json").passages
                if p.title in wanted]
    vecs = MiniLMEncoder().encode([p.text for p in passages])
    themes = build_themes([p.id for p in passages], [p.text for p in passages], vecs, ThemeConfig())
    titles = [p.title for p in passages]
    got = [themes.theme_of(p.id) for p in passages]
    assert adjusted_rand_score(titles, got) >= 0.6
    for title, word in wanted.items():
        mine = [g for g, t in zip(got, titles, strict=True) if t == title]
        assert word in themes.theme(max(set(mine), key=mine.count)).label_terms


def test_build_reports_progress_and_keeps_the_k_scores(tmp_path, corpus):
    import io

    from amsrag.progress import LogProgress

    ids, texts, vecs, _ = corpus
    out = io.StringIO()
    themes = build_themes(ids, texts, vecs, ThemeConfig(), progress=LogProgress(stream=out))
    log = out.getvalue()
    assert "themes: choose k" in log and "themes: k-means" in log and "themes: label terms" in log
    scores = dict(themes.k_scores)
    assert themes.k == 4 and scores[4] == max(scores.values()) and set(scores) == set(k_candidates(240, 64))
    assert Themes.load(themes.save(tmp_path / "t")).k_scores == themes.k_scores
    with pytest.raises(InputError, match="dimension"):
        global_search("What topics does the corpus cover?", np.ones(DIM + 1, np.float32), themes)


@pytest.mark.slow
def test_themes_from_an_index(built_index, slice_passages, tmp_path):
    """The inputs read from a real index (stored vectors), a delete read before it happens, a query encoded
    by the index's encoder."""
    from amsrag.indexing.themes import index_batch, label_text

    ids, texts, vecs = index_batch(built_index)
    assert sorted(ids) == sorted(p.id for p in slice_passages) and vecs.shape == (len(ids), built_index.encoder.dim)
    assert texts[ids.index(slice_passages[0].id)] == label_text(slice_passages[0])
    themes = build_themes(ids, texts, vecs, ThemeConfig())
    assert themes.k >= 2 and all(themes.theme_of(pid) is not None for pid in ids)
    gone = ids[:5]
    removed = index_batch(built_index, [*gone, "not-stored"])
    assert removed[0] == gone
    up = update_themes(themes, removed_ids=gone, removed=removed)
    assert up.n_passages == len(ids) - 5 and up.state.removed_without_content == 0
    q = "What topics does the corpus cover?"
    r = global_search(q, built_index.encoder.encode_query(q), up)
    assert r.mode == "corpus" and sum(t.size for t in r.themes) == up.n_passages


def test_compose_answer_names_each_theme_by_its_representative_heading(corpus, themes):
    """With the passages, each theme is named by its representative passage's heading and file, and the answer
    opens by naming the largest themes; without a heading a theme falls back to its key terms."""
    r = global_search("What topics does the corpus cover?", corpus[2][0], themes)
    by_id = {}
    for n, t in enumerate(r.themes):
        for pid in t.representatives:
            meta = {"source": f"guide-{n}.pdf", "type": "pdf", "page": 3, "section": f"Part {n} › Chapter {n}"}
            by_id[pid] = Passage.make("text", id=pid, title=f"Guide {n}", metadata=meta if n < 3 else None)
    text, cites = compose_answer(r, passages_by_id=by_id)
    head, *lines = text.splitlines()
    assert head == ("The corpus of 240 passages falls into 4 themes, the largest about “Chapter 0”, “Chapter 1” and "
                    "“Chapter 2”:")
    assert lines[0].startswith("1. Chapter 0 (guide-0.pdf p. 3) — ")
    assert lines[3].startswith("4. Guide 3 — ")  # no section: the title names it
    assert len(cites) == 12 and text.count("\n") == 4
