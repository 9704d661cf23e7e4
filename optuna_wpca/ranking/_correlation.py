"""Rank correlations of scores against a benchmark's ground truth, overall, within depth and within size."""

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


def within_groups(values: list[float], truth: list[float], labels: list[Any], key: str = "groups") -> dict[str, Any]:
    """Tau and rho among architectures with the same label (depth, size bucket), per label and averaged
    (weighted by count; groups under 3 architectures left out), so the label itself cannot carry the
    score. A proxy constant within a group counts 0 there.

    Example:
        >>> out = within_groups([1, 2, 3, 9, 8, 7], [1, 2, 3, 1, 2, 3], ["a", "a", "a", "b", "b", "b"])
        >>> out["mean"]["kendall_tau"]
        0.0
    """
    groups: dict[str, Any] = {}
    for label in sorted(set(labels), key=str):
        idx = [i for i, x in enumerate(labels) if x == label]
        if len(idx) < 3:
            continue
        tau, rho = correlations([values[i] for i in idx], [truth[i] for i in idx])
        groups[str(label)] = {"n": len(idx), "kendall_tau": tau, "spearman_rho": rho}
    weight = sum(g["n"] for g in groups.values())
    mean = {k: sum(g["n"] * (0.0 if np.isnan(g[k]) else g[k]) for g in groups.values()) / weight
            for k in ("kendall_tau", "spearman_rho")} if weight else {}
    return {key: groups, "mean": mean}


def within_depth(values: list[float], truth: list[float], depths: list[int]) -> dict[str, Any]:
    """:func:`within_groups` by depth (key ``"depths"``)."""
    return within_groups(values, truth, depths, key="depths")


def within_bucket(values: list[float], truth: list[float], buckets: list[Any]) -> dict[str, Any]:
    """:func:`within_groups` by size bucket (key ``"buckets"``): is the proxy more than a size count?"""
    return within_groups(values, truth, buckets, key="buckets")


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
    if benchmark.buckets and len(set(benchmark.buckets)) > 1:
        out["within_bucket"] = within_bucket(first, second, benchmark.buckets)
    return out
