"""Which trials of a study count: feasibility under the budget, and the best trials to train."""

from __future__ import annotations

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from optuna_wpca._errors import InputError


def is_feasible(trial: FrozenTrial) -> bool:
    """Whether every Optuna constraint of ``trial`` is satisfied (no constraints: True)."""
    return all(c <= 0 for c in trial.constraints.values())


def top_trials(study: optuna.Study, k: int) -> list[FrozenTrial]:
    """The ``k`` best completed, feasible trials of a single-objective study, one per architecture.

    Example:
        >>> import optuna
        >>> grid = optuna.samplers.GridSampler({"x": [1, 2, 3]})
        >>> study = optuna.create_study(direction="maximize", sampler=grid)
        >>> study.optimize(lambda t: t.suggest_categorical("x", [1, 2, 3]), n_trials=3)
        >>> [t.value for t in top_trials(study, 2)]
        [3.0, 2.0]
    """
    if len(study.directions) != 1:
        raise InputError("top_trials needs a single-objective study; pick trials from study.best_trials instead")
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if is_feasible(t)]
    done.sort(key=lambda t: t.value, reverse=study.direction == StudyDirection.MAXIMIZE)
    seen, out = set(), []
    for t in done:  # the same architecture scored twice is trained once
        key = tuple(sorted(t.params.items()))
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out[:k]
