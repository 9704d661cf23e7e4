"""Candidate encoders: plain PyTorch modules with transformers-style save/load."""

from optuna_wpca.models._base import COUNT_CONVENTIONS, CandidateModel, NoNorm
from optuna_wpca.models._decoder_model import DecoderConfig, DecoderLayerConfig, DecoderModel
from optuna_wpca.models._flexibert_model import FlexiBERTConfig, FlexiBERTLayerConfig, FlexiBERTModel
from optuna_wpca.models._wpca_model import WPCAConfig, WPCALayerConfig, WPCAModel
from optuna_wpca.models._auto import register_when_transformers_loads

register_when_transformers_loads()

__all__ = [
    "COUNT_CONVENTIONS",
    "CandidateModel",
    "DecoderConfig",
    "DecoderLayerConfig",
    "DecoderModel",
    "FlexiBERTConfig",
    "FlexiBERTLayerConfig",
    "FlexiBERTModel",
    "NoNorm",
    "WPCAConfig",
    "WPCALayerConfig",
    "WPCAModel",
]
