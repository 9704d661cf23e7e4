"""Teacher loading and the student's task head, plus hooks that expose what KD matches."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from optuna_wpca.models import CandidateModel
from optuna_wpca.models._head import ClassificationHead

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


def teacher_encoder(teacher: nn.Module) -> nn.Module:
    """The bare encoder of a transformers model (``BertModel`` inside ``BertForSequenceClassification``)."""
    return getattr(teacher, teacher.base_model_prefix, teacher)


class StudentClassifier(ClassificationHead, nn.Module):
    """A candidate encoder with BERT's pooler (first token, dense, tanh) and a linear classifier.

    Saved, it is a transformers directory: after ``import optuna_wpca``,
    ``AutoModelForSequenceClassification.from_pretrained(directory)`` gives the same logits.
    ``labels`` names the classes (``id2label`` in ``config.json``).
    """

    def __init__(self, encoder: CandidateModel, num_labels: int, dropout: float = 0.1, seed: int | None = 0,
                 labels: Sequence[str] | None = None) -> None:
        super().__init__()
        if not encoder.classifiable:
            raise ValueError(f"task distillation needs an encoder student; {type(encoder).__name__} is causal")
        if labels is not None and len(labels) != num_labels:
            raise ValueError(f"{len(labels)} label names for {num_labels} labels")
        self.encoder = encoder
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        self.add_head(encoder.config.hidden_size, num_labels, dropout, generator=generator)
        self.num_labels = num_labels
        self.labels = list(labels) if labels is not None else [f"LABEL_{i}" for i in range(num_labels)]

    def forward(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        return self.head_logits(self.encoder(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids))

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """``config.json`` (the encoder's config, the labels, ``architectures``) and one
        ``model.safetensors`` with the encoder (``encoder.*``) and the task head."""
        from safetensors.torch import save_file

        from optuna_wpca.models._base import CONFIG_NAME, WEIGHTS_NAME

        path = Path(directory)
        self.encoder.save_pretrained(path)
        config = json.loads((path / CONFIG_NAME).read_text())
        config.update({
            "architectures": [self.encoder.transformers_names()["classifier"]],
            "id2label": {str(i): name for i, name in enumerate(self.labels)},
            "label2id": {name: i for i, name in enumerate(self.labels)},
        })
        (path / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n")
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        tmp = path / (WEIGHTS_NAME + ".tmp")
        save_file(state, str(tmp), metadata={"format": "pt"})
        os.replace(tmp, path / WEIGHTS_NAME)
        for old in ("head.safetensors", "head.json"):  # the layout before 0.2
            (path / old).unlink(missing_ok=True)

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, *, device: Any = "cpu") -> "StudentClassifier":
        """Load a student saved with ``save_pretrained`` (also the layout before 0.2, with
        ``head.safetensors``)."""
        from safetensors.torch import load_file

        from optuna_wpca.models._base import CONFIG_NAME, WEIGHTS_NAME

        path = Path(directory)
        config = json.loads((path / CONFIG_NAME).read_text()) if (path / CONFIG_NAME).is_file() else {}
        if (path / "head.json").is_file():
            num_labels, labels = json.loads((path / "head.json").read_text())["num_labels"], None
            state = load_file(str(path / "head.safetensors"))
        elif "id2label" in config:
            labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
            num_labels, state = len(labels), None
        else:
            raise FileNotFoundError(f"{str(path)!r} holds no task head: not a distilled student")
        model = cls(CandidateModel.from_pretrained(path), num_labels, labels=labels)
        if state is None:
            state = {k: v for k, v in load_file(str(path / WEIGHTS_NAME)).items() if not k.startswith("encoder.")}
        model.pooler.load_state_dict({k[7:]: v for k, v in state.items() if k.startswith("pooler.")})
        model.classifier.load_state_dict({k[11:]: v for k, v in state.items() if k.startswith("classifier.")})
        return model.to(device).eval()


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
