"""The candidates as transformers models, so that the Auto classes load a saved candidate.

After ``import optuna_wpca``, a directory written by ``CandidateModel.save_pretrained``,
``StudentClassifier.save_pretrained`` or ``optuna-wpca export`` loads with
``AutoConfig``, ``AutoModel`` and (encoders) ``AutoModelForSequenceClassification``, and
``pipeline("text-classification", model=directory)`` runs on an exported student. The classes
here wrap the plain candidate modules (the same parameters under the same names) and return
transformers' output objects.

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
from typing import Any, ClassVar

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

from optuna_wpca.models._base import CandidateModel
from optuna_wpca.models._head import ClassificationHead, init_head_module


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

    def __init__(self, config: CandidateConfig) -> None:
        super().__init__(config)
        candidate = config.candidate_class(config.candidate_config())
        if any(True for _ in candidate.named_parameters(recurse=False)):
            raise TypeError(f"{type(candidate).__name__} holds parameters outside its submodules")
        for name, child in candidate.named_children():
            self.add_module(name, child)
        # The candidate runs the forward over these same submodules; it is not registered twice.
        object.__setattr__(self, "_candidate", candidate)
        self.post_init()

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


class CandidateForSequenceClassification(ClassificationHead, PreTrainedModel):
    """``AutoModelForSequenceClassification``: the candidate encoder with the one task head
    (:class:`~optuna_wpca.models._head.ClassificationHead`, as the distilled student has it), and
    ``SequenceClassifierOutput`` (with the loss when ``labels`` are given)."""

    config_class = CandidateConfig
    base_model_prefix = "encoder"
    main_input_name = "input_ids"
    model_class: ClassVar[type[CandidateTransformersModel]]

    def __init__(self, config: CandidateConfig) -> None:
        super().__init__(config)
        self.encoder = self.model_class(config)
        # transformers initialises what a checkpoint does not hold, through _init_weights
        self.add_head(config.candidate_config().hidden_size, config.num_labels, init=False)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if module is self.pooler or module is self.classifier:  # a new head
            init_head_module(module)

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
        logits = self.head_logits(hidden)
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
    for candidate_class in list(CandidateModel._registry.values()):
        config, model, classifier = transformers_classes(candidate_class)
        AutoConfig.register(config.model_type, config, exist_ok=True)
        AutoModel.register(config, model, exist_ok=True)
        if classifier is not None:
            AutoModelForSequenceClassification.register(config, classifier, exist_ok=True)


register_auto_classes()
