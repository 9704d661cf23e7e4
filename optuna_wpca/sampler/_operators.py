"""Genetic operators on parameter dicts, free of Optuna state: the paper's (Appendix E), ordinal steps
and a move to the budget's boundary.

The paper's mutation replaces a gene by a uniformly drawn other value. For a gene with many ordered
values (a decoder's FFN width has 1,537) that restarts the gene instead of stepping near a good value.
:func:`mutate_ordinal` moves an ordered gene by a few positions of its values, with steps that
shrink as the search goes on; genes without an order (block types) mutate as in the paper.
:func:`fill_budget` raises one ordered gene as far as the budget allows: the objectives that reward
capacity (W-PCA multiplies by the parameter count) have their best candidates on that boundary, and
a child of two boundary parents rarely lands on it.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
from optuna.distributions import BaseDistribution

from optuna_wpca.spaces._genes import is_ordered, values_of


def uniform_crossover(
    first: Mapping[str, Any], second: Mapping[str, Any], rng: np.random.RandomState, swapping_prob: float = 0.5
) -> dict[str, Any]:
    """Each gene from ``second`` with probability ``swapping_prob``, else from ``first``."""
    return {name: second[name] if rng.rand() < swapping_prob else first[name] for name in first}


def mutate(
    params: Mapping[str, Any],
    distributions: Mapping[str, BaseDistribution],
    rng: np.random.RandomState,
    mutation_prob: float = 0.1,
) -> dict[str, Any]:
    """With probability ``mutation_prob`` per gene, replace it by a *different* value of that gene."""
    out = dict(params)
    for name, dist in distributions.items():
        values = values_of(dist)
        if len(values) > 1 and rng.rand() < mutation_prob:  # the paper's draws, in the same order as 0.2's
            out[name] = _other_value(values, out[name], rng)
    return out


def _other_value(values: Any, here: Any, rng: np.random.RandomState) -> Any:
    """A uniformly drawn value of ``values`` other than ``here`` (``here`` itself when there is none);
    an integer range is not listed."""
    n = len(values)
    if n < 2:
        return here
    if here not in values:
        return values[rng.randint(n)]
    i = rng.randint(n - 1)
    j = values.index(here)
    return values[i + 1 if i >= j else i]


#: The fewest values an ordered gene needs to be stepped rather than redrawn: a gene of a few values
#: (W-PCA-Small's FFN multiple, 1-6) is searched better by the paper's redraw, which reaches every value
#: in one move (measured: ``benchmarks/anytime.py``, docs/benchmarks.md).
MIN_STEPPED_VALUES = 10

#: Operator sets of :class:`~optuna_wpca.WPCASampler`: ``"paper"`` (uniform mutation, Appendix E),
#: ``"ordinal"`` (ordered genes stepped along their values) and ``"boundary"`` (ordinal steps, and half
#: the children of a single-objective search under a parameter budget moved to its boundary). On a space
#: without a gene of :data:`MIN_STEPPED_VALUES` values (W-PCA's), both are the paper's, draw for draw.
OPERATORS = ("paper", "ordinal", "boundary")
#: What a sampler given no operators uses for a new study on a space with fine genes (decoders, FlexiBERT):
#: chosen by the rule committed before the 16 x 128 anytime curves (docs/benchmarks.md). A space without
#: them (W-PCA's, the paper presets) gets ``"paper"``, the same search draw for draw, recorded by its name;
#: a resumed study keeps the operators it recorded.
DEFAULT_OPERATORS = "boundary"


def step_size(n_values: int, progress: float) -> float:
    """The spread of an ordinal step, in positions: a fifth of the values at the start, shrinking
    linearly to one position as ``progress`` (generation / generations) reaches 1."""
    progress = min(max(progress, 0.0), 1.0)
    return max(1.0, (n_values - 1) * 0.2 * (1.0 - progress))


def mutate_ordinal(
    params: Mapping[str, Any],
    distributions: Mapping[str, BaseDistribution],
    rng: np.random.RandomState,
    mutation_prob: float = 0.1,
    progress: float = 0.0,
) -> dict[str, Any]:
    """With probability ``mutation_prob`` per gene: an ordered gene of at least :data:`MIN_STEPPED_VALUES`
    values moves by 1 + |N(0, s)| positions (rounded down; either way, reflected at the ends) of its
    sorted values, ``s`` from :func:`step_size`; another gene is replaced by a different value, as in
    :func:`mutate`.

    Example:
        >>> from optuna.distributions import IntDistribution
        >>> d = {"w": IntDistribution(0, 99)}
        >>> rng = np.random.RandomState(0)
        >>> steps = [abs(mutate_ordinal({"w": 50}, d, rng, 1.0, progress=1.0)["w"] - 50) for _ in range(200)]
        >>> min(steps), max(steps) <= 4
        (1, True)
    """
    out = dict(params)
    for name, dist in distributions.items():
        values = values_of(dist)
        if rng.rand() >= mutation_prob or len(values) < 2:
            continue
        if not is_fine(dist):
            out[name] = _other_value(values, out[name], rng)
            continue
        ordered = values if isinstance(values, range) else sorted(values)
        here = ordered.index(out[name])
        step = 1 + int(abs(rng.normal(0.0, step_size(len(ordered), progress))))
        there = here + (step if rng.rand() < 0.5 else -step)
        last = len(ordered) - 1
        while there < 0 or there > last:  # reflect at the ends
            there = -there if there < 0 else 2 * last - there
        out[name] = ordered[there if there != here else (here + 1 if here < last else here - 1)]
    return out


def is_fine(dist: BaseDistribution) -> bool:
    """Whether a gene is ordered with at least :data:`MIN_STEPPED_VALUES` values: one that ordinal steps
    move and :func:`fill_budget` raises (a step of a coarse gene, such as W-PCA-Small's FFN multiple
    1-6, moves a candidate by a tenth of its budget: raising it would crowd the population onto a few
    candidates, measured to stall the search)."""
    return is_ordered(dist) and len(values_of(dist)) >= MIN_STEPPED_VALUES


def has_fine_genes(distributions: Mapping[str, BaseDistribution]) -> bool:
    """Whether any gene is fine (:func:`is_fine`): where the ordinal and boundary operators differ from the paper's."""
    return any(is_fine(d) for d in distributions.values())


def fill_budget(
    params: Mapping[str, Any],
    distributions: Mapping[str, BaseDistribution],
    fits: Callable[[dict[str, Any]], bool],
    size: Callable[[dict[str, Any]], float],
    rng: np.random.RandomState,
) -> dict[str, Any]:
    """``params`` with its fine genes (:func:`is_fine`), taken in random order, each raised to its largest
    value that still ``fits``, so the candidate ends as close under the budget as one gene's step allows.

    A gene whose next value does not make the candidate any larger (a layer beyond its depth) is left
    alone. ``params`` must fit; a candidate that cannot grow comes back unchanged.

    Example:
        >>> from optuna.distributions import IntDistribution
        >>> d = {"a": IntDistribution(1, 100), "b": IntDistribution(1, 100)}
        >>> total = lambda p: p["a"] + 2 * p["b"]
        >>> out = fill_budget({"a": 10, "b": 10}, d, lambda p: total(p) <= 150, total, np.random.RandomState(0))
        >>> total(out) in (149, 150)
        True
    """
    out = dict(params)
    for name in rng.permutation(sorted(distributions)):
        dist = distributions[name]
        if not is_fine(dist):
            continue
        values = values_of(dist)
        ordered = values if isinstance(values, range) else sorted(values)
        here = ordered.index(out[name])
        if here == len(ordered) - 1:
            continue
        before = size(out)
        if size({**out, name: ordered[here + 1]}) <= before:
            continue  # an inactive gene: moving it changes nothing
        low, high = here, len(ordered) - 1  # the largest position that fits, by bisection
        while low < high:
            mid = (low + high + 1) // 2
            if fits({**out, name: ordered[mid]}):
                low = mid
            else:
                high = mid - 1
        out[name] = ordered[low]
    return out
