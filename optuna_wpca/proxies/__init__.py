"""Zero-cost proxies behind one registry."""

from optuna_wpca.proxies import (  # noqa: F401  (each module registers its proxies)
    _baselines, _counts, _hardware, _hidden_covariance, _latency_model, _pca, _supernet,
)
from optuna_wpca.proxies._latency_model import LatencyModel, calibrate_latency_model, operation_counts
from optuna_wpca.proxies._combined import (
    DEFAULT_OBJECTIVES,
    DEFAULT_REFERENCE_SIZE,
    ReferenceSample,
    combine,
    default_objective,
    draw_reference,
    parse_combination,
)
from optuna_wpca.proxies._pca import (
    DEFAULT_ETA,
    check_proxy_options,
    dim_from_spectrum,
    layer_pca_dims,
    layer_spectra,
    pca_dim,
)
from optuna_wpca.proxies._registry import (
    PROXIES,
    ProxyResult,
    ProxySpec,
    compute_proxy,
    get_proxy,
    list_base_proxies,
    list_proxies,
    missing_options,
    register_combination,
    register_proxy,
    unregister_proxy,
)
from optuna_wpca.proxies._shared_pass import compute_parts

__all__ = [
    "DEFAULT_ETA",
    "DEFAULT_OBJECTIVES",
    "DEFAULT_REFERENCE_SIZE",
    "default_objective",
    "LatencyModel",
    "ReferenceSample",
    "combine",
    "draw_reference",
    "list_base_proxies",
    "parse_combination",
    "register_combination",
    "ProxyResult",
    "ProxySpec",
    "calibrate_latency_model",
    "check_proxy_options",
    "compute_parts",
    "compute_proxy",
    "dim_from_spectrum",
    "get_proxy",
    "layer_pca_dims",
    "layer_spectra",
    "list_proxies",
    "missing_options",
    "operation_counts",
    "pca_dim",
    "register_proxy",
    "unregister_proxy",
    "PROXIES",
]


def _default_of_0_2(stacklevel: int) -> str:
    """0.2's single default, with a warning pointing ``stacklevel`` frames above the caller."""
    import warnings

    warnings.warn("DEFAULT_OBJECTIVE is the default of 0.2 ('vpca_params_saliency'); the search's default now "
                  "depends on the space's family: default_objective(space) / DEFAULT_OBJECTIVES",
                  FutureWarning, stacklevel=stacklevel + 1)
    return "vpca_params_saliency"


def __getattr__(name: str):
    if name == "DEFAULT_OBJECTIVE":  # the single default of 0.2
        return _default_of_0_2(stacklevel=2)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
