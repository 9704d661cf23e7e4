"""Search spaces: architectures as per-layer Optuna distributions."""

from optuna_wpca.spaces._base import Architecture, SearchSpace, load_space, space_from_dict
from optuna_wpca.spaces._decoder import DecoderSpace
from optuna_wpca.spaces._elm import ELMSpace
from optuna_wpca.spaces._flexibert import FlexiBERTSpace
from optuna_wpca.spaces._wpca import WPCASpace

__all__ = ["Architecture", "DecoderSpace", "ELMSpace", "FlexiBERTSpace", "SearchSpace", "WPCASpace", "load_space", "space_from_dict"]
