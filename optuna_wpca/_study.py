"""What an optuna-wpca study is: the presets and their budgets, the attributes a study records,
feasibility, and its best trials.

Every part of the plugin that writes or reads a study goes through this module: the sampler and
the objective record the search (space, parameter budget, proxies, minibatch) in the study's user
attributes the first time they see it, the CLI and distillation read it back. So a study made in
Python works with every ``optuna-wpca`` command, and the budget is given once.

Example:
    >>> import optuna, optuna_wpca
    >>> space, budget = optuna_wpca.preset("wpca-tiny")
    >>> study = optuna.create_study(direction="maximize")
    >>> _ = optuna_wpca.record_search(study, space, budget)
    >>> optuna_wpca.read_search(study).budget.max_params
    10000000.0
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from optuna_wpca.spaces import DecoderSpace, ELMSpace, FlexiBERTSpace, SearchSpace, WPCASpace, space_from_dict

_logger = optuna.logging.get_logger("optuna.optuna_wpca.study")

# Study user attributes (visible in optuna-dashboard).
_SPACE = "optuna_wpca.space"
_MAX_PARAMS = "optuna_wpca.max_params"
_MIN_PARAMS = "optuna_wpca.min_params"
_PROXY = "optuna_wpca.proxy"
_BATCH = "optuna_wpca.batch"
_GA = "optuna_wpca.ga"
#: Where the minibatch came from and the seeds (corpus, its SHA-256, tokenizer, batch seed, init seed, eta).
_SOURCE = "optuna_wpca.minibatch_source"
_SOURCE_STUDY = "optuna_wpca.source_study"
_TASK = "optuna_wpca.task"
#: Study user attribute: the reference sample that scales a combined objective (``ReferenceSample.to_dict``).
REFERENCE_ATTR = "optuna_wpca.reference"

#: Trial user attribute mirroring the budget constraints (True when the candidate fits).
FEASIBLE_ATTR = "feasible"
#: Trial user attribute of a distillation trial: the zero-cost trial it trains.
SOURCE_TRIAL_ATTR = "zero_cost_trial"


@dataclass(frozen=True)
class Budget:
    """A parameter budget: at most ``max_params`` and at least ``min_params`` (``None``: no bound),
    counted under the space's convention.

    Example:
        >>> Budget(max_params=10e6).contains(9_000_000)
        True
    """

    max_params: float | None = None
    min_params: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_params", "min_params"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
                float("inf"), float("-inf")
            ):
                raise ValueError(f"{name} must be a finite number of parameters or None, got {value!r}")
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value:,.0f}")
            object.__setattr__(self, name, float(value))

    @property
    def is_set(self) -> bool:
        """Whether either bound is set."""
        return self.max_params is not None or self.min_params is not None

    def check(self, space: SearchSpace) -> Budget:
        """Raise a clear error when no candidate of ``space`` fits; return ``self``."""
        space.check_budget(self.max_params, self.min_params)
        return self

    def contains(self, num_params: int) -> bool:
        """Whether ``num_params`` lies within the bounds."""
        return (self.max_params is None or num_params <= self.max_params) and (
            self.min_params is None or num_params >= self.min_params
        )

    def constraints(self, num_params: int) -> dict[str, float]:
        """Optuna constraint values (``<= 0`` when satisfied), one per bound that is set."""
        out = {}
        if self.max_params is not None:
            out["max_params"] = float(num_params - self.max_params)
        if self.min_params is not None:
            out["min_params"] = float(self.min_params - num_params)
        return out

    def violation(self, num_params: int) -> str:
        """Why ``num_params`` does not fit, as a phrase."""
        if self.max_params is not None and num_params > self.max_params:
            return f"{num_params:,} parameters exceed the budget of {self.max_params:,.0f}"
        return f"{num_params:,} parameters fall below the lower bound of {self.min_params:,.0f}"

    def describe(self) -> str:
        """The bounds as a phrase (``<= 15,700,000 parameters``), ``none`` when unset."""
        if not self.is_set:
            return "none"
        if self.min_params is None:
            return f"<= {self.max_params:,.0f} parameters"
        if self.max_params is None:
            return f">= {self.min_params:,.0f} parameters"
        return f"{self.min_params:,.0f}-{self.max_params:,.0f} parameters"


@dataclass(frozen=True)
class Preset:
    """A named search space with its published parameter budget."""

    make_space: Callable[[], SearchSpace]
    budget: Budget
    source: str


#: The named searches of the CLI's ``--preset``: the W-PCA paper's (6.2.1), LiteTransformerSearch's
#: 5M-12M decoder band, and two unbudgeted ones.
PRESETS: dict[str, Preset] = {
    "wpca-small": Preset(WPCASpace.small, Budget(max_params=15.7e6), "W-PCA-Small: 12 layers, <= 15.7M"),
    "wpca-tiny": Preset(WPCASpace.tiny, Budget(max_params=10e6), "W-PCA-Tiny: 6 layers, <= 10M"),
    "elm-small": Preset(ELMSpace.small, Budget(max_params=15.7e6),
                        "ELM-Small: the W-PCA-Small space with elastic heads, <= 15.7M"),
    "elm-tiny": Preset(ELMSpace.tiny, Budget(max_params=10e6), "ELM-Tiny: 6 layers with elastic heads, <= 10M"),
    "lts-gpt2": Preset(DecoderSpace.lts_gpt2, Budget(max_params=12e6, min_params=5e6),
                       "LiteTransformerSearch GPT-2 decoders, 5M-12M non-embedding"),
    "flexibert": Preset(FlexiBERTSpace, Budget(), "NAS-Bench-BERT's FlexiBERT space, no budget"),
    "decoder-small": Preset(DecoderSpace.small, Budget(), "a small GPT-style decoder space, no budget"),
}


def preset(name: str) -> tuple[SearchSpace, Budget]:
    """The space and budget of a named preset (see :data:`PRESETS`).

    Example:
        >>> space, budget = preset("wpca-small")
        >>> space.num_layers, budget.max_params
        (12, 15700000.0)
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    p = PRESETS[name]
    return p.make_space(), p.budget


@dataclass(frozen=True)
class SearchRecord:
    """What a study was searched with, as recorded in its user attributes."""

    space: SearchSpace
    budget: Budget
    proxies: tuple[str, ...] | None = None
    batch: tuple[int, int] | None = None
    #: WPCASampler's settings (population, parent pool, operator probabilities).
    ga: dict[str, Any] | None = None
    source_study: str | None = None
    task: str | None = None
    #: The reference sample of a combined objective (``ReferenceSample.to_dict()``), where there is one.
    reference: dict[str, Any] | None = None
    #: The minibatch's corpus, tokenizer and seeds, where the search recorded them (the CLI does).
    source: dict[str, Any] | None = None


def _conflict(study: optuna.Study, what: str, recorded: Any, given: Any) -> ValueError:
    return ValueError(
        f"study {study.study_name!r} was searched with {what} {recorded}, not {given}; "
        "use another study name, or leave the argument out to reuse the recorded one"
    )


def record_search(
    study: optuna.Study,
    space: SearchSpace,
    budget: Budget | None = None,
    *,
    proxies: Sequence[str] | None = None,
    batch: Sequence[int] | None = None,
    ga: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
) -> SearchRecord:
    """Record the space (and budget, proxies, minibatch when given) in ``study``, or check them
    against what it already records. Returns the record after the merge.

    A value already recorded wins over a missing one (so the budget is given once, to the sampler
    or to the objective); a different value is an error, since a study holds one search. A study
    that holds trials but no record was not made by optuna-wpca and is refused.
    """
    attrs = study.user_attrs
    recorded = attrs.get(_SPACE)
    if recorded is None:
        # Running or waiting trials may be this search's own, being started now; finished ones
        # must carry this space's genome (a study searched before the search was recorded).
        finished = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
        genes = set(space.distributions())
        foreign = [t for t in study.get_trials(deepcopy=False, states=finished)
                   if t.state != TrialState.FAIL and not genes <= set(t.params)]
        if foreign:
            raise ValueError(f"study {study.study_name!r} already holds {len(foreign)} trials not made by "
                             "optuna-wpca over this space; use another study name")
    if recorded is not None and recorded != space.to_dict():
        raise ValueError(f"study {study.study_name!r} was searched over a different space "
                         f"({recorded.get('type')}); use another study name")
    writes: dict[str, Any] = {}
    if recorded is None:
        writes[_SPACE] = space.to_dict()

    old = Budget(attrs.get(_MAX_PARAMS), attrs.get(_MIN_PARAMS))
    if budget is not None and budget.is_set:
        budget.check(space)
        if old.is_set and old != budget:
            raise _conflict(study, "the budget", old.describe(), budget.describe())
        if not old.is_set:
            writes[_MAX_PARAMS], writes[_MIN_PARAMS] = budget.max_params, budget.min_params
    final_budget = budget if budget is not None and budget.is_set else old

    old_proxies = attrs.get(_PROXY)
    if isinstance(old_proxies, str):
        old_proxies = old_proxies.split(",")
    if proxies is not None:
        proxies = list(proxies)
        if old_proxies is not None and list(old_proxies) != proxies:
            raise _conflict(study, "the proxies", ",".join(old_proxies), ",".join(proxies))
        if old_proxies is None:
            writes[_PROXY] = ",".join(proxies)
    final_proxies = proxies if proxies is not None else old_proxies

    old_batch = attrs.get(_BATCH)
    if batch is not None:
        batch = [int(b) for b in batch]
        if old_batch is not None and list(old_batch) != batch:
            raise _conflict(study, "the minibatch", "x".join(map(str, old_batch)), "x".join(map(str, batch)))
        if old_batch is None:
            writes[_BATCH] = batch
    final_batch = batch if batch is not None else old_batch

    old_source = attrs.get(_SOURCE)
    if source is not None:
        source = json.loads(json.dumps(source))  # as it reads back
        if old_source is not None and old_source != source:
            changed = ", ".join(f"{k} {old_source.get(k)!r} -> {source.get(k)!r}"
                                for k in sorted(set(source) | set(old_source)) if old_source.get(k) != source.get(k))
            raise ValueError(f"study {study.study_name!r} was searched on another minibatch or seed ({changed}); "
                             "use another study name, or the recorded settings")
        if old_source is None:
            writes[_SOURCE] = source
    final_source = source if source is not None else old_source

    old_ga = attrs.get(_GA)
    if ga is not None:
        if old_ga is not None and old_ga != ga:
            changed = ", ".join(f"{k} {old_ga.get(k)} -> {ga.get(k)}" for k in sorted(set(ga) | set(old_ga))
                                if old_ga.get(k) != ga.get(k))
            raise ValueError(f"study {study.study_name!r} was searched with other GA settings ({changed}); "
                             "use another study name, or the recorded settings")
        if old_ga is None:
            writes[_GA] = dict(ga)
    final_ga = ga if ga is not None else old_ga

    record = SearchRecord(
        space=space,
        budget=final_budget,
        proxies=tuple(final_proxies) if final_proxies is not None else None,
        batch=tuple(final_batch) if final_batch is not None else None,
        ga=final_ga,
        source_study=attrs.get(_SOURCE_STUDY),
        task=attrs.get(_TASK),
        reference=attrs.get(REFERENCE_ATTR),
        source=final_source,
    )
    if writes:
        for key, value in writes.items():
            study.set_user_attr(key, value)
        if _PROXY in writes:
            _name_the_objectives(study, list(proxies or []))
        from optuna_wpca._dashboard import save_study_note

        save_study_note(study, record)
        _logger.debug("recorded %s in study %r", ", ".join(writes), study.study_name)
    return record


def _name_the_objectives(study: optuna.Study, proxies: list[str]) -> None:
    """optuna-dashboard labels a study's values by its metric names ("wpca" instead of "Objective 0"),
    with the unit where a proxy has one ("latency (ms)"), so the Pareto plot's axes say what they are."""
    from optuna_wpca.proxies import get_proxy

    if len(proxies) != len(study.directions) or study.metric_names is not None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([get_proxy(p).label for p in proxies])


def record_distillation(study: optuna.Study, space: SearchSpace, *, source_study: str, task: str) -> None:
    """Record a distillation study: the space of its source study, the source and the task."""
    study.set_user_attr(_SPACE, space.to_dict())
    study.set_user_attr(_SOURCE_STUDY, source_study)
    study.set_user_attr(_TASK, task)


def recorded_budget(study: optuna.Study) -> Budget:
    """The budget recorded in ``study`` (unset when none is)."""
    attrs = study.user_attrs
    return Budget(attrs.get(_MAX_PARAMS), attrs.get(_MIN_PARAMS))


def read_search(study: optuna.Study) -> SearchRecord:
    """The search recorded in ``study``; a clear error for a study optuna-wpca did not make.

    Example:
        >>> import optuna
        >>> read_search(optuna.create_study())
        Traceback (most recent call last):
        ...
        ValueError: study 'no-name-...' was not created by optuna-wpca (no space recorded)
    """
    attrs = study.user_attrs
    raw = attrs.get(_SPACE)
    if raw is None:
        raise ValueError(f"study {study.study_name!r} was not created by optuna-wpca (no space recorded)")
    proxies = attrs.get(_PROXY)
    if isinstance(proxies, str):
        proxies = proxies.split(",")
    batch = attrs.get(_BATCH)
    return SearchRecord(
        space=space_from_dict(raw),
        budget=Budget(attrs.get(_MAX_PARAMS), attrs.get(_MIN_PARAMS)),
        proxies=tuple(proxies) if proxies else None,
        batch=tuple(batch) if batch else None,
        ga=attrs.get(_GA),
        source_study=attrs.get(_SOURCE_STUDY),
        task=attrs.get(_TASK),
        reference=attrs.get(REFERENCE_ATTR),
        source=attrs.get(_SOURCE),
    )


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
        raise ValueError("top_trials needs a single-objective study; pick trials from study.best_trials instead")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if is_feasible(t)]
    done.sort(key=lambda t: t.value, reverse=study.direction == StudyDirection.MAXIMIZE)
    seen, out = set(), []
    for t in done:  # the same architecture scored twice is trained once
        key = tuple(sorted(t.params.items()))
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out[:k]
