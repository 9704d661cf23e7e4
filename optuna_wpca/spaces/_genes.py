"""A gene's Optuna distribution: integers where its values are an evenly stepped range, else categories.

An FFN width of 512-2048 is one ``IntDistribution(512, 2048)``: Optuna's samplers (TPE, CMA-ES, GP)
then see that 1,000 lies between 900 and 1,100, and a study stores two bounds per trial instead of
1,537 choices. Genes without such an order (block types; head counts 2/4/8) stay categorical.

Before 0.3 every gene was categorical; ``integer_genes=False`` on a space keeps that encoding, so a
study searched then resumes with the genes its trials hold (see ``_record._check_space``).

Example:
    >>> gene((512, 513, 514))
    IntDistribution(high=514, log=False, low=512, step=1)
    >>> gene((2, 4, 8))
    CategoricalDistribution(choices=(2, 4, 8))
    >>> list(values_of(gene(range(128, 513, 128))))
    [128, 256, 384, 512]
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def stepped_range(values: Sequence[Any]) -> tuple[int, int, int] | None:
    """``(low, high, step)`` when ``values`` are at least three increasing ints in equal steps, else ``None``."""
    values = tuple(values)
    if len(values) < 3 or not all(_is_int(v) for v in values):
        return None
    step = int(values[1]) - int(values[0])
    if step <= 0 or any(int(b) - int(a) != step for a, b in zip(values, values[1:])):
        return None
    return int(values[0]), int(values[-1]), step


def gene(values: Sequence[Any], integer: bool = True) -> BaseDistribution:
    """The distribution of a gene taking ``values``: an ``IntDistribution`` for an evenly stepped integer
    range when ``integer``, else a ``CategoricalDistribution``."""
    bounds = stepped_range(values) if integer else None
    if bounds is None:
        return CategoricalDistribution(tuple(values))
    low, high, step = bounds
    return IntDistribution(low, high, step=step)


def values_of(dist: BaseDistribution) -> Sequence[Any]:
    """Every value ``dist`` can take, in order (a ``range`` for an integer gene: nothing is listed)."""
    if isinstance(dist, IntDistribution) and not dist.log:
        return range(dist.low, dist.high + 1, dist.step)
    if isinstance(dist, CategoricalDistribution):
        return dist.choices
    raise TypeError(f"a gene is an IntDistribution or a CategoricalDistribution, got {type(dist).__name__}")


def holds(dist: BaseDistribution, value: Any) -> bool:
    """Whether ``value`` is one of ``dist``'s values."""
    if isinstance(dist, IntDistribution):
        return _is_int(value) and value in values_of(dist)
    return value in values_of(dist)


def is_ordered(dist: BaseDistribution) -> bool:
    """Whether a gene's values have an order to step along: an integer gene, or categories that are
    more than two numbers (a space written with categorical widths)."""
    if isinstance(dist, IntDistribution):
        return True
    choices = values_of(dist)
    return len(choices) > 2 and all(isinstance(c, (int, float, np.integer, np.floating))
                                    and not isinstance(c, bool) for c in choices)


def suggest(trial: Any, name: str, dist: BaseDistribution) -> Any:
    """Ask ``trial`` for gene ``name`` with the suggest call of its kind."""
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, step=dist.step)
    return trial.suggest_categorical(name, dist.choices)


def describe(dist: BaseDistribution) -> str:
    """A gene's values in a few words (for an error line): ``512..2048`` or ``[2, 4, 8]``."""
    if isinstance(dist, IntDistribution):
        return f"{dist.low}..{dist.high}" + (f" in steps of {dist.step}" if dist.step != 1 else "")
    return str(list(values_of(dist)))
