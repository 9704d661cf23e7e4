"""A study's search record: what the study was searched with, written and read in one place.

The sampler and the objective record the search (space, budget, proxies and their options, the
minibatch and where it came from, the initialisation seed, GA settings) in the study's user
attributes the first time they see it; every command reads it back as one :class:`SearchRecord`.
So a study made in Python works with every ``optuna-wpca`` command, the budget is given once, and
a resumed search with other settings is refused in one line instead of mixing two searches.

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
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from optuna_wpca._errors import InputError
from optuna_wpca import _attributes as attr
from optuna_wpca._budget import Budget
from optuna_wpca._text import BUNDLED_CORPUS, BUNDLED_TOKENIZER, MinibatchSpec, TextBatch
from optuna_wpca.spaces import SearchSpace, space_from_dict

_logger = optuna.logging.get_logger("optuna.optuna_wpca.record")


@dataclass(frozen=True)
class SearchRecord:
    """What a study was searched with, as recorded in its user attributes.

    Attributes:
        space: the search space.
        budget: the parameter budget (unset when none was given).
        proxies: the proxies, in the order of the study's values.
        batch: the minibatch's shape ``(sequences, tokens)``.
        minibatch: where the minibatch came from, enough to cut it again (``None`` for a batch made
            by hand, or a study recorded before 0.3).
        init_seed: the seed that initialised every candidate.
        eta: the PCA proxies' explained-variance threshold.
        proxy_options: every other option the proxies scored with (``reduce``, ``eta_mobilebert``,
            ``count``, ...), empty when they kept their defaults.
        latency_model: the latency model of ``predicted_latency`` (``LatencyModel.to_dict()``).
        ga: WPCASampler's settings (population, parent pool, operator probabilities).
        reference: the reference sample of a combined objective (``ReferenceSample.to_dict()``).
        source_study: a distillation study's zero-cost study.
        task: a distillation study's task.
    """

    space: SearchSpace
    budget: Budget
    proxies: tuple[str, ...] | None = None
    batch: tuple[int, int] | None = None
    minibatch: MinibatchSpec | None = None
    init_seed: int | None = None
    eta: float | None = None
    proxy_options: dict[str, Any] = field(default_factory=dict)
    latency_model: dict[str, Any] | None = None
    ga: dict[str, Any] | None = None
    reference: dict[str, Any] | None = None
    source_study: str | None = None
    task: str | None = None

    def scoring_batch(self) -> TextBatch:
        """The study's own minibatch, cut again from the recorded corpus; a clear error when it cannot be."""
        if self.minibatch is None:
            shape = f" ({self.batch[0]} x {self.batch[1]})" if self.batch else ""
            raise InputError(f"the study records its minibatch's shape{shape} but not where it came from (a batch "
                             "made by hand, or a study searched before optuna-wpca 0.3), so it cannot be cut again; "
                             "score in Python with the same batch")
        return self.minibatch.build()

    def objective_settings(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~optuna_wpca.ZeroCostObjective` that score as this study did
        (proxies, initialisation seed, eta, latency model, reference sample's size and seed)."""
        out: dict[str, Any] = {"proxies": self.proxies or ("wpca",)}
        if self.init_seed is not None:
            out["seed"] = self.init_seed
        if self.eta is not None:
            out["eta"] = self.eta
        out.update(self.proxy_options)
        if self.latency_model is not None:
            from optuna_wpca.proxies import LatencyModel

            out["latency_model"] = LatencyModel.from_dict(self.latency_model)
        if self.reference:
            out["reference_size"], out["reference_seed"] = self.reference["size"], self.reference["seed"]
        return out


def _source_attr(minibatch: MinibatchSpec | None, init_seed: int | None, eta: float | None,
                 latency_model: dict[str, Any] | None, options: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The stored form of where the minibatch came from and the settings that change a value."""
    if minibatch is None and init_seed is None and eta is None and latency_model is None and not options:
        return None
    out: dict[str, Any] = {}
    if minibatch is not None:
        out["corpus"] = minibatch.corpus or BUNDLED_CORPUS
        if minibatch.corpus is not None:
            out["corpus_sha256"] = minibatch.corpus_sha256
        out["tokenizer"] = minibatch.tokenizer or BUNDLED_TOKENIZER
        out["batch_seed"] = minibatch.seed
    if init_seed is not None:
        out["init_seed"] = init_seed
    if eta is not None:
        out["eta"] = eta
    if options:  # only when set: a study recorded before options were recorded kept the defaults
        out["options"] = dict(sorted(options.items()))
    if latency_model is not None:
        out["latency_model"] = latency_model
    return json.loads(json.dumps(out))  # as it reads back


def _minibatch_from(source: dict[str, Any] | None, batch: Sequence[int] | None) -> MinibatchSpec | None:
    if not source or batch is None or "batch_seed" not in source:
        return None
    corpus = source.get("corpus")
    tokenizer = source.get("tokenizer")
    return MinibatchSpec(int(batch[0]), int(batch[1]), int(source["batch_seed"]),
                         None if corpus == BUNDLED_CORPUS else corpus, source.get("corpus_sha256"),
                         None if tokenizer == BUNDLED_TOKENIZER else tokenizer)


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "x".join(map(str, value)) if all(isinstance(v, int) for v in value) else ",".join(map(str, value))
    return str(value)


def _refusal(study: optuna.Study, what: str, recorded: Any, given: Any) -> InputError:
    if isinstance(recorded, dict) and isinstance(given, dict):
        changed = ", ".join(f"{k} {recorded.get(k)!r} -> {given.get(k)!r}" for k in sorted(set(given) | set(recorded))
                            if recorded.get(k) != given.get(k))
        return InputError(f"study {study.study_name!r} was searched with other {what} ({changed}); "
                          "use another study name, or the recorded settings")
    return InputError(f"study {study.study_name!r} was searched with the {what} {_shown(recorded)}, not "
                      f"{_shown(given)}; use another study name, or leave the argument out to reuse the recorded one")


def _check_space(study: optuna.Study, space: SearchSpace, recorded: dict[str, Any] | None) -> bool:
    """Refuse a study searched over another space, or whose trials encode the genes otherwise (integer or
    categorical); whether the recorded space is to be rewritten (it differs only by that encoding, and
    the trials, if any, agree with ``space``)."""
    given = space.to_dict()
    # Running or waiting trials may be this search's own, being started now: only finished ones are read.
    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL))
    if recorded is None:
        # Finished trials must carry this space's genome (a study searched before the search was recorded).
        genes = set(space.distributions())
        foreign = [t for t in finished if t.state != TrialState.FAIL and not genes <= set(t.params)]
        if foreign:
            raise InputError(f"study {study.study_name!r} already holds {len(foreign)} trials not made by "
                             "optuna-wpca over this space; use another study name")
    elif _but_genes(recorded) != _but_genes(given):
        raise InputError(f"study {study.study_name!r} was searched over a different space "
                         f"({recorded.get('type')}); use another study name")
    _check_gene_kinds(study, space, finished)
    return recorded is not None and recorded != given


def _but_genes(space: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in space.items() if k != "integer_genes"}


def _check_gene_kinds(study: optuna.Study, space: SearchSpace, trials: Sequence[FrozenTrial]) -> None:
    """A study's trials and ``space`` must give each gene the same kind of distribution: Optuna refuses
    a parameter that changes kind, and a sampler would no longer see the earlier trials' genes."""
    dists = space.distributions()
    for trial in trials:
        for name, dist in dists.items():
            held = trial.distributions.get(name)
            if held is not None and type(held) is not type(dist):
                old = "categorical" if isinstance(held, CategoricalDistribution) else "integer"
                flag = "integer_genes=False (CLI: --categorical-genes)" if old == "categorical" else \
                    "integer_genes=True (the default)"
                raise InputError(f"study {study.study_name!r} holds trials whose gene {name} is {old} (searched "
                                 f"{'before 0.3' if old == 'categorical' else 'with integer genes'}); resume it "
                                 f"with {flag}, or use another study name")
        if any(name in trial.distributions for name in dists):
            return  # one trial with genes tells the study's encoding


def record_search(
    study: optuna.Study,
    space: SearchSpace,
    budget: Budget | None = None,
    *,
    proxies: Sequence[str] | None = None,
    batch: TextBatch | MinibatchSpec | Sequence[int] | None = None,
    init_seed: int | None = None,
    eta: float | None = None,
    latency_model: dict[str, Any] | None = None,
    proxy_options: dict[str, Any] | None = None,
    ga: dict[str, Any] | None = None,
    directions: Sequence[str] | None = None,
) -> SearchRecord:
    """Record the search in ``study``, or check it against what the study already records; return
    the record after the merge.

    A value already recorded wins over a missing one (so the budget is given once, to the sampler
    or to the objective); a different value is refused with one line and nothing is written, since
    a study holds one search. A study that holds trials but no record was not made by optuna-wpca and
    is refused too.

    Args:
        study: the study.
        space: its search space.
        budget: the parameter budget (checked against ``space``).
        proxies: the proxies, in the order of the study's values.
        batch: the minibatch (a :class:`TextBatch` from :func:`~optuna_wpca.text_batch` records
            where it came from), its :class:`MinibatchSpec`, or only its shape.
        init_seed: the seed that initialises every candidate.
        eta: the PCA proxies' threshold.
        proxy_options: the proxies' other options that change a value (JSON types), compared on resume.
        latency_model: ``LatencyModel.to_dict()`` of a ``predicted_latency`` search.
        ga: the sampler's settings.
        directions: the directions the proxies need (``"maximize"``/``"minimize"``), checked
            against the study's.
    """
    attrs = study.user_attrs
    rewrite = _check_space(study, space, attrs.get(attr.SPACE))
    writes: dict[str, Any] = {}
    if attr.SPACE not in attrs or rewrite:
        writes[attr.SPACE] = space.to_dict()

    old_budget = Budget(attrs.get(attr.MAX_PARAMS), attrs.get(attr.MIN_PARAMS))
    if budget is not None and budget.is_set:
        budget.check(space)
        if old_budget.is_set and old_budget != budget:
            raise _refusal(study, "budget", old_budget.describe(), budget.describe())
        if not old_budget.is_set:
            writes[attr.MAX_PARAMS], writes[attr.MIN_PARAMS] = budget.max_params, budget.min_params

    spec = batch.source if isinstance(batch, TextBatch) else batch if isinstance(batch, MinibatchSpec) else None
    shape = (batch.shape if isinstance(batch, TextBatch) else (batch.batch_size, batch.seq_len)
             if isinstance(batch, MinibatchSpec) else batch)
    given = {
        attr.PROXIES: ("proxies", ",".join(proxies) if proxies is not None else None),
        attr.BATCH: ("minibatch", [int(b) for b in shape] if shape is not None else None),
        attr.MINIBATCH_SOURCE: ("minibatch source or seeds", _source_attr(spec, init_seed, eta, latency_model,
                                                                                 proxy_options)),
        attr.GA: ("GA settings", json.loads(json.dumps(ga)) if ga is not None else None),
    }
    for key, (what, value) in given.items():
        if value is None:
            continue
        old = attrs.get(key)
        if old is None:
            writes[key] = value
        elif key == attr.PROXIES and old != value:
            raise _refusal(study, what, old.split(","), value.split(","))
        elif old != value:
            raise _refusal(study, what, old, value)
    have = [d.name.lower() for d in study.directions]
    if directions is not None and have != list(directions):
        pairs = ", ".join(f"{p} ({d})" for p, d in zip(proxies or (), directions))
        raise InputError(f"study {study.study_name!r} has directions {have}, but the proxies want {pairs}; "
                         f"create it with directions={list(directions)}")

    for key, value in writes.items():
        study.set_user_attr(key, value)
    if attr.PROXIES in writes:
        _name_the_objectives(study, list(proxies or []))
    if writes:
        _logger.debug("recorded %s in study %r", ", ".join(writes), study.study_name)
    return _read(study, {**attrs, **writes}, space)  # what the study now holds, without reading it back


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
    study.set_user_attr(attr.SPACE, space.to_dict())
    study.set_user_attr(attr.SOURCE_STUDY, source_study)
    study.set_user_attr(attr.TASK, task)


def read_search(study: optuna.Study) -> SearchRecord:
    """The search recorded in ``study``; a clear error for a study optuna-wpca did not make.

    Example:
        >>> import optuna
        >>> read_search(optuna.create_study())
        Traceback (most recent call last):
        ...
        optuna_wpca._errors.InputError: study 'no-name-...' was not created by optuna-wpca (no space recorded)
    """
    attrs = study.user_attrs
    raw = attrs.get(attr.SPACE)
    if raw is None:
        raise InputError(f"study {study.study_name!r} was not created by optuna-wpca (no space recorded)")
    return _read(study, attrs, space_from_dict(raw))


def _read(study: optuna.Study, attrs: dict[str, Any], space: SearchSpace) -> SearchRecord:
    proxies = attrs.get(attr.PROXIES)
    batch = attrs.get(attr.BATCH)
    source = attrs.get(attr.MINIBATCH_SOURCE) or {}
    latency = source.get("latency_model")
    if latency is not None and "coefficients" not in latency:  # recorded by 0.2: the coefficients only
        latency = {"coefficients": latency, "device": "not recorded"}
    return SearchRecord(
        space=space,
        budget=Budget(attrs.get(attr.MAX_PARAMS), attrs.get(attr.MIN_PARAMS)),
        proxies=tuple(proxies.split(",")) if proxies else None,
        batch=tuple(batch) if batch else None,
        minibatch=_minibatch_from(source, batch),
        init_seed=source.get("init_seed"),
        eta=source.get("eta"),
        proxy_options=dict(source.get("options") or {}),
        latency_model=latency,
        ga=attrs.get(attr.GA),
        reference=attrs.get(attr.REFERENCE),
        source_study=attrs.get(attr.SOURCE_STUDY),
        task=attrs.get(attr.TASK),
    )


def recorded_budget(study: optuna.Study) -> Budget:
    """The budget recorded in ``study`` (unset when none is), without reading the rest of the record."""
    attrs = study.user_attrs
    return Budget(attrs.get(attr.MAX_PARAMS), attrs.get(attr.MIN_PARAMS))
