"""The paper's genetic operators (Appendix E) on parameter dicts, free of Optuna state."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from optuna.distributions import CategoricalDistribution


def uniform_crossover(
    first: Mapping[str, Any], second: Mapping[str, Any], rng: np.random.RandomState, swapping_prob: float = 0.5
) -> dict[str, Any]:
    """Each gene from ``second`` with probability ``swapping_prob``, else from ``first``."""
    return {name: second[name] if rng.rand() < swapping_prob else first[name] for name in first}


def mutate(
    params: Mapping[str, Any],
    distributions: Mapping[str, CategoricalDistribution],
    rng: np.random.RandomState,
    mutation_prob: float = 0.1,
) -> dict[str, Any]:
    """With probability ``mutation_prob`` per gene, replace it by a *different* value of that gene."""
    out = dict(params)
    for name, dist in distributions.items():
        others = [c for c in dist.choices if c != out[name]]
        if others and rng.rand() < mutation_prob:
            out[name] = others[rng.randint(len(others))]
    return out
