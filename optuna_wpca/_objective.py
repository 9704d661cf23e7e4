"""The zero-cost objective: suggest an architecture, build it, score it, record what was seen."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Sequence

import optuna
import torch

from optuna_wpca._errors import InputError
from optuna_wpca import _attributes as attr
from optuna_wpca._budget import Budget
from optuna_wpca._claim import StudyClaim
from optuna_wpca._dashboard import save_study_note, upload_architecture
from optuna_wpca._memory import release_freed_memory
from optuna_wpca._record import SearchRecord, record_search
from optuna_wpca._text import TextBatch, text_batch
from optuna_wpca.proxies import (
    DEFAULT_ETA, DEFAULT_REFERENCE_SIZE, ReferenceSample, check_proxy_options, compute_parts, compute_proxy,
    draw_reference, get_proxy, missing_options,
)
from optuna_wpca.spaces import SearchSpace
from optuna_wpca._optuna_private import study_key

_logger = optuna.logging.get_logger("optuna.optuna_wpca.objective")


def _available(device: str | torch.device) -> torch.device:
    """``device`` as a torch device that exists here; a clear error before any study is touched."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise InputError(f"device {str(device)!r} is not a torch device: {err}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {str(device)!r} is not available: this torch sees no CUDA GPU")
    try:
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError) as err:
        raise InputError(f"device {str(device)!r} is not available: {str(err).splitlines()[0]}") from None
    return device


def _short(value: Any) -> Any:
    """A part as a short attribute: floats to 4 significant digits (a latency of 16.9772039999998 ms is
    stored as 16.98), other values as they are; the trial's value itself is never rounded."""
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
        return float(f"{value:.4g}")
    return value


def _check_batch(space: SearchSpace, batch: TextBatch) -> None:
    """Refuse a minibatch longer than the candidates' position table; warn about one too small for
    a meaningful PCA (a (tokens x width) matrix has rank below the token count)."""
    sequences, tokens = batch.shape
    limit = space.max_position_embeddings
    if tokens > limit:
        raise InputError(f"sequences of {tokens} tokens are longer than the space's max_position_embeddings "
                         f"({limit}); use a shorter --seq-len")
    widest = space.widest_ffn()
    if sequences * tokens < widest:
        _logger.warning(
            "the minibatch has %d tokens, fewer than the widest FFN (%d): PCA dims are capped by the token "
            "count and W-PCA ranks poorly; use at least %d tokens (batch size x sequence length)",
            sequences * tokens, widest, widest,
        )


class ZeroCostObjective:
    """A ``study.optimize`` objective that scores untrained candidates with zero-cost proxies.

    One proxy gives a single value; several (``proxies=("wpca", "latency")``) give a tuple for a
    multi-objective study. The trial's user attributes keep the parameter count, the per-layer
    PCA dimensions, each proxy's parts, the layer-by-layer architecture and the seconds taken.
    An architecture scored before by this objective (same seed) is not scored again.

    The parameter budget is the one the study records (given to :class:`~optuna_wpca.WPCASampler`,
    which records it), or ``max_params`` / ``min_params`` here when the sampler is another one; a
    budget given to both must agree. It is set as Optuna constraints (``trial.set_constraint``) and
    mirrored in the ``feasible`` user attribute; an over-budget candidate (possible only with a
    sampler that ignores the budget) is pruned before any model is built. ``min_params`` is the
    lower end of a band such as LiteTransformerSearch's 5M-12M. The first call also records the
    proxies and the minibatch shape in the study, so ``optuna-wpca show`` and ``export`` work on it.

    With an ``artifact_store`` (``optuna.artifacts.FileSystemArtifactStore(dir)``), each trial
    gets its architecture picture as an SVG artifact and its layer table as a dashboard note.

    A combination of proxies (``"vpca_params_saliency"``, or any ``"a+b"``) is scaled on a reference
    sample: on first sight of a study, ``reference_size`` architectures of the space that fit the
    budget are drawn with ``reference_seed``, scored by the combination's parts, and recorded in the
    study (``optuna_wpca.reference``); a resumed search reads that record back, so an architecture
    scores the same value in every run and worker. A study whose record was drawn with another size
    or seed is refused.

    Example:
        >>> import optuna, optuna_wpca
        >>> space = optuna_wpca.WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2)
        >>> objective = optuna_wpca.ZeroCostObjective(space, batch=optuna_wpca.text_batch(batch_size=4, seq_len=16))
        >>> study = optuna.create_study(direction="maximize")
        >>> study.optimize(objective, n_trials=2)
        >>> sorted(study.best_trial.user_attrs)[:3]
        ['architecture', 'cached', 'feasible']
    """

    #: Seconds between a claim on the reference sample and its read-back, and between looks of a
    #: worker waiting for another one's sample (see :meth:`reference`).
    claim_settle = 1.0
    claim_poll = 2.0

    def __init__(
        self,
        space: SearchSpace,
        proxy: str = "wpca",
        *,
        proxies: Sequence[str] | None = None,
        batch: TextBatch | None = None,
        device: str | torch.device = "cpu",
        seed: int = 0,
        max_params: float | None = None,
        min_params: float | None = None,
        budget: Budget | None = None,
        artifact_store: Any = None,
        reference_size: int = DEFAULT_REFERENCE_SIZE,
        reference_seed: int = 0,
        **proxy_options: Any,
    ) -> None:
        if not isinstance(space, SearchSpace):
            raise TypeError(f"ZeroCostObjective needs an optuna_wpca SearchSpace, got {type(space).__name__}")
        self.space = space
        self.proxies = tuple(proxies) if proxies else (proxy,)
        for name in self.proxies:
            get_proxy(name)  # fails early on an unknown name
        if budget is not None and (max_params is not None or min_params is not None):
            raise InputError("give the budget once: budget=Budget(...) or max_params/min_params, not both")
        self._budget = (budget if budget is not None else Budget(max_params, min_params)).check(space)
        check_proxy_options(proxy_options, self.proxies)
        for name in self.proxies:
            missing = missing_options(name, proxy_options)
            if missing:
                raise InputError(f"proxy {name!r} cannot score without {' and '.join(f'{o}=...' for o in missing)}; "
                                 f"give {'it' if len(missing) == 1 else 'them'} to ZeroCostObjective")
        self._parts = tuple(dict.fromkeys(p for name in self.proxies for p in get_proxy(name).parts))
        if self._parts and (isinstance(reference_size, bool) or not isinstance(reference_size, int)
                            or reference_size < 2):
            raise InputError(f"reference_size must be a whole number >= 2 (the architectures that set the scale of "
                             f"{', '.join(n for n in self.proxies if get_proxy(n).parts)}), got {reference_size!r}")
        self.reference_size = reference_size
        self.reference_seed = reference_seed
        self._references: dict[tuple[int, int] | None, ReferenceSample] = {}
        self.device = _available(device)
        self.seed = seed
        self.proxy_options = proxy_options
        self.artifact_store = artifact_store
        self._batch = batch
        if batch is not None:
            _check_batch(space, batch)
        self._cache: dict[Any, tuple[list[float], dict[str, Any]]] = {}
        self._study_budgets: dict[tuple[int, int], Budget] = {}
        self._lock = threading.Lock()

    @property
    def budget(self) -> Budget:
        """The budget given to this objective; the one in force is the study's (see ``read_search``)."""
        return self._budget

    def _study_budget(self, trial: optuna.trial.BaseTrial) -> Budget:
        """Record this search in the trial's study on first sight; the budget in force there."""
        study = getattr(trial, "study", None)
        if study is None:  # FixedTrial and friends: no study to read
            return self._budget
        key = study_key(study)
        budget = self._study_budgets.get(key)
        if budget is None:
            record = self.record(study)
            if self._parts:
                self._references[key] = self.reference(study, record.budget)
            budget = self._study_budgets[key] = record.budget
        return budget

    def record(self, study: optuna.Study, budget: Budget | None = None, *,
               ga: dict[str, Any] | None = None) -> SearchRecord:
        """Record what this objective scores with in ``study`` (space, budget, proxies, minibatch and
        where it came from, initialisation seed, eta, latency model; ``ga``: the sampler's settings),
        or check it against the study's record: a study searched otherwise is refused in one line
        and nothing is written. Writes the study's optuna-dashboard note. Called on the first trial
        of each study; the CLI calls it before the first trial."""
        self.check_reference(study)
        latency = self.proxy_options.get("latency_model")
        record = record_search(study, self.space, budget or self._budget, proxies=self.proxies, batch=self.batch,
                               init_seed=self.seed, eta=self.proxy_options.get("eta", DEFAULT_ETA),
                               latency_model=latency.to_dict() if latency is not None else None,
                               proxy_options=self.recorded_options(), ga=ga, directions=self.directions)
        save_study_note(study, record)
        return record

    def recorded_options(self) -> dict[str, Any]:
        """The proxy options recorded in the study besides eta and the latency model (which have their
        own places): every one given that differs from the proxy's default, so that a resume with
        another ``reduce``, ``eta_mobilebert``, ``count`` or ``seed`` is refused instead of mixing
        scores; a value that is no JSON type (a supernet object, say) is recorded by its text."""
        defaults: dict[str, Any] = {}
        for name in self.proxies:
            for option, value in get_proxy(name).option_defaults.items():
                defaults.setdefault(option, value)
        out = {}
        for key, value in self.proxy_options.items():
            if key in ("eta", "latency_model") or (key in defaults and defaults[key] == value):
                continue  # eta and the latency model have their own places; a default is no choice
            try:
                json.dumps(value)
                out[key] = value
            except TypeError:
                out[key] = str(value)
        return out

    def check_reference(self, study: optuna.Study) -> None:
        """Refuse, before anything is written, a study whose reference sample was drawn otherwise."""
        raw = study.user_attrs.get(attr.REFERENCE)
        if not self._parts or raw is None:
            return
        size, seed, parts = raw.get("size"), raw.get("seed"), set(raw.get("values", {}))
        if size != self.reference_size or seed != self.reference_seed or not set(self._parts) <= parts:
            raise InputError(
                f"study {study.study_name!r} records a reference sample of {size} architectures drawn with seed "
                f"{seed} ({', '.join(sorted(parts))}), not {self.reference_size} with seed {self.reference_seed} "
                f"({', '.join(self._parts)}); use another study name or the recorded settings")

    def reference(self, study: optuna.Study | None = None, budget: Budget | None = None,
                  progress: Any = None, waiting: Any = None) -> ReferenceSample:
        """The reference sample that scales this objective's combinations: the one ``study`` records,
        else a new draw (recorded in ``study`` when given; ``progress`` is called after each scored
        architecture).

        Of several workers that start one new study together, one scores the sample and the others
        wait for it (a :class:`~optuna_wpca._claim.StudyClaim`); ``waiting(done, total)`` is called
        while they do, with the scoring worker's progress.
        """
        if study is not None and study.user_attrs.get(attr.REFERENCE) is not None:
            self.check_reference(study)
            return ReferenceSample.from_dict(study.user_attrs[attr.REFERENCE])
        if study is None and None in self._references:
            return self._references[None]
        if study is not None:
            claim = StudyClaim(study, attr.REFERENCE_CLAIM, settle=self.claim_settle)
            while not claim.acquire(self.reference_size):
                time.sleep(self.claim_poll)
                if study.user_attrs.get(attr.REFERENCE) is not None:
                    return self.reference(study)
                if waiting is not None:
                    waiting(*(claim.progress() or (0, self.reference_size)))
            if study.user_attrs.get(attr.REFERENCE) is not None:  # written while this worker claimed
                claim.release()
                return self.reference(study)
        budget = budget or self._budget
        _logger.info("scoring a reference sample of %d architectures (%s) to scale %s", self.reference_size,
                     ", ".join(self._parts), ", ".join(self.proxies))
        scored = 0

        def score_parts(arch: Any) -> dict[str, float]:
            nonlocal scored
            model = self.space.build(arch, seed=self.seed, device=self.device)
            out = {p: r.value for p, r in compute_parts(self._parts, model, self.batch, **self.proxy_options).items()}
            del model
            release_freed_memory()
            scored += 1
            if study is not None:
                claim.refresh(scored, self.reference_size)
            return out

        try:
            reference = draw_reference(self._parts, self.space.sample, score_parts, size=self.reference_size,
                                       seed=self.reference_seed,
                                       fits=lambda a: budget.contains(self.space.num_params(a)),
                                       to_params=self.space.to_params, progress=progress)
            if study is None:
                self._references[None] = reference
            else:
                study.set_user_attr(attr.REFERENCE, reference.to_dict())
        finally:
            if study is not None:
                claim.release()
        return reference

    @property
    def needs_reference(self) -> bool:
        """Whether a proxy of this objective is a combination (scaled on a reference sample)."""
        return bool(self._parts)

    @property
    def directions(self) -> list[str]:
        """The study directions these proxies need (``latency`` and ``peak_memory`` are minimised)."""
        return [get_proxy(name).direction for name in self.proxies]

    @property
    def batch(self) -> TextBatch:
        """The minibatch every candidate is scored on (the default one made at first use), on the
        objective's device."""
        with self._lock:
            if self._batch is None:
                self._batch = text_batch()
            if self._batch.input_ids.device != self.device:
                self._batch = self._batch.to(self.device)
            return self._batch

    def score(self, arch: Any, reference: ReferenceSample | None = None) -> tuple[list[float], dict[str, Any]]:
        """Proxy values and parts of one architecture (cached); a combination is scaled on ``reference``
        (default: this objective's own draw, see :meth:`reference`)."""
        if self._parts and reference is None:
            reference = self.reference()
        key = (arch, self.seed, None if reference is None else (reference.seed, reference.size,
                                                                  tuple(reference.values[self._parts[0]])))
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        start = time.perf_counter()
        values, parts = self._compute(arch, reference)
        release_freed_memory()  # the candidate's model and activations are gone: hand their pages back
        parts[attr.SECONDS] = time.perf_counter() - start
        with self._lock:
            self._cache[key] = (values, {**parts, attr.CACHED: True})
        return values, parts

    def _compute(self, arch: Any, reference: ReferenceSample | None) -> tuple[list[float], dict[str, Any]]:
        model = self.space.build(arch, seed=self.seed, device=self.device)
        values, parts = [], {}
        options = {**self.proxy_options, **({"reference": reference} if reference is not None else {})}
        for name in self.proxies:
            result = compute_proxy(name, model, self.batch, **(options if get_proxy(name).parts
                                                               else self.proxy_options))
            values.append(result.value)
            parts[name] = result.parts
        return values, parts

    def __call__(self, trial: optuna.Trial) -> float | list[float]:
        budget = self._study_budget(trial)
        arch = self.space.suggest(trial)
        n = self.space.num_params(arch)
        trial.set_user_attr(attr.NUM_PARAMS, n)
        trial.set_user_attr(attr.ARCHITECTURE, self.space.summary(arch))
        for name, value in budget.constraints(n).items():
            trial.set_constraint(name, value)
        feasible = budget.contains(n)
        trial.set_user_attr(attr.FEASIBLE, feasible)
        if not feasible:
            raise optuna.TrialPruned(budget.violation(n))
        study = getattr(trial, "study", None)
        # The study's recorded sample; without a study, score() falls back to this objective's own draw.
        reference = self._references.get(study_key(study)) if study is not None else None
        values, parts = self.score(arch, reference)
        cached = parts.get(attr.CACHED, False)
        trial.set_user_attr(attr.CACHED, cached)
        trial.set_user_attr(attr.SECONDS, 0.0 if cached else round(parts[attr.SECONDS], 3))
        for name in self.proxies:
            for key, value in parts[name].items():
                if key == attr.BYPRODUCTS:
                    continue
                trial.set_user_attr(f"{name}.{key}" if key != attr.PCA_DIMS else attr.PCA_DIMS, _short(value))
        if self.artifact_store is not None:
            details = {f"{name}: {key}": _short(value) for name in self.proxies if get_proxy(name).parts
                       for key, value in parts[name].items() if key not in (attr.PCA_DIMS, attr.NUM_PARAMS)}
            upload_architecture(trial, self.space, arch, self.artifact_store,
                                values={**{get_proxy(n).label: v for n, v in zip(self.proxies, values)}, **details})
        return values[0] if len(values) == 1 else values
