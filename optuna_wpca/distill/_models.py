"""Teacher loading, and hooks that expose what KD matches in the teacher and the student.

The student itself is the candidate's transformers sequence classifier
(:class:`optuna_wpca.models.CandidateForSequenceClassification`, also ``optuna_wpca.distill.StudentClassifier``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from optuna_wpca.models import CandidateModel

#: transformers model types whose layers look like BERT's (embeddings, attention output, layer output).
BERT_FAMILY = ("bert", "roberta", "electra", "xlm-roberta", "camembert")


def load_teacher(path: str | os.PathLike, *, num_labels: int | None = None, device: Any = "cpu") -> nn.Module:
    """A pretrained BERT-family teacher from a local directory (``from_pretrained(path)``).

    With ``num_labels`` it is loaded with a sequence-classification head (new, or the fine-tuned
    one saved there); errors name a missing directory or a model that is not BERT-like.
    """
    from transformers import AutoModel, AutoModelForSequenceClassification

    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"teacher directory {str(path)!r} does not exist")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ValueError(f"teacher directory {str(path)!r} has no config.json: not a transformers model")
    model_type = json.loads(config_file.read_text()).get("model_type")
    if model_type not in BERT_FAMILY:
        raise ValueError(
            f"teacher in {str(path)!r} is a {model_type!r} model; distillation needs a BERT-family encoder "
            f"({', '.join(BERT_FAMILY)})"
        )
    weights = [f for f in ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                           "pytorch_model.bin.index.json") if (path / f).is_file()]
    if not weights:
        raise ValueError(f"teacher directory {str(path)!r} has no weights (model.safetensors or pytorch_model.bin)")
    try:
        if num_labels is None:
            model = AutoModel.from_pretrained(str(path), local_files_only=True)
        else:
            model = AutoModelForSequenceClassification.from_pretrained(str(path), num_labels=num_labels,
                                                                       local_files_only=True)
    except Exception as err:  # a truncated or corrupt weights file (safetensors raises its own type)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"teacher weights in {str(path)!r} cannot be read ({weights[0]}): {first}") from None
    return model.to(device)


def save_model(model: Any, directory: str | os.PathLike, *, quiet: bool = False) -> None:
    """transformers' ``save_pretrained`` (a student or a teacher), without its progress bar when quiet."""
    from transformers.utils import logging as transformers_logging

    hide = quiet and transformers_logging.is_progress_bar_enabled()
    if hide:
        transformers_logging.disable_progress_bar()
    try:
        model.save_pretrained(str(directory))
    finally:
        if hide:
            transformers_logging.enable_progress_bar()


def teacher_encoder(teacher: nn.Module) -> nn.Module:
    """The bare encoder of a transformers model (``BertModel`` inside ``BertForSequenceClassification``)."""
    return getattr(teacher, teacher.base_model_prefix, teacher)


class Recorder:
    """Forward hooks that keep the outputs of chosen modules during one forward pass."""

    def __init__(self, modules: dict[str, list[nn.Module]]) -> None:
        self.outputs: dict[str, list[torch.Tensor]] = {k: [] for k in modules}
        self._handles = []
        for kind, mods in modules.items():
            for m in mods:
                self._handles.append(m.register_forward_hook(self._hook(kind)))

    def _hook(self, kind: str):
        def hook(_m: nn.Module, _i: object, out: Any) -> None:
            self.outputs[kind].append(out[0] if isinstance(out, tuple) else out)

        return hook

    def clear(self) -> None:
        """Forget the outputs recorded so far."""
        for v in self.outputs.values():
            v.clear()

    def remove(self) -> None:
        """Remove the hooks from the model."""
        for h in self._handles:
            h.remove()
        self._handles.clear()


def student_points(encoder: CandidateModel) -> dict[str, list[nn.Module]]:
    """Where the student's embeddings, attention-block outputs and layer outputs come from."""
    attention = []
    for layer in encoder.layers:
        if hasattr(layer, "attention_norm"):  # BERT and MobileBERT blocks
            attention.append(layer.attention_norm)
        elif hasattr(layer, "mixing"):  # FlexiBERT layers
            attention.append(layer.mixing)
        else:
            raise ValueError(f"{type(layer).__name__} has no attention output to distil")
    return {"embeddings": [encoder.embeddings], "attention": attention, "ffn": list(encoder.layers)}


def teacher_points(teacher: nn.Module) -> dict[str, list[nn.Module]]:
    """The teacher's KD points: its embeddings, each layer's attention-block output and layer output."""
    enc = teacher_encoder(teacher)
    layers = enc.encoder.layer
    return {
        "embeddings": [enc.embeddings],
        "attention": [layer.attention.output for layer in layers],
        "ffn": list(layers),
    }
