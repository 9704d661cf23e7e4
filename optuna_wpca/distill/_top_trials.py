"""Send only the best zero-cost trials to real training, as trials of a second Optuna study."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable

import optuna
from optuna.trial import FrozenTrial, TrialState

from optuna_wpca import _attributes as attr
from optuna_wpca._record import record_distillation
from optuna_wpca._selection import top_trials
from optuna_wpca._text import load_tokenizer
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

    ``n_trials`` (default ``k``) is the number of finished (complete or pruned) trials the KD study
    should reach, as ``optuna-wpca search --n-trials`` is: a rerun after a stop finishes the study
    instead of adding to it, and a finished one trains nothing.
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
        from optuna_wpca.models import CandidateForSequenceClassification

        model = CandidateForSequenceClassification.from_candidate(
            space.build(arch, seed=run_config.seed), max(task.num_labels, 1), seed=run_config.seed, labels=task.labels)
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

    target = n_trials if n_trials is not None else len(winners)
    finished = len(kd.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
    if finished < target:
        kd.optimize(objective, n_trials=target - finished)
    return kd


class DistillTopTrials:
    """A ``study.optimize`` callback that trains the winners: once the zero-cost study holds ``after``
    completed trials, it distils the top ``k`` as trials of ``<study>-kd`` in the same storage (see
    :func:`distill_top_trials`, whose keyword arguments it takes: ``k``, ``teacher``, ``config``,
    ``pruner``, ``hyperparameters``, ``n_trials``, ...), so Optuna's pruner decides how far each
    student trains; then it stops the search (``stop_search=False`` lets it go on).

    It fires once per process, also with ``n_jobs > 1``; a rerun of the same script resumes the KD
    study where it stopped and trains nothing once it is finished. The KD study is ``self.result``.

    Example:
        >>> import optuna, optuna_wpca
        >>> from optuna_wpca.distill import DistillTopTrials, TrainConfig, load_task
        >>> space = optuna_wpca.WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
        >>> task = load_task("rt-sentiment")
        >>> task.train, task.dev = task.train[:32], task.dev[:16]
        >>> distil = DistillTopTrials(space, task, after=4, k=2,
        ...                           config=TrainConfig(steps=2, batch_size=4, max_seq_len=16, eval_every=1),
        ...                           pruner=optuna.pruners.MedianPruner())
        >>> study = optuna.create_study(direction="maximize",
        ...                             sampler=optuna_wpca.WPCASampler(space, population_size=4, seed=0))
        >>> objective = optuna_wpca.ZeroCostObjective(space, batch=optuna_wpca.text_batch(batch_size=4, seq_len=16))
        >>> study.optimize(objective, n_trials=10, callbacks=[distil])
        >>> len(study.trials), len(distil.result.trials)
        (4, 2)
    """

    def __init__(self, space: SearchSpace, task: Task, *, after: int, stop_search: bool = True,
                 **kwargs: Any) -> None:
        if after < 1:
            raise ValueError(f"after must be >= 1 (completed zero-cost trials before distilling), got {after}")
        self.space, self.task, self.after, self.stop_search, self.kwargs = space, task, after, stop_search, kwargs
        self.result: optuna.Study | None = None
        self._lock = threading.Lock()

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        with self._lock:  # n_jobs > 1: the first thread past the threshold trains, the others return
            if self.result is not None:
                return
            if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) < self.after:
                return
            _logger.info("%d zero-cost trials completed: distilling the top %s", self.after, self.kwargs.get("k", 3))
            self.result = distill_top_trials(study, self.space, self.task, **self.kwargs)
        if self.stop_search:
            study.stop()
