"""The second stage: train the zero-cost study's shortlist briefly, as trials of a second Optuna study.

Two parts, as :mod:`optuna_wpca.distill` has them: :class:`ShortlistObjective` is how one trial trains
one architecture (the objective, usable in any Optuna study with any pruner), and
:func:`pick_top_trials` / :class:`PickTopTrials` say which architectures, in which study, and record
the pick in the zero-cost study, where ``show``, ``export`` and the model card read it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from optuna_wpca._errors import InputError
from optuna_wpca import _attributes as attr
from optuna_wpca._selection import top_trials
from optuna_wpca.pick._protocol import PickProtocol, default_protocol
from optuna_wpca.pick._training import ShortlistTrainer
from optuna_wpca.spaces import SearchSpace
from optuna_wpca._optuna_private import storage_of

_logger = optuna.logging.get_logger("optuna.optuna_wpca.pick")
#: A trial that resumed a killed run: the step its checkpoint held.
RESUMED_FROM = "resumed_from_step"


class ShortlistObjective:
    """The objective of a second-stage study: a trial's architecture, trained by ``trainer``.

    The architecture is re-suggested under the space's parameter names, so a trial enqueued with a
    zero-cost trial's parameters trains that architecture. Each held-out measurement is a
    ``trial.report(loss, step)``, and the run stops with ``optuna.TrialPruned`` when
    ``trial.should_prune()``, so the study's pruner decides how far each architecture trains. The
    value is the held-out loss after the last step (lower is better). With ``checkpoint_root``,
    each architecture keeps a checkpoint at every measurement there, and a trial that trains it
    again (after a kill) resumes from it.

    Example:
        >>> import optuna, optuna_wpca
        >>> from optuna_wpca.pick import PickProtocol, ShortlistObjective, ShortlistTrainer
        >>> space = optuna_wpca.DecoderSpace(num_layers_choices=(1, 2), hidden_sizes=(32,), heads=(2,),
        ...                                  ffn_sizes=(64,))
        >>> protocol = PickProtocol(steps=2, report_every=1, batch_size=2, seq_len=16, eval_windows=2)
        >>> objective = ShortlistObjective(ShortlistTrainer(space, protocol))
        >>> study = optuna.create_study(direction="minimize", pruner=protocol.make_pruner())
        >>> study.optimize(objective, n_trials=2)
        >>> sorted(study.trials[0].intermediate_values)
        [1, 2]
    """

    def __init__(self, trainer: ShortlistTrainer, *, checkpoint_root: str | Path | None = None) -> None:
        self.trainer, self.space, self.protocol = trainer, trainer.space, trainer.protocol
        self.checkpoint_root = checkpoint_root

    def __call__(self, trial: optuna.Trial) -> float:
        arch = self.space.suggest(trial)
        trial.set_user_attr(attr.NUM_PARAMS, self.space.num_params(arch))
        trial.set_user_attr(attr.ARCHITECTURE, self.space.summary(arch))
        source = trial.user_attrs.get(attr.SOURCE_TRIAL)
        folder = None
        if self.checkpoint_root is not None:
            name = f"zero-cost-trial-{source}" if source is not None else f"trial-{trial.number}"
            folder = Path(self.checkpoint_root) / trial.study.study_name / name
        last = self.protocol.steps
        losses: dict[str, float] = {}

        def report(step: int, loss: float) -> None:
            losses[str(step)] = loss
            trial.report(loss, step)
            if step < last and trial.should_prune():
                raise optuna.TrialPruned(f"pruned at step {step} with held-out loss {loss:.4f}")

        curve = None
        try:
            curve = self.trainer.train(arch, report=report, checkpoint_dir=folder)
        finally:
            trial.set_user_attr(attr.LOSSES, losses)
            if curve is not None:
                if curve.resumed_from is not None:
                    trial.set_user_attr(RESUMED_FROM, curve.resumed_from)
                trial.set_user_attr(attr.CPU_SECONDS, curve.cpu_seconds)
                trial.set_user_attr(attr.TRAIN_SECONDS, curve.seconds)
            _save_trial_note(trial, source, losses, stopped=curve is None)
        return curve.loss


def shortlist(study: optuna.Study, k: int) -> list[FrozenTrial]:
    """The ``k`` best distinct feasible architectures of a zero-cost study, best first; one clear
    line (``ValueError``) when the study cannot give them."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"the shortlist must hold at least 1 architecture, got {k!r}")
    name = study.study_name
    if attr.PICK_PROTOCOL in study.user_attrs or attr.SOURCE_STUDY in study.user_attrs:
        raise InputError(f"study {name!r} is itself a training stage; shortlist its zero-cost study instead")
    if attr.PROXIES not in study.user_attrs:
        raise InputError(f"study {name!r} has no zero-cost objective recorded (no {attr.PROXIES!r} attribute): "
                         "the second stage shortlists the best trials of an optuna-wpca search")
    if len(study.directions) != 1:
        raise InputError(f"study {name!r} has {len(study.directions)} objectives and no single order to shortlist "
                         "by; train chosen trials of its Pareto front with ShortlistObjective instead")
    winners = top_trials(study, k)
    if len(winners) < k:
        raise InputError(f"study {name!r} holds {len(winners)} distinct feasible completed architecture"
                         f"{'s' if len(winners) != 1 else ''}, fewer than a shortlist of {k}; search longer "
                         "or shortlist fewer")
    return winners


def _open_stage(study: optuna.Study, name: str, protocol: PickProtocol, winners: list[FrozenTrial],
                k: int) -> optuna.Study:
    """The second-stage study, created with its record, or an existing one checked against it."""
    storage = storage_of(study)
    wanted = [t.number for t in winners]
    existing = {s.study_name: s for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    if name in existing:
        recorded = existing[name].user_attrs
        old = recorded.get(attr.PICK_PROTOCOL)
        if old is not None and old != protocol.to_dict():
            diff = ", ".join(f"{key} {old.get(key)!r} (now {value!r})" for key, value in protocol.to_dict().items()
                             if old.get(key) != value)
            raise InputError(f"study {name!r} trained its shortlist with another protocol: {diff}; resume with "
                             "the recorded settings or name another second-stage study")
        old_list = recorded.get(attr.PICK_SHORTLIST)
        if old_list is not None and len(old_list) != k:
            raise InputError(f"study {name!r} holds a shortlist of {len(old_list)}, not {k}; resume with "
                             f"--shortlist {len(old_list)} or name another second-stage study")
        if old_list is not None and old_list != wanted:
            _logger.info("the zero-cost study's top %d changed since the second stage began; it goes on with the "
                         "shortlist it recorded (trials %s)", k, old_list)
    stage = optuna.create_study(storage=storage, study_name=name, direction="minimize",
                                pruner=protocol.make_pruner(), sampler=optuna.samplers.RandomSampler(seed=0),
                                load_if_exists=True)
    if attr.PICK_SHORTLIST not in stage.user_attrs:
        stage.set_user_attr(attr.SOURCE_STUDY, study.study_name)
        stage.set_user_attr(attr.PICK_PROTOCOL, protocol.to_dict())
        stage.set_user_attr(attr.PICK_SHORTLIST, wanted)
        for t in winners:
            stage.enqueue_trial(t.params, user_attrs={attr.SOURCE_TRIAL: t.number, attr.SOURCE_VALUE: t.value})
    return stage


def _recover(stage: optuna.Study) -> None:
    """A trial left RUNNING by a killed stage: failed, and its architecture queued again (its
    checkpoint lets the new trial resume)."""
    for t in stage.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        stage.tell(t.number, state=TrialState.FAIL)
        _logger.info("second-stage trial %d was left running by a stopped run: training it again from its last "
                     "checkpoint", t.number)
        stage.enqueue_trial(t.params, user_attrs={k: t.user_attrs[k] for k in (attr.SOURCE_TRIAL, attr.SOURCE_VALUE)
                                                  if k in t.user_attrs})


def _finished(stage: optuna.Study) -> dict[int, FrozenTrial]:
    """The last finished (complete or pruned) trial of each zero-cost trial in the stage."""
    out: dict[int, FrozenTrial] = {}
    for t in stage.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        out[t.user_attrs[attr.SOURCE_TRIAL]] = t
    return out


def _pick_record(study: optuna.Study, stage: optuna.Study, trainer: ShortlistTrainer) -> dict[str, Any]:
    order = stage.user_attrs[attr.PICK_SHORTLIST]
    done = _finished(stage)
    rows = []
    for rank, number in enumerate(order, 1):
        t = done.get(number)
        rows.append({
            "zero_cost_trial": number, "zero_cost_rank": rank,
            "zero_cost_value": t.user_attrs.get(attr.SOURCE_VALUE) if t else None,
            "architecture": t.user_attrs.get(attr.ARCHITECTURE) if t else None,
            "num_params": t.user_attrs.get(attr.NUM_PARAMS) if t else None,
            "state": t.state.name if t else "NOT TRAINED",
            "stage_trial": t.number if t else None,
            "losses": dict(t.user_attrs.get(attr.LOSSES, {})) if t else {},
            "cpu_seconds": t.user_attrs.get(attr.CPU_SECONDS) if t else None,
        })
    complete = [r for r in rows if r["state"] == "COMPLETE"]
    if not complete:
        raise InputError(f"no architecture of study {stage.study_name!r} finished training; see its failed trials")
    best = min(complete, key=lambda r: (done[r["zero_cost_trial"]].value, r["zero_cost_rank"]))
    return {
        "stage_study": stage.study_name, "zero_cost_trial": best["zero_cost_trial"],
        "zero_cost_rank": best["zero_cost_rank"], "loss": done[best["zero_cost_trial"]].value,
        "signal": trainer.signal, "loss_name": trainer.loss_name, "protocol": trainer.protocol.to_dict(),
        "shortlist": rows, "cpu_seconds": sum(r["cpu_seconds"] or 0.0 for r in rows),
    }


def pick_top_trials(
    study: optuna.Study,
    *,
    k: int = 5,
    trainer: ShortlistTrainer | None = None,
    protocol: PickProtocol | None = None,
    study_name: str | None = None,
    checkpoint_root: str | Path | None = None,
    space: SearchSpace | None = None,
) -> dict[str, Any]:
    """Train the ``k`` best architectures of a zero-cost ``study`` briefly and record the pick.

    The shortlist is trained as trials of ``<study>-pick`` (or ``study_name``) in the same storage,
    under ``protocol``'s pruner; the architecture with the lowest held-out loss among those trained
    to the end is the pick. It is recorded in the zero-cost study (``read_pick``), where ``show``,
    ``export`` and the model card read it. A rerun resumes: trials finished are not trained again, a
    trial a kill left running resumes from its checkpoint (with ``checkpoint_root``), and a
    finished stage trains nothing.

    Args:
        study: A single-objective zero-cost study of optuna-wpca.
        k: Shortlist size.
        trainer: How each architecture trains (default: a :class:`ShortlistTrainer` of the study's
            space under ``protocol``).
        protocol: The recipe (default: :func:`default_protocol` of the space's family; ignored when ``trainer`` is given).
        study_name: The second-stage study's name.
        checkpoint_root: Where runs keep their checkpoints.
        space: The study's space (default: the one it records).

    Returns:
        The pick record (see :func:`read_pick`).
    """
    winners = shortlist(study, k)
    if space is None:
        from optuna_wpca._record import read_search

        space = read_search(study).space
    if trainer is None:
        trainer = ShortlistTrainer(space, protocol or default_protocol(space.family))
    stage = _open_stage(study, study_name or f"{study.study_name}-pick", trainer.protocol, winners, k)
    _recover(stage)
    waiting = len(stage.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
    if waiting:
        objective = ShortlistObjective(trainer, checkpoint_root=checkpoint_root)
        stage.optimize(objective, n_trials=waiting, catch=(FloatingPointError,))
    record = _pick_record(study, stage, trainer)
    study.set_user_attr(attr.PICK, record)
    stage.set_user_attr(attr.PICK, record)
    _save_stage_note(stage, record)
    return record


def read_pick(study: optuna.Study) -> dict[str, Any] | None:
    """The second stage's pick recorded in a zero-cost study, or ``None``: ``{"zero_cost_trial",
    "loss", "signal", "protocol", "shortlist": [{"zero_cost_trial", "state", "losses", ...}], ...}``."""
    return study.user_attrs.get(attr.PICK)


def pick_lines(record: dict[str, Any]) -> list[str]:
    """The pick and its shortlist as plain-text lines (``show``, the model card and notes use them)."""
    rungs = sorted({int(s) for r in record["shortlist"] for s in r["losses"]})
    lines = [f"second stage ({record['stage_study']}): trial {record['zero_cost_trial']} picked "
             f"(zero-cost rank {record['zero_cost_rank']} of {len(record['shortlist'])}), {record['loss_name']} "
             f"{record['loss']:.4f}; {record['cpu_seconds']:.0f} CPU s",
             "  zero-cost  rank  state     " + " ".join(f"{'@' + str(s):>8}" for s in rungs)]
    for r in record["shortlist"]:
        cells = " ".join(f"{r['losses'][str(s)]:8.4f}" if str(s) in r["losses"] else f"{'-':>8}" for s in rungs)
        mark = " <- pick" if r["zero_cost_trial"] == record["zero_cost_trial"] else ""
        lines.append(f"  {r['zero_cost_trial']:>9}  {r['zero_cost_rank']:>4}  {r['state']:<8}  {cells}{mark}")
    return lines


def _save_trial_note(trial: optuna.Trial, source: Any, losses: dict[str, float], *, stopped: bool) -> None:
    """The trial's dashboard note: its zero-cost trial and the held-out loss at each measurement."""
    try:
        import optuna_dashboard
    except ImportError:  # pragma: no cover - a dependency; the note is a courtesy
        return
    body = (f"## Second stage: zero-cost trial {source}\n\n- architecture: {trial.user_attrs.get(attr.ARCHITECTURE)}\n"
            f"- {'stopped at step ' + max(losses, key=int) if stopped and losses else 'trained to the end'}\n\n"
            "| step | held-out loss |\n|---:|---:|\n"
            + "".join(f"| {s} | {v:.4f} |\n" for s, v in sorted(losses.items(), key=lambda kv: int(kv[0]))))
    optuna_dashboard.save_note(trial, body)


def _save_stage_note(stage: optuna.Study, record: dict[str, Any]) -> None:
    try:
        import optuna_dashboard
    except ImportError:  # pragma: no cover
        return
    optuna_dashboard.save_note(stage, "## optuna-wpca second stage\n\n```\n" + "\n".join(pick_lines(record))
                               + "\n```\n")


class PickTopTrials:
    """A ``study.optimize`` callback: once the zero-cost study holds ``after`` completed trials, train
    its top ``k`` by the second stage (:func:`pick_top_trials`, whose arguments it takes) and stop the
    search (``stop_search=False`` lets it go on). It fires once per process, also with ``n_jobs > 1``;
    the pick record is ``self.result``.

    Example:
        >>> import optuna, optuna_wpca
        >>> from optuna_wpca.pick import PickProtocol, PickTopTrials
        >>> space = optuna_wpca.DecoderSpace(num_layers_choices=(1, 2), hidden_sizes=(32,), heads=(2,),
        ...                                  ffn_sizes=(64, 128))
        >>> protocol = PickProtocol(steps=2, report_every=1, batch_size=2, seq_len=16, eval_windows=2)
        >>> study = optuna.create_study(direction="maximize",
        ...                             sampler=optuna_wpca.WPCASampler(space, population_size=4, seed=0))
        >>> objective = optuna_wpca.ZeroCostObjective(space, proxies=["params"],
        ...                                           batch=optuna_wpca.text_batch(batch_size=2, seq_len=16))
        >>> picker = PickTopTrials(after=4, k=2, protocol=protocol)
        >>> study.optimize(objective, n_trials=10, callbacks=[picker])
        >>> picker.result["zero_cost_trial"] in [row["zero_cost_trial"] for row in picker.result["shortlist"]]
        True
    """

    def __init__(self, *, after: int, k: int = 5, trainer: ShortlistTrainer | None = None,
                 protocol: PickProtocol | None = None, study_name: str | None = None,
                 checkpoint_root: str | Path | None = None, stop_search: bool = True) -> None:
        if after < k:
            raise InputError(f"after ({after}) must be at least k ({k}): the shortlist needs that many trials")
        self.after, self.stop_search = after, stop_search
        self.options = {"k": k, "trainer": trainer, "protocol": protocol, "study_name": study_name,
                        "checkpoint_root": checkpoint_root}
        self.result: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        with self._lock:
            if self.result is not None:
                return
            if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) < self.after:
                return
            _logger.info("%d zero-cost trials completed: training the top %d", self.after, self.options["k"])
            self.result = pick_top_trials(study, **self.options)
        if self.stop_search:
            study.stop()
