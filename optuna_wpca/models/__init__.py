"""Candidate encoders: plain PyTorch modules with transformers-style save/load."""

from optuna_wpca.models._base import COUNT_CONVENTIONS, MODEL_TYPES, CandidateModel, LayeredConfig, NoNorm
from optuna_wpca.models._decoder_model import DecoderConfig, DecoderLayerConfig, DecoderModel
from optuna_wpca.models._flexibert_model import FlexiBERTConfig, FlexiBERTLayerConfig, FlexiBERTModel
from optuna_wpca.models._wpca_model import WPCAConfig, WPCALayerConfig, WPCAModel
from optuna_wpca.models._auto import register_when_transformers_loads

register_when_transformers_loads()


def __getattr__(name: str) -> object:
    # The transformers classes import transformers' modelling code: looked up when first used.
    if name == "CandidateForSequenceClassification":
        from optuna_wpca.models._transformers import CandidateForSequenceClassification

        return CandidateForSequenceClassification
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "COUNT_CONVENTIONS",
    "CandidateForSequenceClassification",
    "CandidateModel",
    "DecoderConfig",
    "DecoderLayerConfig",
    "DecoderModel",
    "FlexiBERTConfig",
    "FlexiBERTLayerConfig",
    "FlexiBERTModel",
    "LayeredConfig",
    "MODEL_TYPES",
    "NoNorm",
    "WPCAConfig",
    "WPCALayerConfig",
    "WPCAModel",
]
