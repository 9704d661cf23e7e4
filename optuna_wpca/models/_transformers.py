"""The candidates as transformers models, so that the Auto classes load a saved candidate.

After ``import optuna_wpca``, a directory written by ``CandidateModel.save_pretrained``, a distilled
student's ``save_pretrained`` or ``optuna-wpca export`` loads with ``AutoConfig``, ``AutoModel`` and
(encoders) ``AutoModelForSequenceClassification``, and ``pipeline("text-classification", model=directory)``
runs on an exported student. The classes here wrap the plain candidate modules (the same parameters
under the same names) and return transformers' output objects. The sequence classifier is also the
student that distillation trains (``optuna_wpca.distill.StudentClassifier`` is this class): there is
one classifier, built from a candidate with :meth:`CandidateForSequenceClassification.from_candidate`.

Example:
    >>> import tempfile, torch, optuna_wpca
    >>> from transformers import AutoModel
    >>> space = optuna_wpca.WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
    >>> path = tempfile.mkdtemp()
    >>> space.build(space.sample(0), seed=0).save_pretrained(path)
    >>> AutoModel.from_pretrained(path)(torch.tensor([[101, 7592, 102]])).last_hidden_state.shape
    torch.Size([1, 3, 32])
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, ClassVar, Sequence

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSequenceClassification,
    PreTrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import BaseModelOutput, SequenceClassifierOutput

from optuna_wpca._errors import InputError
from optuna_wpca.models._base import MODEL_TYPES, CandidateModel, read_candidate_config


class CandidateConfig(PreTrainedConfig):
    """A transformers config holding a candidate's config fields at its top level
    (``hidden_size``, ``layers``, ...), next to transformers' own (``id2label``, ...)."""

    candidate_class: ClassVar[type[CandidateModel]]

    def __init__(self, **kwargs: Any) -> None:
        for name in self._candidate_fields():
            if name in kwargs:
                setattr(self, name, kwargs.pop(name))
        super().__init__(**kwargs)

    @classmethod
    def _candidate_fields(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls.candidate_class.config_class)]

    def candidate_config(self) -> Any:
        """The candidate's own config dataclass."""
        fields = {n: getattr(self, n) for n in self._candidate_fields() if hasattr(self, n)}
        return self.candidate_class.config_class.from_dict(fields)


class CandidateTransformersModel(PreTrainedModel):
    """The bare candidate (``AutoModel``): its modules, under their own names, and
    ``BaseModelOutput(last_hidden_state=...)`` from ``forward``."""

    config_class = CandidateConfig
    base_model_prefix = "encoder"
    main_input_name = "input_ids"

    def __init__(self, config: CandidateConfig, candidate: CandidateModel | None = None) -> None:
        super().__init__(config)
        if candidate is None:
            candidate = config.candidate_class(config.candidate_config())
        if any(True for _ in candidate.named_parameters(recurse=False)):
            raise TypeError(f"{type(candidate).__name__} holds parameters outside its submodules")
        for name, child in candidate.named_children():
            self.add_module(name, child)
        # The candidate runs the forward over these same submodules; it is not registered twice.
        object.__setattr__(self, "_candidate", candidate)
        self.post_init()

    @property
    def candidate(self) -> CandidateModel:
        """The plain candidate module whose submodules this model holds."""
        return self._candidate

    def _init_weights(self, module: nn.Module) -> None:
        pass  # the candidate initialised its own weights; a checkpoint replaces them

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        **_: Any,
    ) -> BaseModelOutput:
        """``last_hidden_state`` of shape (batch, tokens, hidden)."""
        return BaseModelOutput(last_hidden_state=self._candidate(input_ids, attention_mask, token_type_ids))


class CandidateForSequenceClassification(PreTrainedModel):
    """``AutoModelForSequenceClassification`` and the distilled student: a candidate encoder with
    BERT's task head (the first token's hidden state through the ``pooler`` dense layer and tanh,
    dropout, then the linear ``classifier``), returning ``SequenceClassifierOutput`` (with the loss
    when ``labels`` are given).

    Build one from a candidate with :meth:`from_candidate`; ``from_pretrained`` on this class loads any
    saved encoder student (the class is picked from its ``config.json``), also one saved before 0.2.

    Example:
        >>> import torch, optuna_wpca
        >>> from optuna_wpca.models import CandidateForSequenceClassification
        >>> space = optuna_wpca.WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
        >>> student = CandidateForSequenceClassification.from_candidate(space.build(space.sample(0)), 2)
        >>> type(student).__name__, student(torch.tensor([[101, 7592, 102]])).logits.shape
        ('WPCAForSequenceClassification', torch.Size([1, 2]))
    """

    config_class = CandidateConfig
    base_model_prefix = "encoder"
    main_input_name = "input_ids"
    model_class: ClassVar[type[CandidateTransformersModel]]

    def __init__(self, config: CandidateConfig, candidate: CandidateModel | None = None,
                 head_generator: torch.Generator | None = None) -> None:
        super().__init__(config)
        self.encoder = self.model_class(config, candidate)
        # transformers initialises what a checkpoint does not hold, through _init_weights
        self._head_generator = head_generator
        hidden = self.encoder.candidate.config.hidden_size
        dropout = getattr(config, "classifier_dropout", None)
        self.pooler = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(0.1 if dropout is None else dropout)
        self.classifier = nn.Linear(hidden, config.num_labels)
        self.post_init()

    @classmethod
    def from_candidate(cls, candidate: CandidateModel, num_labels: int, *, labels: Sequence[str] | None = None,
                       dropout: float = 0.1, seed: int | None = 0) -> "CandidateForSequenceClassification":
        """The student for ``candidate`` (its modules, not a copy) with a new head drawn with ``seed``
        (BERT's N(0, 0.02); ``None`` draws from torch's global generator); ``labels`` names the classes
        (``id2label`` in ``config.json``)."""
        if not candidate.classifiable:
            raise InputError(f"a sequence classifier needs an encoder; {type(candidate).__name__} is causal")
        if labels is not None and len(labels) != num_labels:
            raise InputError(f"{len(labels)} label names for {num_labels} labels")
        names = list(labels) if labels is not None else [f"LABEL_{i}" for i in range(num_labels)]
        target = transformers_classes(type(candidate))[2]
        config = target.config_class(**dataclasses.asdict(candidate.config), classifier_dropout=dropout,
                                     id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        model = target(config, candidate, head_generator=generator)
        model._head_generator = None
        return model.to(next(candidate.parameters()).device)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *model_args: Any,
                        device: Any = None, **kwargs: Any) -> "CandidateForSequenceClassification":
        """transformers' ``from_pretrained``; on this base class it loads the student class that the
        directory's ``config.json`` names, and ``device`` moves the model there."""
        path = Path(pretrained_model_name_or_path)
        if cls.config_class is CandidateConfig:
            target, _ = read_candidate_config(path)
            cls = transformers_classes(target)[2]
            if cls is None:
                raise InputError(f"{str(path)!r} holds a {target.__name__}, which has no sequence classifier")
        if (path / "head.json").is_file():
            return cls._from_layout_before_0_2(path).to(device or "cpu")
        model = super(CandidateForSequenceClassification, cls).from_pretrained(str(path), *model_args, **kwargs)
        return model.to(device) if device is not None else model

    @classmethod
    def _from_layout_before_0_2(cls, path: Path) -> "CandidateForSequenceClassification":
        """A student saved before 0.2: the encoder's directory plus ``head.json`` and ``head.safetensors``."""
        import json

        from safetensors.torch import load_file

        num_labels = json.loads((path / "head.json").read_text())["num_labels"]
        model = cls.from_candidate(CandidateModel.from_pretrained(path), num_labels)  # the file replaces the head
        state = load_file(str(path / "head.safetensors"))
        for name in ("pooler", "classifier"):  # strict per module: a head file missing a tensor is refused
            getattr(model, name).load_state_dict({k[len(name) + 1:]: v for k, v in state.items()
                                                  if k.startswith(f"{name}.")})
        return model.eval()

    @property
    def candidate(self) -> CandidateModel:
        """The plain candidate encoder (what distillation hooks and what the objective scores)."""
        return self.encoder.candidate

    @property
    def num_labels(self) -> int:
        """The number of classes (1: regression)."""
        return self.config.num_labels

    @property
    def labels(self) -> list[str]:
        """The class names, in label order."""
        return [self.config.id2label[i] for i in range(self.config.num_labels)]

    def _init_weights(self, module: nn.Module) -> None:
        if module is self.pooler or module is self.classifier:  # a new head: BERT's N(0, 0.02), zero bias
            nn.init.normal_(module.weight, std=0.02, generator=self._head_generator)
            nn.init.zeros_(module.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **_: Any,
    ) -> SequenceClassifierOutput:
        """Logits of shape (batch, num_labels); the cross-entropy (MSE for one label) with ``labels``."""
        hidden = self.encoder(input_ids, attention_mask, token_type_ids).last_hidden_state
        logits = self.classifier(self.dropout(torch.tanh(self.pooler(hidden[:, 0]))))
        loss = None
        if labels is not None:
            if self.config.num_labels == 1:
                loss = nn.functional.mse_loss(logits.squeeze(-1), labels.float())
            else:
                loss = nn.functional.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)


#: The transformers classes made for each candidate class, by its model_type.
_CLASSES: dict[str, tuple[type, type, type | None]] = {}


def transformers_classes(candidate_class: type[CandidateModel]) -> tuple[type, type, type | None]:
    """The config, ``AutoModel`` and (encoders) ``AutoModelForSequenceClassification`` classes of a
    candidate class, made once from the generic ones above and named as ``transformers_names()`` says,
    so that every candidate class, built in or a user's, is wrapped the same way."""
    made = _CLASSES.get(candidate_class.model_type)
    if made is not None and made[0].candidate_class is candidate_class:
        return made
    names = candidate_class.transformers_names()
    module = {"__module__": __name__}
    config = type(names["config"], (CandidateConfig,), {
        **module, "model_type": candidate_class.model_type, "candidate_class": candidate_class,
        "__doc__": f"transformers config of a saved {candidate_class.__name__}."})
    model = type(names["model"], (CandidateTransformersModel,), {
        **module, "config_class": config, "__doc__": f"``AutoModel`` class of a saved {candidate_class.__name__}."})
    classifier = None
    if candidate_class.classifiable:
        classifier = type(names["classifier"], (CandidateForSequenceClassification,), {
            **module, "config_class": config, "model_class": model,
            "__doc__": f"``AutoModelForSequenceClassification`` class of a {candidate_class.__name__} student."})
    _CLASSES[candidate_class.model_type] = (config, model, classifier)
    return config, model, classifier


def register_auto_classes() -> None:
    """Register every candidate class's transformers classes with the Auto classes (idempotent)."""
    for candidate_class in MODEL_TYPES.values():
        config, model, classifier = transformers_classes(candidate_class)
        AutoConfig.register(config.model_type, config, exist_ok=True)
        AutoModel.register(config, model, exist_ok=True)
        if classifier is not None:
            AutoModelForSequenceClassification.register(config, classifier, exist_ok=True)


register_auto_classes()
