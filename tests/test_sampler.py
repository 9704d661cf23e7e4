import collections
import subprocess
import sys
import textwrap

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

from optuna_wpca import WPCASampler, WPCASpace, ZeroCostObjective, text_batch
from optuna_wpca.sampler import mutate, uniform_crossover
from optuna_wpca.spaces._genes import values_of

optuna.logging.set_verbosity(optuna.logging.WARNING)

TINY = dict(num_layers=4, hidden_size=64, bert_heads=4, mobilebert_heads=2)
DECODER = dict(num_layers_choices=(2, 3), hidden_sizes=(64, 128), heads=(2, 4), ffn_sizes=tuple(range(64, 513)))


def tiny_space():
    return WPCASpace(**TINY)


def size_objective(space):
    """A cheap deterministic objective: the parameter count (what a budget must cap)."""

    def objective(trial):
        arch = space.suggest(trial)
        return float(space.num_params(arch))

    return objective


def test_uniform_crossover_takes_every_gene_from_a_parent_half_and_half():
    rng = np.random.RandomState(0)
    a = {f"g{i}": 0 for i in range(1000)}
    b = {f"g{i}": 1 for i in range(1000)}
    child = uniform_crossover(a, b, rng)
    assert set(child.values()) <= {0, 1}
    assert 0.45 < sum(child.values()) / 1000 < 0.55


def test_mutation_rate_and_always_to_another_value():
    space = WPCASpace(num_layers=12)
    dists = space.distributions()
    rng = np.random.RandomState(1)
    base = space.to_params(space.sample(0))
    changed = total = 0
    for _ in range(500):
        child = mutate(base, dists, rng, 0.1)
        for name in base:
            total += 1
            changed += child[name] != base[name]
            assert child[name] in values_of(dists[name])
    assert 0.09 < changed / total < 0.11
    # never a no-op "mutation": every draw that fires changes the gene
    rng = np.random.RandomState(2)
    assert all(mutate(base, dists, rng, 1.0)[n] != base[n] for n in base)


def test_parents_are_the_top_ten_and_children_come_from_them():
    space = tiny_space()
    sampler = WPCASampler(space, population_size=20, seed=0)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(size_objective(space), n_trials=20)
    parents = sampler.get_parent_population(study, 1)
    best = sorted(study.trials, key=lambda t: t.value, reverse=True)[:10]
    assert {t.number for t in parents} == {t.number for t in best}
    # With mutation off, every gene of every child comes from one of the parents.
    sampler.mutation_prob = 0.0
    study.optimize(size_objective(space), n_trials=20)
    for t in study.trials[20:]:
        assert t.system_attrs["WPCASampler:generation"] == 1
        for name, value in t.params.items():
            assert value in {p.params[name] for p in parents}


def test_budget_is_never_exceeded_and_nothing_is_wasted():
    space = tiny_space()
    budget = space.min_params() * 2
    sampler = WPCASampler(space, max_params=budget, population_size=10, seed=3)
    objective = ZeroCostObjective(space, batch=text_batch(batch_size=4, seq_len=16), max_params=budget)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(objective, n_trials=40)
    assert all(t.state == TrialState.COMPLETE for t in study.trials)  # no pruned (infeasible) trial
    assert max(t.user_attrs["num_params"] for t in study.trials) <= budget
    assert all(t.user_attrs["feasible"] for t in study.trials)
    assert all(t.constraints["max_params"] <= 0 for t in study.trials)


def test_impossible_budget_and_foreign_space_are_rejected():
    space = tiny_space()
    with pytest.raises(ValueError, match="below the smallest candidate of this space"):
        WPCASampler(space, max_params=space.min_params() - 1)
    with pytest.raises(TypeError, match="needs an optuna_wpca SearchSpace"):
        WPCASampler({"layer_00_block": ["bert"]})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mutation_prob"):
        WPCASampler(space, mutation_prob=2.0)


def test_seed_makes_the_search_deterministic():
    space = tiny_space()

    def run(seed):
        study = optuna.create_study(direction="maximize", sampler=WPCASampler(space, population_size=5, seed=seed))
        study.optimize(size_objective(space), n_trials=15)
        return [t.params for t in study.trials]

    assert run(7) == run(7)
    assert run(7) != run(8)


WORKER = textwrap.dedent(
    """
    import sys, optuna
    from optuna.storages.journal import JournalFileBackend
    from optuna_wpca import DecoderSpace, WPCASampler, WPCASpace
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage_arg, n, seed, operators = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    storage = (optuna.storages.JournalStorage(JournalFileBackend(storage_arg[len("journal:"):]))
               if storage_arg.startswith("journal:") else storage_arg)
    space = WPCASpace(**%r) if sys.argv[5] == "wpca" else DecoderSpace(**%r)
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize",
                                sampler=WPCASampler(space, population_size=10, seed=seed, operators=operators,
                                                    max_params=space.min_params() * 3), load_if_exists=True)
    study.optimize(lambda t: float(space.num_params(space.suggest(t))), n_trials=n)
    """
    % (TINY, DECODER)
)


def run_worker(tmp_path, storage, n, seed, operators="paper", space="wpca"):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    return subprocess.Popen([sys.executable, str(script), storage, str(n), str(seed), operators, space])


# The boundary operators on a decoder space, whose FFN widths (449 values) they step and raise; on W-PCA's
# spaces they are the paper's.
SEARCHES = [("paper", "wpca"), ("boundary", "decoder")]


def worker_space(kind):
    from optuna_wpca import DecoderSpace

    return tiny_space() if kind == "wpca" else DecoderSpace(**DECODER)


@pytest.mark.parametrize("operators, space", SEARCHES)
def test_resume_in_a_new_process_keeps_generations_and_with_the_seed_the_same_trials(tmp_path, operators, space):
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert run_worker(tmp_path, url, 25, 0, operators, space).wait() == 0
    assert run_worker(tmp_path, url, 25, 0, operators, space).wait() == 0  # stopped at 25, resumed with the seed
    study = optuna.load_study(study_name="s", storage=url)
    trials = study.trials
    assert len(trials) == 50 and all(t.state == TrialState.COMPLETE for t in trials)
    generations = collections.Counter(t.system_attrs["WPCASampler:generation"] for t in trials)
    assert generations == {g: 10 for g in range(5)}
    once = f"sqlite:///{tmp_path / 'once.db'}"
    assert run_worker(tmp_path, once, 50, 0, operators, space).wait() == 0
    assert [t.params for t in optuna.load_study(study_name="s", storage=once).trials] == [t.params for t in trials]


@pytest.mark.parametrize("operators, space", SEARCHES)
def test_two_processes_share_one_journal_study(tmp_path, operators, space):
    storage = f"journal:{tmp_path / 'journal.log'}"
    workers = [run_worker(tmp_path, storage, 20, seed, operators, space) for seed in (0, 1)]
    assert [w.wait() for w in workers] == [0, 0]
    from optuna.storages.journal import JournalFileBackend

    study = optuna.load_study(
        study_name="s", storage=optuna.storages.JournalStorage(JournalFileBackend(str(tmp_path / "journal.log")))
    )
    numbers = [t.number for t in study.trials]
    assert sorted(numbers) == list(range(40))  # none lost, none twice
    assert all(t.state == TrialState.COMPLETE for t in study.trials)
    budget = worker_space(space).min_params() * 3
    assert all(t.value <= budget for t in study.trials)
    assert max(t.system_attrs["WPCASampler:generation"] for t in study.trials) >= 2
    # Not the same trials as one worker: which trials a generation holds, and so a child's parents, depend on
    # which worker finishes first; each trial's draws still come from (its worker's seed, its number).


def test_threads_with_n_jobs_share_the_generations():
    space = tiny_space()
    sampler = WPCASampler(space, max_params=space.min_params() * 3, population_size=5, seed=0)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(size_objective(space), n_trials=30, n_jobs=3)
    trials = study.trials
    assert len(trials) == 30 and all(t.state == TrialState.COMPLETE for t in trials)
    assert all(space.num_params(space.from_params(t.params)) <= space.min_params() * 3 for t in trials)
    generations = collections.Counter(t.system_attrs["WPCASampler:generation"] for t in trials)
    # Threads may overfill a generation by the trials in flight, never skip one.
    assert sorted(generations) == list(range(len(generations))) and len(generations) >= 4
    assert all(count >= 5 for g, count in generations.items() if g < max(generations))


def test_the_multi_objective_parent_pool_is_nsga2s_elite():
    # Optuna's own NSGA-II ranking and crowding distance are the oracle (its private module, used in the
    # test only). Where several trials tie at the cut (two front ends, both at infinite distance), either
    # choice is the elite, so the selections are compared by (front, crowding distance).
    import numpy as np
    from optuna.samplers.nsgaii import _elite_population_selection_strategy as nsga2

    from optuna_wpca.sampler._elite import elite_population

    rng = np.random.default_rng(0)
    for case in range(30):
        directions = [["maximize", "minimize"], ["minimize", "minimize", "maximize"]][case % 2]
        study = optuna.create_study(directions=directions)
        for _ in range(int(rng.integers(3, 40))):
            study.add_trial(optuna.trial.create_trial(values=list(rng.normal(size=len(directions))),
                                                      params={}, distributions={}))
        trials = study.get_trials(deepcopy=False)
        quality = {}
        for rank, front in enumerate(nsga2._rank_population(list(trials), study.directions, is_constrained=False)):
            for number, distance in nsga2._calc_crowding_distance(list(front)).items():
                quality[number] = (rank, -distance)
            for t in front:
                quality.setdefault(t.number, (rank, 0.0))
        size = int(rng.integers(2, len(trials) + 2))
        ours = elite_population(trials, study.directions, size)
        theirs = nsga2.NSGAIIElitePopulationSelectionStrategy(population_size=size)(study, list(trials))
        assert len(ours) == len(theirs) == min(size, len(trials))
        assert sorted(quality[t.number] for t in ours) == sorted(quality[t.number] for t in theirs), case
