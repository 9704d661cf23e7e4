"""The parent pool of a multi-objective search: NSGA-II's elite (Deb et al. 2002).

Fronts of mutual non-domination are taken best first; the front that does not fit whole is cut by
crowding distance, so the pool spreads along the Pareto front instead of bunching on one end.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial


def _as_minimised(trials: Sequence[FrozenTrial], directions: Sequence[StudyDirection]) -> np.ndarray:
    signs = np.array([1.0 if d == StudyDirection.MINIMIZE else -1.0 for d in directions])
    return np.array([t.values for t in trials], dtype=float) * signs


def non_dominated_fronts(points: np.ndarray) -> list[list[int]]:
    """Row indices of ``points`` (to be minimised) grouped into fronts, the non-dominated first.

    Example:
        >>> non_dominated_fronts(np.array([[1.0, 2.0], [2.0, 1.0], [2.0, 2.0], [3.0, 3.0]]))
        [[0, 1], [2], [3]]
    """
    n = len(points)
    dominated_by = np.zeros(n, dtype=int)  # how many points dominate each point
    dominates: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        le = np.all(points[i] <= points, axis=1)
        lt = np.any(points[i] < points, axis=1)
        for j in np.flatnonzero(le & lt):
            dominates[i].append(int(j))
            dominated_by[j] += 1
    fronts, current = [], [i for i in range(n) if dominated_by[i] == 0]
    while current:
        fronts.append(current)
        following = []
        for i in current:
            for j in dominates[i]:
                dominated_by[j] -= 1
                if dominated_by[j] == 0:
                    following.append(j)
        current = sorted(following)
    return fronts


def crowding_distances(points: np.ndarray) -> np.ndarray:
    """Per point, the sum over objectives of the gap between its two neighbours, scaled by the
    objective's range; the ends of each objective get infinity. An objective on which every point
    ties adds nothing."""
    n, m = points.shape
    out = np.zeros(n)
    for k in range(m):
        order = np.argsort(points[:, k], kind="stable")
        values = points[order, k]
        span = values[-1] - values[0]
        if span == 0 or not np.isfinite(span):
            continue
        out[order[0]] = out[order[-1]] = np.inf
        out[order[1:-1]] += (values[2:] - values[:-2]) / span
    return out


def elite_population(trials: Sequence[FrozenTrial], directions: Sequence[StudyDirection],
                     size: int) -> list[FrozenTrial]:
    """The ``size`` best of ``trials`` (completed, one value per direction) by NSGA-II's rule."""
    if not trials:
        return []
    points = _as_minimised(trials, directions)
    chosen: list[int] = []
    for front in non_dominated_fronts(points):
        if len(chosen) + len(front) <= size:
            chosen.extend(front)
            if len(chosen) == size:
                break
            continue
        distance = crowding_distances(points[front])
        ranked = [front[i] for i in np.argsort(-distance, kind="stable")]
        chosen.extend(ranked[: size - len(chosen)])
        break
    return [trials[i] for i in chosen]
