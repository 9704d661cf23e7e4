"""Rank correlations of scores against a benchmark's ground truth, overall and within depth."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from scipy.stats import ConstantInputWarning, kendalltau, spearmanr

from optuna_wpca.ranking._benchmark import Benchmark

def correlations(values: list[float], truth: list[float]) -> tuple[float, float]:
    """Kendall tau and Spearman rho; NaN (no warning) where either side is constant.

    Example:
        >>> [round(x, 3) for x in correlations([1, 2, 3], [10, 30, 20])]
        [0.333, 0.5]
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantInputWarning)
        return float(kendalltau(values, truth)[0]), float(spearmanr(values, truth)[0])


def within_depth(values: list[float], truth: list[float], depths: list[int]) -> dict[str, Any]:
    """Tau and rho among architectures of one depth, per depth and averaged (weighted by count), so
    depth itself cannot carry the score. A proxy constant within a depth (depth itself) counts 0 there."""
    groups: dict[str, Any] = {}
    for d in sorted(set(depths)):
        idx = [i for i, x in enumerate(depths) if x == d]
        if len(idx) < 3:
            continue
        tau, rho = correlations([values[i] for i in idx], [truth[i] for i in idx])
        groups[str(d)] = {"n": len(idx), "kendall_tau": tau, "spearman_rho": rho}
    weight = sum(g["n"] for g in groups.values())
    mean = {key: sum(g["n"] * (0.0 if np.isnan(g[key]) else g[key]) for g in groups.values()) / weight
            for key in ("kendall_tau", "spearman_rho")} if weight else {}
    return {"depths": groups, "mean": mean}


def seed_noise(benchmark: Benchmark) -> dict[str, Any] | None:
    """How well one training seed ranks the architectures like another: Kendall tau and Spearman rho
    between the scores of two seeds, overall and within each depth. A proxy's correlation with the
    benchmark cannot be read finer than this. ``None`` when the file has no per-seed scores."""
    if not benchmark.seed_runs:
        return None
    seeds = sorted(set.intersection(*(set(r) for r in benchmark.seed_runs)), key=lambda s: (len(s), s))
    if len(seeds) < 2:
        return None
    a, b = seeds[:2]
    first = [r[a] for r in benchmark.seed_runs]
    second = [r[b] for r in benchmark.seed_runs]
    tau, rho = correlations(first, second)
    out: dict[str, Any] = {"seeds": [a, b], "n": len(first), "kendall_tau": tau, "spearman_rho": rho}
    depths = [arch.num_layers for arch in benchmark.archs]
    if len(set(depths)) > 1:
        out["within_depth"] = within_depth(first, second, depths)
    return out
