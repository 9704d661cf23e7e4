"""optuna-wpca: training-free search for compact language models, as an Optuna plugin.

Example:
    >>> import optuna_wpca
    >>> space = optuna_wpca.WPCASpace.tiny()
    >>> model = space.build(space.sample(0), seed=0)
    >>> batch = optuna_wpca.text_batch(batch_size=8, seq_len=32)
    >>> result = optuna_wpca.compute_proxy("wpca", model, batch)
    >>> len(result.parts["pca_dims"])
    6
"""

from optuna_wpca._batched import BatchedWrites
from optuna_wpca._errors import InputError
from optuna_wpca._objective import ZeroCostObjective
from optuna_wpca.ranking import Benchmark, load_benchmark, rank_proxies
from optuna_wpca._storage import open_storage
from optuna_wpca._budget import Budget
from optuna_wpca._presets import PRESETS, preset
from optuna_wpca._record import SearchRecord, read_search, record_search
from optuna_wpca._selection import is_feasible, top_trials
from optuna_wpca._text import MinibatchSpec, TextBatch, bundled_text_path, load_tokenizer, text_batch
from optuna_wpca.models import (
    CandidateModel,
    FlexiBERTConfig,
    FlexiBERTModel,
    WPCAConfig,
    WPCAModel,
)
from optuna_wpca.proxies import (
    DEFAULT_ETA,
    DEFAULT_OBJECTIVES,
    ProxyResult,
    ReferenceSample,
    compute_proxy,
    default_objective,
    dim_from_spectrum,
    get_proxy,
    layer_pca_dims,
    layer_spectra,
    list_proxies,
    pca_dim,
    register_combination,
    register_proxy,
)
from optuna_wpca.sampler import WPCASampler
from optuna_wpca.distill import Supernet, SupernetResult, train_supernet
from optuna_wpca.spaces import (
    Architecture,
    DecoderSpace,
    ELMSpace,
    FlexiBERTSpace,
    SearchSpace,
    WPCASpace,
    load_space,
    space_from_dict,
)

__version__ = "0.3.0.dev0"

__all__ = [
    "InputError",
    "DEFAULT_ETA",
    "DEFAULT_OBJECTIVES",
    "default_objective",
    "PRESETS",
    "Architecture",
    "BatchedWrites",
    "Benchmark",
    "Budget",
    "CandidateModel",
    "DecoderSpace",
    "ELMSpace",
    "FlexiBERTConfig",
    "FlexiBERTModel",
    "FlexiBERTSpace",
    "MinibatchSpec",
    "ProxyResult",
    "ReferenceSample",
    "SearchRecord",
    "SearchSpace",
    "Supernet",
    "SupernetResult",
    "TextBatch",
    "WPCAConfig",
    "WPCAModel",
    "WPCASampler",
    "WPCASpace",
    "ZeroCostObjective",
    "bundled_text_path",
    "compute_proxy",
    "dim_from_spectrum",
    "get_proxy",
    "is_feasible",
    "layer_pca_dims",
    "layer_spectra",
    "list_proxies",
    "load_benchmark",
    "load_space",
    "load_tokenizer",
    "open_storage",
    "pca_dim",
    "preset",
    "rank_proxies",
    "read_search",
    "record_search",
    "register_combination",
    "register_proxy",
    "space_from_dict",
    "text_batch",
    "top_trials",
    "train_supernet",
]


def __getattr__(name: str):
    if name == "DEFAULT_OBJECTIVE":  # the single default of 0.2, with the proxies package's warning
        from optuna_wpca import proxies

        return proxies._default_of_0_2(stacklevel=2)  # the warning names the user's line, not this one
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
