"""Send only the best zero-cost trials to real training, as trials of a second Optuna study.

Two parts, as a zero-cost search has them: :class:`DistillationObjective` is how one trial trains a
student (the objective), :func:`distill_top_trials` and :class:`DistillTopTrials` say which trials
of which study it trains, under which sampler and pruner (the study).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable

import optuna
from optuna.trial import FrozenTrial, TrialState

from optuna_wpca._errors import InputError
from optuna_wpca import _attributes as attr
from optuna_wpca._record import record_distillation
from optuna_wpca._selection import top_trials
from optuna_wpca._text import load_tokenizer
from optuna_wpca.distill._models import save_model
from optuna_wpca.distill._tasks import Task
from optuna_wpca.distill._config import TrainConfig
from optuna_wpca.distill._trainer import train
from optuna_wpca.spaces import SearchSpace
from optuna_wpca._optuna_private import storage_of

_logger = optuna.logging.get_logger("optuna.optuna_wpca.distill")


class DistillationObjective:
    """The objective of a knowledge-distillation study: a trial's architecture, trained on ``task``.

    The architecture is re-suggested under the space's parameter names, so a trial enqueued with a
    zero-cost trial's parameters trains that architecture. ``hyperparameters(trial)`` may suggest
    training settings next to it (fields of :class:`TrainConfig`, e.g. ``learning_rate``, ``steps`` as
    the fidelity, ``gamma``) for the sampler to tune. Training reports the dev metric at each
    evaluation and honours ``trial.should_prune``, so the study's pruner decides how far each run
    goes. Without a ``teacher`` the students train on labels only. ``checkpoint_root`` keeps a
    resumable checkpoint per trial; ``save_root`` saves each trained student (``from_pretrained``)
    with ``tokenizer`` (default: the bundled BERT tokenizer).

    Example:
        >>> import optuna, optuna_wpca
        >>> from optuna_wpca.distill import DistillationObjective, TrainConfig, load_task
        >>> space = optuna_wpca.WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
        >>> task = load_task("rt-sentiment")
        >>> task.train, task.dev = task.train[:16], task.dev[:8]
        >>> objective = DistillationObjective(space, task, config=TrainConfig(steps=2, batch_size=4, max_seq_len=16))
        >>> study = optuna.create_study(direction="maximize")
        >>> study.optimize(objective, n_trials=1)
        >>> sorted(study.trials[0].user_attrs)
        ['architecture', 'metric', 'num_params', 'train_seconds']
    """

    def __init__(self, space: SearchSpace, task: Task, *, teacher: Any = None, config: TrainConfig | None = None,
                 hyperparameters: Callable[[optuna.Trial], dict[str, Any]] | None = None, tokenizer: Any = None,
                 checkpoint_root: str | os.PathLike | None = None, save_root: str | os.PathLike | None = None,
                 progress: bool = False) -> None:
        if space.family != "encoder":
            raise InputError(f"distillation trains sequence classifiers from a BERT teacher, which needs an encoder "
                             f"space; the {space.kind!r} space holds {space.family}s")
        self.space, self.task, self.teacher = space, task, teacher
        self.config = config or TrainConfig()
        self.hyperparameters, self.tokenizer, self.progress = hyperparameters, tokenizer, progress
        self.checkpoint_root, self.save_root = checkpoint_root, save_root

    def __call__(self, trial: optuna.Trial) -> float:
        from optuna_wpca.models import CandidateForSequenceClassification

        arch = self.space.suggest(trial)
        overrides = self.hyperparameters(trial) if self.hyperparameters else {}
        unknown = set(overrides) - set(TrainConfig.__dataclass_fields__)
        if unknown:
            raise InputError(f"hyperparameters() returned unknown TrainConfig fields {sorted(unknown)}")
        config = TrainConfig(**{**self.config.__dict__, **overrides})
        trial.set_user_attr(attr.NUM_PARAMS, self.space.num_params(arch))
        trial.set_user_attr(attr.ARCHITECTURE, self.space.summary(arch))
        trial.set_user_attr(attr.METRIC, self.task.metric)
        model = CandidateForSequenceClassification.from_candidate(
            self.space.build(arch, seed=config.seed), max(self.task.num_labels, 1), seed=config.seed,
            labels=self.task.labels)
        name = f"{trial.study.study_name}-trial-{trial.number}"
        result = train(model, self.task, config, teacher=self.teacher, trial=trial,
                       checkpoint_dir=Path(self.checkpoint_root) / name if self.checkpoint_root else None,
                       tokenizer=self.tokenizer, progress=self.progress)
        trial.set_user_attr(attr.TRAIN_SECONDS, result.seconds)
        if self.save_root:
            out = Path(self.save_root) / name
            save_model(model, out, quiet=not self.progress)
            (self.tokenizer if self.tokenizer is not None else load_tokenizer()).save_pretrained(str(out))
            trial.set_user_attr(attr.SAVED_TO, str(out))
        return result.metric


def distill_top_trials(
    study: optuna.Study,
    objective: DistillationObjective,
    *,
    k: int = 3,
    n_trials: int | None = None,
    study_name: str | None = None,
    sampler: optuna.samplers.BaseSampler | None = None,
    pruner: optuna.pruners.BasePruner | None = None,
) -> optuna.Study:
    """Train the ``k`` best architectures of ``study`` as trials of ``<study>-kd`` in the same storage.

    Each architecture is enqueued with its parameters and a ``zero_cost_trial`` user attribute
    pointing back, and ``objective`` trains it; with training hyperparameters in the objective,
    ``n_trials`` may exceed ``k`` and ``sampler`` explores them, while ``pruner`` stops runs early.
    ``n_trials`` (default ``k``) is the number of finished (complete or pruned) trials the KD study
    should reach, as ``optuna-wpca search --n-trials`` is: a rerun after a stop finishes the study
    instead of adding to it, and a finished one trains nothing.
    """
    winners = top_trials(study, k)
    if not winners:
        raise InputError(f"study {study.study_name!r} has no completed feasible trial to distil")
    kd = optuna.create_study(
        storage=storage_of(study), study_name=study_name or f"{study.study_name}-kd", direction="maximize",
        sampler=sampler, pruner=pruner, load_if_exists=True,
    )
    record_distillation(kd, objective.space, source_study=study.study_name, task=objective.task.name)
    for t in winners:
        kd.enqueue_trial(t.params, user_attrs={attr.SOURCE_TRIAL: t.number, attr.SOURCE_VALUE: t.value},
                         skip_if_exists=True)
    target = n_trials if n_trials is not None else len(winners)
    finished = len(kd.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
    if finished < target:
        kd.optimize(objective, n_trials=target - finished)
    return kd


class DistillTopTrials:
    """A ``study.optimize`` callback that trains the winners: once the zero-cost study holds ``after``
    completed trials, it distils the top ``k`` with ``objective`` as trials of ``<study>-kd`` in the
    same storage (see :func:`distill_top_trials`, whose arguments it takes), so Optuna's pruner
    decides how far each student trains; then it stops the search (``stop_search=False`` lets it go on).

    It fires once per process, also with ``n_jobs > 1``; a rerun of the same script resumes the KD
    study where it stopped and trains nothing once it is finished. The KD study is ``self.result``.

    Example:
        >>> import optuna, optuna_wpca
        >>> from optuna_wpca.distill import DistillationObjective, DistillTopTrials, TrainConfig, load_task
        >>> space = optuna_wpca.WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
        >>> task = load_task("rt-sentiment")
        >>> task.train, task.dev = task.train[:32], task.dev[:16]
        >>> train = DistillationObjective(space, task, config=TrainConfig(steps=2, batch_size=4, max_seq_len=16,
        ...                                                               eval_every=1))
        >>> distil = DistillTopTrials(train, after=4, k=2, pruner=optuna.pruners.MedianPruner())
        >>> study = optuna.create_study(direction="maximize",
        ...                             sampler=optuna_wpca.WPCASampler(space, population_size=4, seed=0))
        >>> objective = optuna_wpca.ZeroCostObjective(space, batch=optuna_wpca.text_batch(batch_size=4, seq_len=16))
        >>> study.optimize(objective, n_trials=10, callbacks=[distil])
        >>> len(study.trials), len(distil.result.trials)
        (4, 2)
    """

    def __init__(self, objective: DistillationObjective, *, after: int, k: int = 3, n_trials: int | None = None,
                 study_name: str | None = None, sampler: optuna.samplers.BaseSampler | None = None,
                 pruner: optuna.pruners.BasePruner | None = None, stop_search: bool = True) -> None:
        if after < 1:
            raise InputError(f"after must be >= 1 (completed zero-cost trials before distilling), got {after}")
        self.objective, self.after, self.stop_search = objective, after, stop_search
        self.study_options = {"k": k, "n_trials": n_trials, "study_name": study_name, "sampler": sampler,
                              "pruner": pruner}
        self.result: optuna.Study | None = None
        self._lock = threading.Lock()

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        with self._lock:  # n_jobs > 1: the first thread past the threshold trains, the others return
            if self.result is not None:
                return
            if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) < self.after:
                return
            _logger.info("%d zero-cost trials completed: distilling the top %d", self.after, self.study_options["k"])
            self.result = distill_top_trials(study, self.objective, **self.study_options)
        if self.stop_search:
            study.stop()
