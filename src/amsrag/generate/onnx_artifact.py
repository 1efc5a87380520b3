"""A reader's ONNX artifact: a JSON card beside an ONNX model whose sha256 the card records.

`OnnxArtifact.read_card` reads the card and checks the model against it; `OnnxArtifact.session` opens the
model on the CPU. Each failure raises the reader's own error class with a message naming the file at fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amsrag.artifacts import file_sha256
from amsrag.errors import AmsragError


@dataclass(frozen=True, slots=True)
class OnnxArtifact:
    """What differs between the readers' artifacts: file names, how messages name the model, the error."""

    kind: str  # "reader", "Chinese reader": "{kind} card not found", "{kind} model unreadable"
    card: str  # JSON file name
    model: str  # ONNX file name
    train_command: str  # shown when the card is missing
    error: type[AmsragError]

    def read_card(self, directory: Path) -> dict[str, Any]:
        """The card (a JSON object), once the model is there and, when the card records `artifact.sha256`,
        its bytes match that."""
        card_path, model_path = directory / self.card, directory / self.model
        try:
            card = json.loads(card_path.read_text(encoding="utf-8"))
            if not isinstance(card, dict):
                raise ValueError("not a JSON object")
        except FileNotFoundError as e:
            raise self.error(f"{card_path}: {self.kind} card not found (train one: {self.train_command})") from e
        except (OSError, ValueError) as e:
            raise self.error(f"{card_path}: {self.kind} card unreadable ({e})") from e
        if not model_path.is_file():
            raise self.error(f"{model_path}: {self.kind} model not found")
        want = str((card.get("artifact") or {}).get("sha256", ""))
        if want:
            got = file_sha256(model_path)
            if got != want:
                raise self.error(f"{model_path}: sha256 {got[:12]}… does not match its card {card_path} "
                                 f"({want[:12]}…): a different or damaged model")
        return card

    def session(self, directory: Path, threads: int = 1) -> Any:  # -> onnxruntime.InferenceSession
        """The model on onnxruntime's CPU provider with `threads` intra-op threads, none of them spinning."""
        import onnxruntime as ort

        model_path = directory / self.model
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, threads)
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        try:
            return ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own types for a corrupt file
            raise self.error(f"{model_path}: {self.kind} model unreadable ({type(e).__name__}: {e})") from e
