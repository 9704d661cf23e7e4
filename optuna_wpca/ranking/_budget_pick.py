"""The pick under a budget: what a user gets who takes an objective's best architecture that fits.

A correlation over a whole benchmark mostly rewards knowing that bigger or deeper models are better.
A user gives a parameter budget and keeps the search's best candidate, so what matters is how well
the objective orders the architectures that fit. For budgets at fixed percentiles of the
benchmark's parameter count, :func:`budget_pick` takes the objective's best feasible architecture
and reads its trained score as a percentile among the feasible ones (1.0: the best that fits, 0.0:
the worst), its regret in the benchmark's own unit, and the best of the objective's top ``k``
(what training the ``k`` best would reach with a perfect trainer). Ties in the objective are
averaged over, never broken by file order. :func:`bootstrap_picks` resamples architectures to put
an interval on each objective's mean pick and on its difference to a baseline's.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from optuna_wpca._errors import InputError

#: Budgets at these percentiles of the benchmark's own parameter count.
DEFAULT_PERCENTILES: tuple[int, ...] = (20, 30, 40, 50, 60, 70, 80, 90)
#: How many of the objective's best are counted in "best of top k".
DEFAULT_TOP = 5


def _oriented(values: Sequence[float], maximize: bool) -> np.ndarray:
    """Objective values with higher preferred; NaN (a failed score) ranks below everything."""
    v = np.asarray(values, dtype=float)
    v = v if maximize else -v
    return np.where(np.isnan(v), -np.inf, v)


def _percentiles_of(goodness: np.ndarray) -> np.ndarray:
    """Each entry's percentile among ``goodness`` (midrank for ties): 1.0 best, 0.0 worst."""
    n = len(goodness)
    if n == 1:
        return np.ones(1)
    order = np.argsort(goodness, kind="stable")
    ranks = np.empty(n)
    sorted_g = goodness[order]
    i = 0
    while i < n:  # average ranks over runs of equal scores
        j = i
        while j + 1 < n and sorted_g[j + 1] == sorted_g[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0
        i = j + 1
    return ranks / (n - 1)


def _expected_best_of_top(objective: np.ndarray, pct: np.ndarray, k: int) -> float:
    """The expected best percentile among the objective's ``k`` best, ties at the cut drawn at random."""
    if k >= len(objective):
        return float(pct.max())
    threshold = np.sort(objective)[::-1][k - 1]
    certain = pct[objective > threshold]
    tied = np.sort(pct[objective == threshold])
    need = k - len(certain)
    floor = float(certain.max()) if len(certain) else -math.inf
    m = len(tied)
    total = math.comb(m, need)
    expected = 0.0
    for j in range(need, m + 1):  # the tied draw's best is its j-th smallest with probability C(j-1, need-1) / C(m, need)
        expected += math.comb(j - 1, need - 1) / total * max(floor, float(tied[j - 1]))
    return expected


def _pick_percentile(objective: np.ndarray, goodness: np.ndarray) -> float:
    """The percentile of the objective's best, averaged over ties (the fast path for bootstraps)."""
    n = len(goodness)
    if n == 1:
        return 1.0
    picks = goodness[objective == objective.max()]
    below = (goodness[None, :] < picks[:, None]).sum(axis=1)
    equal = (goodness[None, :] == picks[:, None]).sum(axis=1)
    return float(np.mean((below + 0.5 * (equal - 1)) / (n - 1)))


def budgets_at(params: Sequence[float], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> list[float]:
    """Parameter budgets at ``percentiles`` of ``params`` (linear interpolation, numpy's default).

    Example:
        >>> budgets_at([1, 2, 3, 4, 5], [50])
        [3.0]
    """
    return [float(b) for b in np.percentile(np.asarray(params, dtype=float), list(percentiles))]


def budget_pick(
    values: Sequence[float],
    truth: Sequence[float],
    params: Sequence[float],
    *,
    maximize: bool = True,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    top: int = DEFAULT_TOP,
) -> dict[str, Any]:
    """The objective's pick under each budget, read against the truth.

    Args:
        values: The objective's value per architecture.
        truth: The trained score per architecture, oriented so that higher is better (a
            perplexity negated); regrets are differences of it, so they are in its unit.
        params: The parameter count per architecture under the benchmark's convention.
        maximize: Whether the objective prefers higher values.
        percentiles: Budgets at these percentiles of ``params``; an architecture fits when its
            count is at most the budget.
        top: ``k`` of "best of the top k".

    Returns:
        ``{"budgets": [{"percentile", "max_params", "feasible", "pick", "regret", "best_of_top"}],
        "mean", "worst", "mean_regret", "worst_regret", "mean_best_of_top", "top"}``.

    Example:
        >>> out = budget_pick([3, 2, 1, 0], [0.0, 1.0, 2.0, 3.0], [40, 30, 20, 10], percentiles=[100])
        >>> out["mean"], out["budgets"][0]["regret"]
        (0.0, 3.0)
    """
    if top < 1:
        raise InputError(f"top must be >= 1, got {top}")
    objective = _oriented(values, maximize)
    goodness = np.asarray(truth, dtype=float)
    counts = np.asarray(params, dtype=float)
    if not (len(objective) == len(goodness) == len(counts)):
        raise InputError("values, truth and params must have one entry per architecture")
    rows = []
    for q, budget in zip(percentiles, budgets_at(counts, percentiles)):
        fits = counts <= budget
        obj, good = objective[fits], goodness[fits]
        pct = _percentiles_of(good)
        picked = obj == obj.max()
        rows.append({
            "percentile": float(q),
            "max_params": budget,
            "feasible": int(fits.sum()),
            "pick": float(pct[picked].mean()),
            "regret": float((good.max() - good[picked]).mean()),
            "best_of_top": _expected_best_of_top(obj, pct, top),
        })
    picks = [r["pick"] for r in rows]
    regrets = [r["regret"] for r in rows]
    return {
        "budgets": rows,
        "mean": float(np.mean(picks)),
        "worst": float(np.min(picks)),
        "mean_regret": float(np.mean(regrets)),
        "worst_regret": float(np.max(regrets)),
        "mean_best_of_top": float(np.mean([r["best_of_top"] for r in rows])),
        "top": top,
    }


def budget_pick_within(
    values: Sequence[float],
    truth: Sequence[float],
    params: Sequence[float],
    groups: Sequence[Any],
    *,
    maximize: bool = True,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    top: int = DEFAULT_TOP,
    min_size: int = 10,
) -> dict[str, Any]:
    """:func:`budget_pick` within each group (depth), budgets at the group's own percentiles, and
    the mean and worst weighted by group size; groups under ``min_size`` architectures left out."""
    out: dict[str, Any] = {}
    for label in sorted(set(groups), key=str):
        idx = [i for i, g in enumerate(groups) if g == label]
        if len(idx) < min_size:
            continue
        pick = budget_pick([values[i] for i in idx], [truth[i] for i in idx], [params[i] for i in idx],
                           maximize=maximize, percentiles=percentiles, top=top)
        out[str(label)] = {"n": len(idx), **{k: pick[k] for k in ("mean", "worst", "mean_regret",
                                                                 "mean_best_of_top")}}
    weight = sum(g["n"] for g in out.values())
    mean = {k: sum(g["n"] * g[k] for g in out.values()) / weight
            for k in ("mean", "mean_regret", "mean_best_of_top")} if weight else {}
    if weight:
        mean["worst"] = min(g["worst"] for g in out.values())
    return {"groups": out, "mean": mean}


def _mean_pick(objective: np.ndarray, goodness: np.ndarray, counts: np.ndarray,
               percentiles: Sequence[float]) -> float:
    picks = []
    for budget in np.percentile(counts, list(percentiles)):
        fits = counts <= budget
        picks.append(_pick_percentile(objective[fits], goodness[fits]))
    return float(np.mean(picks))


def bootstrap_picks(
    objectives: Mapping[str, tuple[Sequence[float], bool]],
    truth: Sequence[float],
    params: Sequence[float],
    *,
    baseline: str | None = "params",
    resamples: int = 1000,
    seed: int = 0,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    level: float = 0.95,
) -> dict[str, dict[str, Any]]:
    """Intervals on each objective's mean pick, and on its difference to ``baseline``'s, from
    ``resamples`` resamplings of the architectures with replacement (budgets recomputed on each,
    every objective on the same resample, so differences are paired).

    Args:
        objectives: ``{name: (values, maximize)}``.
        truth: Trained scores, higher is better.
        params: Parameter counts (the budgets' convention).
        baseline: The objective the differences are taken to (``None``: none).
        resamples: Number of bootstrap resamples.
        seed: Seed of the resampling.
        percentiles: Budget percentiles, as in :func:`budget_pick`.
        level: Coverage of the percentile intervals.

    Returns:
        ``{name: {"mean_interval": [lo, hi], "difference": d, "difference_interval": [lo, hi]}}``
        (the difference keys only when ``baseline`` is among ``objectives``).
    """
    if resamples < 1:
        raise InputError(f"resamples must be >= 1, got {resamples}")
    goodness = np.asarray(truth, dtype=float)
    counts = np.asarray(params, dtype=float)
    oriented = {name: _oriented(v, maximize) for name, (v, maximize) in objectives.items()}
    rng = np.random.default_rng(seed)
    n = len(goodness)
    draws = {name: np.empty(resamples) for name in oriented}
    for b in range(resamples):
        idx = rng.integers(0, n, n)
        for name, obj in oriented.items():
            draws[name][b] = _mean_pick(obj[idx], goodness[idx], counts[idx], percentiles)
    tail = 100 * (1 - level) / 2
    out: dict[str, dict[str, Any]] = {}
    for name, d in draws.items():
        out[name] = {"mean_interval": [float(x) for x in np.percentile(d, [tail, 100 - tail])],
                     "resamples": resamples, "seed": seed}
        if baseline in draws:
            diff = d - draws[baseline]
            point = (_mean_pick(oriented[name], goodness, counts, percentiles)
                     - _mean_pick(oriented[baseline], goodness, counts, percentiles))
            out[name]["baseline"] = baseline
            out[name]["difference"] = point
            out[name]["difference_interval"] = [float(x) for x in np.percentile(diff, [tail, 100 - tail])]
    return out
