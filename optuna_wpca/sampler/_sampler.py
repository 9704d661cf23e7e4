"""The W-PCA paper's genetic algorithm as an Optuna sampler, on Optuna's GA machinery."""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseGASampler, RandomSampler
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from optuna_wpca import _attributes as attr
from optuna_wpca._errors import InputError
from optuna_wpca._budget import Budget
from optuna_wpca._record import record_search, recorded_budget
from optuna_wpca._selection import is_feasible
from optuna_wpca.sampler._elite import elite_population
from optuna_wpca.sampler._operators import (
    DEFAULT_OPERATORS, OPERATORS, fill_budget, has_fine_genes, mutate, mutate_ordinal, uniform_crossover,
)
from optuna_wpca.spaces import SearchSpace
from optuna_wpca.spaces._genes import holds, values_of
from optuna_wpca._optuna_private import storage_of, study_key, trial_id_of

_logger = optuna.logging.get_logger("optuna.optuna_wpca.sampler")


def default_operators(space: SearchSpace) -> str:
    """The operators a new search on ``space`` gets when none are given: :data:`DEFAULT_OPERATORS` on a
    space with fine genes, ``"paper"`` on one without (where every set is the paper's, draw for draw,
    so the study records the paper's GA by its name).

    Example:
        >>> import optuna_wpca
        >>> default_operators(optuna_wpca.WPCASpace()), default_operators(optuna_wpca.DecoderSpace.lts_gpt2())
        ('paper', 'boundary')
    """
    return DEFAULT_OPERATORS if has_fine_genes(space.distributions()) else "paper"


class WPCASampler(BaseGASampler):
    """The genetic algorithm of the W-PCA paper (Appendix E) over a :class:`SearchSpace`.

    Generation 0 is ``population_size`` random candidates within the budget. Each later child
    takes two parents drawn uniformly at random from the best ``parent_pool`` feasible trials
    (the current generation plus the previous parents: elitist), mixes them gene by gene
    (uniform crossover, applied with ``crossover_prob``), then moves each gene to another of its
    values with probability ``mutation_prob``. With several objectives, the parent pool is the
    NSGA-II elite (non-domination rank, then crowding distance) of size ``population_size``.

    The budget is checked analytically before a candidate is proposed (``space.num_params``),
    so no model is ever built for an infeasible one. It is given once: the sampler records the
    space and budget in the study the first time it sees it (see :func:`optuna_wpca.record_search`),
    and :class:`~optuna_wpca.ZeroCostObjective` reads them from there; a budget given only to the
    objective is read back by the sampler the same way. Generations live in trial system
    attributes (Optuna's :class:`~optuna.samplers.BaseGASampler`), so several workers share one
    search and a stopped study resumes where it was.

    Args:
        space: the search space (its distributions are the genome).
        max_params: parameter budget under ``space``'s counting convention; ``None`` for none.
        min_params: lower bound of a parameter band (LiteTransformerSearch: 5M-12M); ``None`` for none.
        budget: both bounds as one :class:`~optuna_wpca.Budget` (instead of ``max_params``/``min_params``).
        population_size: individuals per generation (paper: 50).
        n_generations: generations of a full run (paper: 40); see :attr:`n_trials`.
        parent_pool: parents are drawn from this many best trials (paper: 10).
        crossover_prob: probability of crossover for a child (paper: 1).
        swapping_prob: per-gene probability of taking the second parent's gene (paper: 0.5).
        mutation_prob: per-gene probability of mutation (paper: 0.1).
        operators: ``"paper"`` (the paper's: a mutated gene takes a uniformly drawn other value),
            ``"ordinal"`` (an ordered gene steps a few positions along its values, the steps
            shrinking over the generations; see :func:`optuna_wpca.sampler._operators.mutate_ordinal`)
            or ``"boundary"`` (ordinal steps; and in a single-objective search under a ``max_params``
            budget, half the children have one fine gene raised until the child sits on the
            budget's boundary, where capacity-rewarding objectives such as W-PCA have their best;
            see :func:`optuna_wpca.sampler._operators.fill_budget`). Steps and raises apply to fine
            genes, ordered ones of at least 10 values (FFN widths, depth); the others are redrawn as
            in the paper, so on a space without fine genes (W-PCA's) all three are the paper's.
            ``None`` (default): a study that recorded operators keeps them when resumed, a new one
            gets :func:`default_operators` (``"boundary"`` on a space with fine genes, chosen by the
            anytime curves in docs/benchmarks.md; ``"paper"`` on W-PCA's spaces, the same search).
        seed: random seed; each trial's draws come from the seed and the trial's number, so a
            stopped search resumed with the same seed proposes what an uninterrupted one would.

    Example:
        >>> import optuna, optuna_wpca
        >>> space = optuna_wpca.WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2)
        >>> sampler = optuna_wpca.WPCASampler(space, population_size=4, seed=0)
        >>> study = optuna.create_study(sampler=sampler)
        >>> study.optimize(lambda t: space.num_params(space.suggest(t)), n_trials=8)
        >>> len(study.trials)
        8
    """

    def __init__(
        self,
        space: SearchSpace,
        *,
        max_params: float | None = None,
        min_params: float | None = None,
        budget: Budget | None = None,
        population_size: int = 50,
        n_generations: int = 40,
        parent_pool: int = 10,
        crossover_prob: float = 1.0,
        swapping_prob: float = 0.5,
        mutation_prob: float = 0.1,
        operators: str | None = None,
        max_tries: int = 1000,
        seed: int | None = None,
    ) -> None:
        if not isinstance(space, SearchSpace):
            raise TypeError(
                f"WPCASampler needs an optuna_wpca SearchSpace (WPCASpace, FlexiBERTSpace, ...), "
                f"got {type(space).__name__}"
            )
        if population_size < 2:
            raise InputError(f"population_size must be >= 2, got {population_size}")
        if n_generations < 1:
            raise InputError(f"n_generations must be >= 1, got {n_generations}")
        if not 1 <= parent_pool:
            raise InputError(f"parent_pool must be >= 1, got {parent_pool}")
        for name, p in (("crossover_prob", crossover_prob), ("swapping_prob", swapping_prob),
                        ("mutation_prob", mutation_prob)):
            if not 0.0 <= p <= 1.0:
                raise InputError(f"{name} must lie in [0, 1], got {p}")
        if budget is not None and (max_params is not None or min_params is not None):
            raise InputError("give the budget once: budget=Budget(...) or max_params/min_params, not both")
        if operators is not None and operators not in OPERATORS:
            raise InputError(f"operators must be one of {', '.join(OPERATORS)}, got {operators!r}")
        self._operators_given = operators
        self._budget = (budget if budget is not None else Budget(max_params, min_params)).check(space)
        super().__init__(population_size=population_size)
        self.space = space
        self.n_generations = n_generations
        self.parent_pool = parent_pool
        self.crossover_prob = crossover_prob
        self.swapping_prob = swapping_prob
        self.mutation_prob = mutation_prob
        self.max_tries = max_tries
        # Each trial's draws come from (seed, trial number): a stopped search resumed with the same seed
        # proposes what the uninterrupted one would have.
        self._seed = int(seed) if seed is not None else int(np.random.SeedSequence().generate_state(1)[0])
        self._random = RandomSampler(seed=seed)
        self._distributions = space.distributions()
        self._has_fine_genes = has_fine_genes(self._distributions)
        self.operators = operators if operators is not None else default_operators(space)
        self._study_budgets: dict[tuple[int, int], Budget] = {}
        self._recorded: set[tuple[int, int]] = set()

    @property
    def n_trials(self) -> int:
        """Trials of a full run: ``population_size x n_generations`` (paper: 2,000)."""
        return int(self.population_size or 0) * self.n_generations

    def reseed_rng(self) -> None:
        self._seed = int(np.random.SeedSequence().generate_state(1)[0])
        self._random.reseed_rng()

    def __getstate__(self) -> dict[str, Any]:
        # Optuna's BaseGASampler keeps a thread lock, which does not pickle; a copy gets its own.
        state = self.__dict__.copy()
        state.pop("_thread_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._thread_lock = threading.Lock()

    @property
    def settings(self) -> dict[str, Any]:
        """What shapes the search, recorded in the study (a rerun with other values is refused);
        ``n_generations`` is left out, since running more generations extends the same search."""
        settings = {"population_size": self.population_size, "parent_pool": self.parent_pool,
                    "crossover_prob": self.crossover_prob, "swapping_prob": self.swapping_prob,
                    "mutation_prob": self.mutation_prob}
        if self.operators != "paper":  # studies recorded before the choice existed hold the paper's
            settings["operators"] = self.operators
        return settings

    @property
    def budget(self) -> Budget:
        """The budget given to this sampler; the one in force is the study's (see ``read_search``)."""
        return self._budget

    def _fits(self, params: dict[str, Any], budget: Budget) -> bool:
        if not budget.is_set:
            return True
        return budget.contains(self.space.num_params(self.space.from_params(params)))

    def _study_budget(self, study: Study) -> Budget:
        """Record this search in ``study`` on first sight; the budget in force there."""
        key = study_key(study)
        budget = self._study_budgets.get(key)
        if budget is None:
            if key not in self._recorded:
                if self._operators_given is None and attr.GA in study.user_attrs:  # a resumed search keeps its own
                    self.operators = study.user_attrs[attr.GA].get("operators", "paper")
                budget = record_search(study, self.space, self._budget, ga=self.settings).budget
                self._recorded.add(key)
            else:  # no budget yet: the objective may record one
                budget = recorded_budget(study)
            if budget.is_set:
                self._study_budgets[key] = budget
        return budget

    # -- Optuna sampler interface -----------------------------------------------------------------

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return dict(self._distributions)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        """Genes of the space that ``search_space`` asks for, from the GA (a child of two parents,
        or a random feasible candidate in generation 0); any other parameter it asks for at random.

        A gene left out of ``search_space`` (``PartialFixedSampler`` fixing it, say) is not returned.
        """
        if not search_space:
            return {}
        genes = [n for n, d in search_space.items() if self._distributions.get(n) == d]
        params: dict[str, Any] = {}
        if genes:
            genome = self._propose(study, trial)
            params.update((n, genome[n]) for n in genes)
        for name, distribution in search_space.items():
            if name not in params:
                params[name] = self._random.sample_independent(study, trial, name, distribution)
        return params

    def _propose(self, study: Study, trial: FrozenTrial) -> dict[str, Any]:
        budget = self._study_budget(study)
        generation = self.get_trial_generation(study, trial)
        parents = self.get_parent_population(study, generation) if generation > 0 else []
        rng = np.random.RandomState([self._seed, trial.number])
        if not parents:
            return self._random_feasible(budget, rng)
        fill = (self.operators == "boundary" and budget.max_params is not None and len(study.directions) == 1
                and self._has_fine_genes)
        for _ in range(self.max_tries):
            child = self._child(parents, rng, generation / self.n_generations)
            if self._fits(child, budget):
                if fill and rng.rand() < 0.5:
                    child = fill_budget(child, self._distributions, lambda p: self._fits(p, budget), self._size, rng)
                return child
        _logger.warning("no feasible child in %d tries; drawing a random feasible candidate", self.max_tries)
        return self._random_feasible(budget, rng)

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        # Only parameters outside the space reach here (e.g. a user's extra hyperparameter).
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def select_parent(self, study: Study, generation: int) -> list[FrozenTrial]:
        pool = self.get_population(study, generation - 1) + self.get_parent_population(study, generation - 1)
        unique = {
            t.number: t
            for t in pool
            if t.state == TrialState.COMPLETE and is_feasible(t) and self._in_space(t)
        }
        candidates = list(unique.values())
        if len(study.directions) == 1:
            reverse = study.direction == StudyDirection.MAXIMIZE
            candidates.sort(key=lambda t: t.value, reverse=reverse)
            return candidates[: self.parent_pool]
        if len(candidates) < 2:
            return candidates
        return elite_population(candidates, study.directions, int(self.population_size or 2))

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        try:
            self._study_budget(study)
        except ValueError:
            # A study recorded with another search: the trial just created must not stay RUNNING.
            storage_of(study).set_trial_state_values(trial_id_of(trial), TrialState.FAIL)
            raise
        self._random.before_trial(study, trial)

    def after_trial(
        self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        self._random.after_trial(study, trial, state, values)

    # -- helpers ---------------------------------------------------------------------------------

    def _in_space(self, trial: FrozenTrial) -> bool:
        """Whether ``trial`` carries a genome of this space (a study may hold other trials too)."""
        return all(
            name in trial.params and holds(dist, trial.params[name]) for name, dist in self._distributions.items()
        )

    def _size(self, params: dict[str, Any]) -> int:
        return self.space.num_params(self.space.from_params(params))

    def _child(self, parents: list[FrozenTrial], rng: np.random.RandomState, progress: float = 0.0) -> dict[str, Any]:
        if len(parents) == 1:
            first = second = parents[0]
        else:
            i, j = rng.choice(len(parents), size=2, replace=False)
            first, second = parents[i], parents[j]
        a = {n: first.params[n] for n in self._distributions}
        b = {n: second.params[n] for n in self._distributions}
        child = uniform_crossover(a, b, rng, self.swapping_prob) if rng.rand() < self.crossover_prob else a
        if self.operators in ("ordinal", "boundary"):
            return mutate_ordinal(child, self._distributions, rng, self.mutation_prob, progress)
        return mutate(child, self._distributions, rng, self.mutation_prob)

    def _random_params(self, rng: np.random.RandomState) -> dict[str, Any]:
        params = {}
        for name, dist in self._distributions.items():
            values = values_of(dist)
            params[name] = values[rng.randint(len(values))]
        return params

    def _random_feasible(self, budget: Budget, rng: np.random.RandomState) -> dict[str, Any]:
        for _ in range(self.max_tries):
            params = self._random_params(rng)
            if self._fits(params, budget):
                return params
        # Tight budgets: shrink a random candidate gene by gene towards the cheapest choice.
        params = self._random_params(rng)
        smallest = self.space.to_params(self.space._smallest_candidates()[0])
        for name in rng.permutation(list(self._distributions)):
            if self._fits(params, budget):
                break
            params[name] = smallest[name]
        if not self._fits(params, budget):
            params = smallest
        return params
