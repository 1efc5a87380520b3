"""The span reader itself (`SpanReader`): the ONNX model read over every window of the passages, the answer
chosen (a span, yes / no, an option, a stated default) with its calibrated confidence and quote, and the
support of given answers. Its artifact is `reader.onnx` with the card `reader.json`."""

from __future__ import annotations

import bisect
import math
import re
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.errors import AmsragError
from amsrag.generate.base import ABSTAIN, EvidencePassage, Quote, check_passages
from amsrag.generate.doc_cues import (
    COMMAND_MARGIN,
    NAME_MARGIN,
    DefaultAnswer,
    asks_for_command,
    asks_for_name,
    command_line,
    default_answers,
    is_name,
)
from amsrag.generate.metrics import normalize_answer
from amsrag.generate.onnx_artifact import OnnxArtifact
from amsrag.generate.quote import quote_at, sentence_at
from amsrag.generate.reader_spans import (
    Alternative,
    ReaderResult,
    SpanCandidate,
    SpanSupport,
    SupportReading,
    first_line,
    option_dashes,
)
from amsrag.generate.reader_windows import (
    CHARS_PER_QUESTION_TOKEN,
    JOINT_SEP,
    Window,
    WindowMaker,
    context_of,
    pad_batch,
)
from amsrag.text.citations import SECTION_JOIN
from amsrag.text.questions import is_yesno_question, question_options

MODEL_FILE = "reader.onnx"
CARD_FILE = "reader.json"
TYPE_LABELS = ("span", "yes", "no")

InferFn = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


class ReaderArtifactError(AmsragError):
    """The reader's model or card is missing or unreadable (the message names the file)."""


ARTIFACT = OnnxArtifact("reader", CARD_FILE, MODEL_FILE, "amsrag train reader train --out DIR", ReaderArtifactError)


def default_directory() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "reader"))


def _answer_pattern(answer: str) -> re.Pattern[str] | None:
    """The answer text as it may occur in a passage: case-insensitive, any white space between its words,
    whole words at its ends, a leading article optional."""
    words = answer.split()
    if words and words[0].lower() in ("a", "an", "the") and len(words) > 1:
        words = words[1:]
    if not words:
        return None
    body = r"\s+".join(re.escape(w) for w in words)
    return re.compile(rf"(?<!\w)(?:(?:the|a|an)\s+)?{body}(?!\w)", re.I)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, x))))


class SpanReader:
    """Reads a question against passages jointly. Build with `load()` (the shipped artifact by default)."""

    def __init__(self, infer: InferFn, tokenizer: Any, card: dict[str, Any]) -> None:
        self.infer = infer
        self.card = card
        cfg = card.get("windows", {})
        self.max_len = int(cfg.get("max_len", 256))
        self.joint_tokens = int(cfg.get("joint_tokens", 384))
        self.max_answer_tokens = int(cfg.get("max_answer_tokens", 30))
        self.maker = WindowMaker(tokenizer, self.max_len, int(cfg.get("stride", 96)))
        self.max_question_chars = CHARS_PER_QUESTION_TOKEN * self.maker.max_question
        cal = card.get("calibration", {})
        self.coef: dict[str, float] = {k: float(v) for k, v in cal.get("coef", {}).items()}
        self.intercept = float(cal.get("intercept", 0.0))
        self.threshold = float(cal.get("threshold", 0.0))
        self.retrieval_weight = float(card.get("retrieval_weight", 0.0))
        qcal = card.get("quote_calibration") or {}
        self.quote_coef: dict[str, float] = {k: float(v) for k, v in qcal.get("coef", {}).items()}
        self.quote_intercept = float(qcal.get("intercept", 0.0))
        self.quote_threshold: float | None = float(qcal["threshold"]) if "threshold" in qcal else None
        # P(right) of a default read from documentation structure, per match level ("owner", "heading")
        self.default_confidence: dict[str, float] = {
            k: float(v) for k, v in ((card.get("doc_cues") or {}).get("default_confidence") or {}).items()}
        self.name_cue = bool((card.get("doc_cues") or {}).get("name_cue", True))
        self.joint_pairs_of = int(cfg.get("joint_pairs_of", 0))  # 0: no pairs, only all-passages-joint
        self.title_rule = bool(cfg.get("title_rule", True))

    @classmethod
    def load(cls, directory: Path | str | None = None, threads: int = 1) -> SpanReader:
        from tokenizers import Tokenizer

        from amsrag.embed.encoder import tokenizer_path

        d = Path(directory) if directory is not None else default_directory()
        card = ARTIFACT.read_card(d)
        session = ARTIFACT.session(d, threads)
        tok_file = tokenizer_path()
        try:
            tokenizer = Tokenizer.from_file(str(tok_file))
        except Exception as e:
            raise ReaderArtifactError(f"{tok_file}: tokenizer unreadable ({e})") from e
        tokenizer.no_truncation()
        tokenizer.no_padding()
        names = [i.name for i in session.get_inputs()]

        def infer(ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            s, e, t = session.run(None, {k: v for k, v in feed.items() if k in names})
            return np.asarray(s, dtype=np.float32), np.asarray(e, dtype=np.float32), np.asarray(t, dtype=np.float32)

        return cls(infer, tokenizer, card)

    # -- reading ---------------------------------------------------------------------------------------
    @staticmethod
    def _window_logsoftmax(s: np.ndarray, e: np.ndarray, w: Window) -> tuple[np.ndarray, np.ndarray]:
        """Log-probabilities of each start / end position of one window: [no-answer, context tokens...]."""
        c0, n = w.ctx_start, len(w.offsets)
        ss, ee = s[c0:c0 + n].astype(np.float64), e[c0:c0 + n].astype(np.float64)
        ls = np.concatenate([[s[0]], ss]) - max(float(s[0]), float(ss.max()))
        le = np.concatenate([[e[0]], ee]) - max(float(e[0]), float(ee.max()))
        return ls - math.log(float(np.exp(ls).sum())), le - math.log(float(np.exp(le).sum()))

    def _window_spans(self, s: np.ndarray, e: np.ndarray, w: Window, k: int = 3) -> list[tuple[float, float, int, int]]:
        """The k best (score - null, prob, char_start, char_end) spans of one window's context."""
        c0, n = w.ctx_start, len(w.offsets)
        null = float(s[0] + e[0])
        ss, ee = s[c0:c0 + n].astype(np.float64), e[c0:c0 + n].astype(np.float64)
        m = ss[:, None] + ee[None, :]
        band = np.triu(np.ones((n, n), dtype=bool)) & ~np.triu(np.ones((n, n), dtype=bool), self.max_answer_tokens)
        m = np.where(band, m, -np.inf)
        flat = m.ravel()
        kk = min(k, flat.size)
        part = np.argpartition(flat, -kk)[-kk:]
        top = part[np.argsort(flat[part])[::-1]]
        ls = np.concatenate([[s[0]], ss]) - max(float(s[0]), float(ss.max()))
        le = np.concatenate([[e[0]], ee]) - max(float(e[0]), float(ee.max()))
        log_zs, log_ze = math.log(float(np.exp(ls).sum())), math.log(float(np.exp(le).sum()))
        out = []
        for idx in top:
            if not np.isfinite(flat[idx]):
                break
            i, j = divmod(int(idx), n)
            prob = math.exp(float(ls[i + 1]) - log_zs + float(le[j + 1]) - log_ze)
            out.append((float(flat[idx]) - null, prob, w.offsets[i][0], w.offsets[j][1]))
        return out

    def _windows(self, question: str, passages: Sequence[EvidencePassage]
                 ) -> tuple[list[str], list[tuple[int, ...]], list[str], list[Window]]:
        """(contexts, joint groups, joint contexts, windows): every passage's windows, then those of the joint
        multi-passage contexts (window passage -1 - j for joint group j)."""
        contexts = [context_of(p.title, p.text) for p in passages]
        q_ids = self.maker.question_ids(question)
        encoded = self.maker.encode_contexts(contexts)
        windows: list[Window] = []
        for i, (ids, offs) in enumerate(encoded):
            windows += self.maker.windows(q_ids, ids, offs, i)
        joints = self._joint_groups(q_ids, [len(ids) for ids, _ in encoded])
        joint_texts = [JOINT_SEP.join(contexts[i] for i in members) for members in joints]
        for j, (j_ids, j_offs) in enumerate(self.maker.encode_contexts(joint_texts) if joints else []):
            windows += self.maker.windows(q_ids, j_ids, j_offs, -1 - j, self.joint_tokens)
        return contexts, joints, joint_texts, windows

    def read(self, question: str, passages: Sequence[EvidencePassage],
             retrieval_scores: Sequence[float] | None = None) -> ReaderResult:
        t0 = time.perf_counter()
        question = self.bounded(question)
        passages = check_passages(passages)
        if not passages:
            return ReaderResult(ABSTAIN, "span", None, 0.0, True, ms=(time.perf_counter() - t0) * 1000)
        heads = [len(p.title.strip()) + 2 if p.title.strip() else 0 for p in passages]  # where the text starts
        contexts, joints, joint_texts, windows = self._windows(question, passages)
        s, e, t = self._run(windows)
        ret = [float(x) for x in retrieval_scores] if retrieval_scores is not None else [0.0] * len(passages)
        cands: list[SpanCandidate] = []
        type_p = np.zeros(3)
        best_yn = (-1.0, 0)
        wants_name = self.name_cue and asks_for_name(question)
        wants_command = self.name_cue and not wants_name and asks_for_command(question)
        # a name or a command line may be below the window's three best spans
        per_window = 10 if wants_name else 30 if wants_command else 3
        for k, w in enumerate(windows):
            tl = t[k] - t[k].max()
            p = np.exp(tl) / np.exp(tl).sum()
            type_p += p
            yn = float(p[1] + p[2])
            for score, prob, a, b in self._window_spans(s[k], e[k], w, per_window):
                ctx = contexts[w.passage] if w.passage >= 0 else joint_texts[-1 - w.passage]
                pi, a2, b2 = self._locate(w.passage, a, b, contexts, joints)
                bonus = self.retrieval_weight * ret[pi] if pi >= 0 else 0.0
                raw = ctx[a:b]
                text = raw.strip(" \t\n,;:")
                if not text or (w.passage < 0 and JOINT_SEP.strip() in text):  # no span across two passages
                    continue
                if self.title_rule and heads[pi] and a2 < heads[pi] - 2 and b2 > heads[pi]:
                    continue  # a span running from the title into the text ("Uralic languages: The Uralic …")
                if SECTION_JOIN in text:
                    continue  # a heading path ("Configuration › strict") is amsrag's title, never an answer
                lead = len(raw) - len(raw.lstrip(" \t\n,;:"))
                dashes = option_dashes(ctx, a + lead)
                text = ctx[a + lead - dashes:a + lead + len(text)]
                a2 += lead - dashes  # the answer's own characters, for its quote
                b2 = a2 + len(text)
                cands.append(SpanCandidate(text, pi, score + bonus, prob, a2, b2))
            if yn > best_yn[0]:
                best_yn = (yn, w.passage if w.passage >= 0 else joints[-1 - w.passage][0])
        type_p /= len(windows)
        cands.sort(key=lambda c: -c.score)
        best = cands[0] if cands else SpanCandidate("", 0, -30.0, 0.0)
        if wants_name and not is_name(best.text, question):
            name = next((n for n in map(first_line, cands) if is_name(n.text, question)), None)
            if name is not None and name.score >= best.score - NAME_MARGIN:
                best = name  # the question asks for a name: the best name-shaped span, its own score
        if wants_command:
            best = self._command(best, cands, contexts)
        second = next((c.score for c in cands if normalize_answer(c.text) != normalize_answer(best.text)), -30.0)
        kind, answer, cited = "span", best.text, best.passage
        options = question_options(question)
        yn_q = 1.0 if is_yesno_question(question) else 0.0
        p_yn = float(type_p[1] + type_p[2])
        opt_margin = 0.0
        if options is not None:
            chosen, cited_o, opt_margin = self._choose_option(options, windows, s, e, contexts, joints, joint_texts,
                                                              best)
            if chosen is not None:
                kind, answer, cited = "option", chosen, cited_o
        elif p_yn > float(type_p[0]) and (yn_q or p_yn > 0.9):
            kind = "yes" if type_p[1] >= type_p[2] else "no"
            answer, cited = kind, best_yn[1]
        feats = {"score": best.score, "margin": best.score - second, "prob": best.prob, "p_yesno": p_yn,
                 "yn_question": yn_q, "yn_margin": abs(float(type_p[1] - type_p[2])) / max(p_yn, 1e-6),
                 "is_yesno": 1.0 if kind in ("yes", "no") else 0.0, "is_option": 1.0 if kind == "option" else 0.0,
                 "opt_margin": opt_margin, "retrieval": ret[cited] if 0 <= cited < len(ret) else 0.0,
                 "windows": float(len(windows)), "p_yes": float(type_p[1]), "p_no": float(type_p[2])}
        conf = self.confidence(feats)
        alts: list[Alternative] = []
        seen = {normalize_answer(answer)}
        for c in cands:
            key = normalize_answer(c.text)
            if key in seen or len(alts) >= 3:
                continue
            seen.add(key)
            alts.append(Alternative(c.text, passages[max(c.passage, 0)].id, round(c.score, 3)))
        stated = self._stated_default(question, passages, kind)
        if stated is not None:  # the question asks for a default the documentation states under its name
            kind, answer, cited, conf = "default", stated.value, stated.passage, self.default_confidence[stated.level]
            best = SpanCandidate(stated.value, stated.passage, best.score, best.prob, stated.start, stated.end)
            feats = {**feats, "default_level": 1.0 if stated.level == "owner" else 0.5}
        pid = passages[max(cited, 0)].id if answer else None
        quote, qfeats = self._quote(kind, answer, cited, best, cands, contexts, passages, feats)
        qconf = self.quote_confidence(qfeats) if quote is not None and self.quote_threshold is not None else None
        return ReaderResult(answer or ABSTAIN, kind, pid, conf, conf < self.threshold or not answer, tuple(alts),
                            (time.perf_counter() - t0) * 1000, feats, quote, qfeats, qconf)

    @staticmethod
    def _command(best: SpanCandidate, cands: Sequence[SpanCandidate], contexts: Sequence[str]) -> SpanCandidate:
        """For a "which command …?" question: the best span that opens a command line, extended to the whole
        line ("mkdocs" at "mkdocs new my-project"), when it trails the best span by at most COMMAND_MARGIN. It
        keeps the best span's score and probability: the reader found where the answer is, the command line
        is how documentation writes it (its own span score runs low: "mkdocs new" was never a training answer)."""
        lines: list[SpanCandidate] = []
        for c in cands:
            if c.score < best.score - COMMAND_MARGIN:
                break
            found = command_line(contexts[c.passage], c.char_start) if c.passage >= 0 else None
            if found is not None:
                text = contexts[c.passage][found[0]:found[1]]
                lines.append(SpanCandidate(text, c.passage, best.score, best.prob, found[0], found[1]))
        # the passage the reader found best holds the answer's command more often than a higher-scored line
        # elsewhere ("Creating a new project" above "mkdocs new", beside a "mkdocs build" passage)
        return next((c for c in lines if c.passage == best.passage), lines[0] if lines else best)

    def _stated_default(self, question: str, passages: Sequence[EvidencePassage], kind: str) -> DefaultAnswer | None:
        """The best default statement named by the question, when the card calibrated its level."""
        if kind != "span" or not self.default_confidence:
            return None
        found = default_answers(question, passages)
        if not found or found[0].level not in self.default_confidence:
            return None
        return found[0]

    def _quote(self, kind: str, answer: str, cited: int, best: SpanCandidate, cands: list[SpanCandidate],
               contexts: list[str], passages: Sequence[EvidencePassage], feats: dict[str, float]
               ) -> tuple[Quote | None, dict[str, float]]:
        """The quote of the answer and the features of its sentence: the span's own sentence; for an option
        its occurrence in the cited passage; for yes / no the best span of the cited passage."""
        if not answer or not cands:
            return None, {}
        pick: SpanCandidate | None = best
        if kind == "option":
            m = re.search(re.escape(answer), contexts[cited], re.I) if 0 <= cited < len(contexts) else None
            pick = SpanCandidate(answer, cited, best.score, best.prob, m.start(), m.end()) if m else None
        elif kind in ("yes", "no"):
            pick = next((c for c in cands if c.passage == cited), None)
        if pick is None or pick.char_end <= pick.char_start:
            return None, {}
        p = passages[pick.passage]
        quote = quote_at(p.title, p.text, pick.char_start, pick.char_end, p.id)
        sent = sentence_at(p.title, p.text, pick.char_start, pick.char_end)
        if quote is None or sent is None:
            return None, {}
        inside = [c for c in cands if c.passage == pick.passage and c.char_start >= sent[0] and c.char_end <= sent[1]]
        total = sum(c.prob for c in cands) or 1.0
        mass = sum(c.prob for c in inside)
        qfeats = {"score": feats["score"], "margin": feats["margin"], "prob": feats["prob"],
                  "sentence_mass": mass, "sentence_share": mass / total, "sentence_spans": float(len(inside)),
                  "sentence_words": float(len(quote.text.split())), "retrieval": feats.get("retrieval", 0.0)}
        return quote, qfeats

    def quote_confidence(self, qfeats: dict[str, float]) -> float:
        """P(the quote sentence holds the answer), from the card's `quote_calibration`."""
        return _sigmoid(self.quote_intercept + sum(w * qfeats.get(k, 0.0) for k, w in self.quote_coef.items()))

    def answer_support(self, question: str, passages: Sequence[EvidencePassage], answers: Sequence[str],
                       candidates: int = 0) -> SupportReading:
        """How strongly the reader reads each of `answers` in `passages`: the best probability (and score
        minus no-answer) over every window and every occurrence of the answer text (case-insensitive, white
        space collapsed, a leading article optional); "yes" / "no" by the answer-type head instead. With
        `candidates`, also the reader's own `candidates` best distinct spans, scored the same way."""
        question = self.bounded(question)
        passages = check_passages(passages)
        empty = [SpanSupport(a, 0.0, -30.0, False, None) for a in answers]
        if not passages:
            return SupportReading(tuple(empty), (), 0.0, 0)
        contexts, joints, joint_texts, windows = self._windows(question, passages)
        s, e, t = self._run(windows)
        logs = [self._window_logsoftmax(s[k], e[k], w) for k, w in enumerate(windows)]
        types = np.exp(t - t.max(axis=1, keepdims=True))
        types /= types.sum(axis=1, keepdims=True)
        top_prob = 0.0
        cands: dict[str, SpanCandidate] = {}
        if candidates:
            for k, w in enumerate(windows):
                ctx = contexts[w.passage] if w.passage >= 0 else joint_texts[-1 - w.passage]
                for score, prob, a, b in self._window_spans(s[k], e[k], w):
                    text = ctx[a:b].strip(" \t\n,;:")
                    top_prob = max(top_prob, prob)
                    key = normalize_answer(text)
                    if not key or (w.passage < 0 and JOINT_SEP.strip() in text):
                        continue
                    if key not in cands or score > cands[key].score:
                        cands[key] = SpanCandidate(text, 0, score, prob)
        else:
            for k, w in enumerate(windows):
                spans = self._window_spans(s[k], e[k], w, 1)
                top_prob = max([top_prob, *(p for _, p, _, _ in spans)])

        def support(answer: str) -> SpanSupport:
            norm = normalize_answer(answer)
            if norm in ("yes", "no"):
                col = 1 if norm == "yes" else 2
                k = int(np.argmax(types[:, col]))
                p = float(types[k, col])
                w = windows[k]
                pi = w.passage if w.passage >= 0 else joints[-1 - w.passage][0]
                return SpanSupport(answer, p, math.log(max(p, 1e-9) / max(1 - p, 1e-9)), True, passages[pi].id)
            best = SpanSupport(answer, 0.0, -30.0, False, None)
            pattern = _answer_pattern(answer)
            if pattern is None:
                return best
            for k, w in enumerate(windows):
                ctx = contexts[w.passage] if w.passage >= 0 else joint_texts[-1 - w.passage]
                starts = [o[0] for o in w.offsets]
                ends = [o[1] for o in w.offsets]
                if not starts:
                    continue
                null = float(s[k][0] + e[k][0])
                ls, le = logs[k]
                for m in pattern.finditer(ctx, starts[0], ends[-1]):
                    i = bisect.bisect_right(ends, m.start())  # first token ending after the match starts
                    j = bisect.bisect_left(starts, m.end()) - 1  # last token starting before it ends
                    if i >= len(starts) or j < i or j - i >= self.max_answer_tokens:
                        continue
                    p = math.exp(float(ls[i + 1] + le[j + 1]))
                    if p > best.prob or not best.found:
                        score = float(s[k][w.ctx_start + i] + e[k][w.ctx_start + j]) - null
                        pi = self._locate(w.passage, m.start(), m.end(), contexts, joints)[0]
                        best = SpanSupport(answer, p, score, True, passages[pi].id)
            return best

        ranked = sorted(cands.values(), key=lambda c: -c.score)[:candidates]
        return SupportReading(tuple(support(a) for a in answers), tuple(support(c.text) for c in ranked), top_prob,
                              len(windows))

    def bounded(self, question: str) -> str:
        """The part of `question` the reader reads (its token budget, as characters)."""
        return question[:self.max_question_chars]

    def confidence(self, feats: dict[str, float]) -> float:
        z = self.intercept + sum(w * feats.get(k, 0.0) for k, w in self.coef.items())
        return _sigmoid(z)

    def _run(self, windows: list[Window]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Batches of similar length (padding costs time); outputs in window order."""
        order = sorted(range(len(windows)), key=lambda i: len(windows[i].ids))
        n_max = max(len(w.ids) for w in windows)
        s = np.full((len(windows), n_max), -1e4, dtype=np.float32)
        e = np.full_like(s, -1e4)
        t = np.zeros((len(windows), 3), dtype=np.float32)
        for b in range(0, len(order), 8):
            idx = order[b:b + 8]
            ids, types, mask = pad_batch([windows[i] for i in idx])
            bs, be, bt = self.infer(ids, types, mask)
            for r, i in enumerate(idx):
                n = len(windows[i].ids)
                s[i, :n], e[i, :n], t[i] = bs[r, :n], be[r, :n], bt[r]
        return s, e, t

    def _joint_groups(self, q_ids: list[int], lengths: list[int]) -> list[tuple[int, ...]]:
        """Passages read side by side as one context (a bridge passage beside the answer passage): all of
        them when they fit in `joint_tokens`, else the pairs among the first `joint_pairs_of` that fit."""
        n = len(lengths)
        if n < 2:
            return []
        def fits(group: tuple[int, ...]) -> bool:
            return self.maker.fits(q_ids, sum(lengths[i] for i in group) + 2 * (len(group) - 1), self.joint_tokens)
        every = tuple(range(n))
        if fits(every):
            return [every]
        top = min(n, self.joint_pairs_of)
        return [(i, j) for i in range(top) for j in range(i + 1, top) if fits((i, j))]

    @staticmethod
    def _locate(passage: int, a: int, b: int, contexts: list[str],
                joints: list[tuple[int, ...]]) -> tuple[int, int, int]:
        """A span of a joint context → (passage index, start, end) within that passage's context."""
        if passage >= 0:
            return passage, a, b
        members = joints[-1 - passage]
        pos = 0
        for i in members:
            c = contexts[i]
            if a < pos + len(c):
                return i, a - pos, b - pos
            pos += len(c) + len(JOINT_SEP)
        return members[-1], 0, 0

    def _choose_option(self, options: tuple[str, str], windows: list[Window], s: np.ndarray, e: np.ndarray,
                       contexts: list[str], joints: list[tuple[int, ...]], joint_texts: list[str],
                       best: SpanCandidate) -> tuple[str | None, int, float]:
        """Score each option by its best occurrence (start+end logit minus no-answer) over every window."""
        norm_best = set(normalize_answer(best.text).split())
        scores: list[tuple[float, int]] = []
        for opt in options:
            pat = re.compile(re.escape(opt), re.I)
            top, where = -math.inf, 0
            for k, w in enumerate(windows):
                ctx = contexts[w.passage] if w.passage >= 0 else joint_texts[-1 - w.passage]
                null = float(s[k][0] + e[k][0])
                starts = {o[0]: i for i, o in enumerate(w.offsets)}
                ends = {o[1]: i for i, o in enumerate(w.offsets)}
                for m in pat.finditer(ctx):
                    i, j = starts.get(m.start()), ends.get(m.end())
                    if i is None or j is None or j < i:
                        continue
                    sc = float(s[k][w.ctx_start + i] + e[k][w.ctx_start + j]) - null
                    if sc > top:
                        top, where = sc, self._locate(w.passage, m.start(), m.end(), contexts, joints)[0]
            scores.append((top, where))
        (sa, wa), (sb, wb) = scores
        if math.isinf(sa) and math.isinf(sb):
            # neither option is in the evidence: the one the best span overlaps most, if any
            ov = [len(norm_best & set(normalize_answer(o).split())) for o in options]
            if max(ov) == 0:
                return None, 0, 0.0
            k = int(ov[1] > ov[0])
            return options[k], best.passage, 0.0
        if sa >= sb:
            return options[0], wa, (sa - sb) if not math.isinf(sb) else 10.0
        return options[1], wb, (sb - sa) if not math.isinf(sa) else 10.0
