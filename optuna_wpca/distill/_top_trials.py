"""Send only the best zero-cost trials to real training, as trials of a second Optuna study."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import optuna
from optuna.trial import FrozenTrial, TrialState

from optuna_wpca import _attributes as attr
from optuna_wpca._record import record_distillation
from optuna_wpca._selection import top_trials
from optuna_wpca._text import load_tokenizer
from optuna_wpca.distill._models import StudentClassifier
from optuna_wpca.distill._tasks import Task
from optuna_wpca.distill._config import TrainConfig
from optuna_wpca.distill._trainer import train
from optuna_wpca.spaces import SearchSpace

_logger = optuna.logging.get_logger("optuna.optuna_wpca.distill")


def distill_top_trials(
    study: optuna.Study,
    space: SearchSpace,
    task: Task,
    *,
    k: int = 3,
    teacher: Any = None,
    config: TrainConfig | None = None,
    hyperparameters: Callable[[optuna.Trial], dict[str, Any]] | None = None,
    n_trials: int | None = None,
    study_name: str | None = None,
    sampler: optuna.samplers.BaseSampler | None = None,
    pruner: optuna.pruners.BasePruner | None = None,
    checkpoint_root: str | os.PathLike | None = None,
    save_root: str | os.PathLike | None = None,
    tokenizer: Any = None,
    progress: bool = False,
) -> optuna.Study:
    """Train the ``k`` best architectures of ``study`` as trials of ``<study>-kd`` in the same storage.

    Each architecture is enqueued with its parameters and a ``zero_cost_trial`` user attribute
    pointing back; the objective re-suggests the same names, so the trial's params are the
    architecture. ``hyperparameters(trial)`` may suggest training settings next to it (fields of
    :class:`TrainConfig`, e.g. ``learning_rate``, ``steps`` as the fidelity, ``gamma``); then
    ``n_trials`` may exceed ``k`` and the sampler explores them. Inside training the dev metric is
    reported at each evaluation and the pruner may stop a run, so ``HyperbandPruner`` and friends
    decide how far each goes. Without a ``teacher`` the students train on labels only.
    """
    winners = top_trials(study, k)
    if not winners:
        raise ValueError(f"study {study.study_name!r} has no completed feasible trial to distil")
    config = config or TrainConfig()
    kd = optuna.create_study(
        storage=study._storage, study_name=study_name or f"{study.study_name}-kd", direction="maximize",
        sampler=sampler, pruner=pruner, load_if_exists=True,
    )
    record_distillation(kd, space, source_study=study.study_name, task=task.name)
    for t in winners:
        kd.enqueue_trial(t.params, user_attrs={attr.SOURCE_TRIAL: t.number, attr.SOURCE_VALUE: t.value},
                         skip_if_exists=True)

    def objective(trial: optuna.Trial) -> float:
        arch = space.suggest(trial)
        overrides = hyperparameters(trial) if hyperparameters else {}
        unknown = set(overrides) - set(TrainConfig.__dataclass_fields__)
        if unknown:
            raise ValueError(f"hyperparameters() returned unknown TrainConfig fields {sorted(unknown)}")
        run_config = TrainConfig(**{**config.__dict__, **overrides})
        trial.set_user_attr(attr.NUM_PARAMS, space.num_params(arch))
        trial.set_user_attr(attr.ARCHITECTURE, space.summary(arch))
        trial.set_user_attr(attr.METRIC, task.metric)
        model = StudentClassifier(space.build(arch, seed=run_config.seed), max(task.num_labels, 1),
                                  seed=run_config.seed, labels=task.labels)
        ckpt = Path(checkpoint_root) / f"{kd.study_name}-trial-{trial.number}" if checkpoint_root else None
        result = train(model, task, run_config, teacher=teacher, trial=trial, checkpoint_dir=ckpt,
                       tokenizer=tokenizer, progress=progress)
        trial.set_user_attr(attr.TRAIN_SECONDS, result.seconds)
        if save_root:
            out = Path(save_root) / f"{kd.study_name}-trial-{trial.number}"
            model.save_pretrained(out)
            (tokenizer if tokenizer is not None else load_tokenizer()).save_pretrained(str(out))
            trial.set_user_attr(attr.SAVED_TO, str(out))
        return result.metric

    kd.optimize(objective, n_trials=n_trials if n_trials is not None else len(winners))
    return kd


class DistillTopTrials:
    """A ``study.optimize`` callback: once ``after`` trials have completed, distil the top ``k``.

    Example:
        >>> # study.optimize(objective, n_trials=200,
        >>> #                callbacks=[DistillTopTrials(space, task, after=200, k=3, teacher=teacher)])
    """

    def __init__(self, space: SearchSpace, task: Task, *, after: int, **kwargs: Any) -> None:
        self.space, self.task, self.after, self.kwargs = space, task, after, kwargs
        self.result: optuna.Study | None = None

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if self.result is not None:
            return
        if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) >= self.after:
            self.result = distill_top_trials(study, self.space, self.task, **self.kwargs)
