"""Genetic operators on parameter dicts, free of Optuna state: the paper's (Appendix E) and ordinal steps.

The paper's mutation replaces a gene by a uniformly drawn other value. For a gene with many ordered
values (a decoder's FFN width has 1,537) that restarts the gene instead of stepping near a good value.
:func:`mutate_ordinal` moves a numeric gene by a few positions of its sorted values, with steps that
shrink as the search goes on; genes without an order (block types) mutate as in the paper.
"""

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


#: Operator sets of :class:`~optuna_wpca.WPCASampler`: ``"paper"`` (uniform mutation, Appendix E) and
#: ``"ordinal"`` (numeric genes stepped along their sorted values).
OPERATORS = ("paper", "ordinal")


def is_ordinal(choices: tuple[Any, ...]) -> bool:
    """Whether a gene's values are numbers (then they have an order to step along)."""
    return len(choices) > 2 and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices)


def step_size(n_values: int, progress: float) -> float:
    """The spread of an ordinal step, in positions: a fifth of the values at the start, shrinking
    linearly to one position as ``progress`` (generation / generations) reaches 1."""
    progress = min(max(progress, 0.0), 1.0)
    return max(1.0, (n_values - 1) * 0.2 * (1.0 - progress))


def mutate_ordinal(
    params: Mapping[str, Any],
    distributions: Mapping[str, CategoricalDistribution],
    rng: np.random.RandomState,
    mutation_prob: float = 0.1,
    progress: float = 0.0,
) -> dict[str, Any]:
    """With probability ``mutation_prob`` per gene: a numeric gene moves by 1 + |N(0, s)| positions
    (rounded down; either way, reflected at the ends) of its sorted values, ``s`` from
    :func:`step_size`; another gene is replaced by a different value, as in :func:`mutate`.

    Example:
        >>> from optuna.distributions import CategoricalDistribution
        >>> d = {"w": CategoricalDistribution(tuple(range(100)))}
        >>> rng = np.random.RandomState(0)
        >>> steps = [abs(mutate_ordinal({"w": 50}, d, rng, 1.0, progress=1.0)["w"] - 50) for _ in range(200)]
        >>> min(steps), max(steps) <= 4
        (1, True)
    """
    out = dict(params)
    for name, dist in distributions.items():
        if rng.rand() >= mutation_prob or len(dist.choices) < 2:
            continue
        if not is_ordinal(dist.choices):
            others = [c for c in dist.choices if c != out[name]]
            out[name] = others[rng.randint(len(others))]
            continue
        ordered = sorted(dist.choices)
        here = ordered.index(out[name])
        step = 1 + int(abs(rng.normal(0.0, step_size(len(ordered), progress))))
        there = here + (step if rng.rand() < 0.5 else -step)
        last = len(ordered) - 1
        while there < 0 or there > last:  # reflect at the ends
            there = -there if there < 0 else 2 * last - there
        out[name] = ordered[there if there != here else (here + 1 if here < last else here - 1)]
    return out
