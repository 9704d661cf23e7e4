"""A long search run in segments across sessions: one study in a committed journal, resumed in place."""

from __future__ import annotations

import time
from typing import Any, Callable

import optuna
import torch
from optuna.trial import TrialState


def open_storage(path_or_url: str):
    """A journal file for a path, Optuna's RDB storage for a URL."""
    if "://" in path_or_url:
        return path_or_url
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path_or_url))


def run_segment(study: optuna.Study, objective: Callable, target: int, stop_after: float | None) -> list[dict[str, Any]]:
    """Run the trials still missing towards ``target`` (finished = complete or pruned), for at most
    ``stop_after`` seconds, and record the segment in the study's user attributes.

    One writer at a time: a trial still RUNNING was cut off when an earlier segment was stopped, so
    it is marked FAIL (and not counted) before this segment starts.
    """
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        print(f"trial {t.number} was cut off by the end of an earlier segment: marked FAIL", flush=True)
    finished = (TrialState.COMPLETE, TrialState.PRUNED)
    remaining = target - len(study.get_trials(deepcopy=False, states=finished))
    start = time.time()
    if remaining > 0:
        print(f"{target - remaining} trials already in the study; running {remaining} more", flush=True)
        study.optimize(objective, n_trials=remaining, timeout=stop_after)
    segments = study.user_attrs.get("segments", [])
    segments.append({"started": start, "seconds": time.time() - start, "trials_after": len(study.trials),
                     "torch_threads": torch.get_num_threads()})
    study.set_user_attr("segments", segments)
    return segments
