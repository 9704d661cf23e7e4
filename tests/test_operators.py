"""The GA's operators: the paper's by name, ordinal steps along ordered genes, the move to the budget's boundary."""

import collections

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution

from optuna_wpca import DecoderSpace, WPCASampler, WPCASpace
from optuna_wpca.spaces._genes import values_of
from optuna_wpca.sampler._operators import DEFAULT_OPERATORS, fill_budget, mutate, mutate_ordinal, step_size, uniform_crossover
from optuna_wpca.spaces._genes import is_ordered

WIDTHS = {"w": CategoricalDistribution(tuple(range(0, 1000, 10)))}
BLOCKS = {"b": CategoricalDistribution(("bert", "mobilebert", "other"))}


def test_the_paper_mutation_draws_any_other_value_uniformly():
    rng = np.random.RandomState(0)
    seen = collections.Counter(mutate({"w": 500}, WIDTHS, rng, 1.0)["w"] for _ in range(20000))
    assert 500 not in seen and len(seen) == 99  # every other value, as a restart of the gene
    assert max(seen.values()) / min(seen.values()) < 2.2
    assert np.mean([abs(v - 500) for v in seen.elements()]) > 200


def test_the_paper_crossover_takes_each_gene_from_either_parent_with_half_odds():
    rng = np.random.RandomState(0)
    first, second = {f"g{i}": 0 for i in range(20)}, {f"g{i}": 1 for i in range(20)}
    taken = np.mean([sum(uniform_crossover(first, second, rng).values()) / 20 for _ in range(2000)])
    assert abs(taken - 0.5) < 0.01


def test_ordinal_steps_are_near_and_shrink_over_the_generations():
    rng = np.random.RandomState(0)
    early = [abs(mutate_ordinal({"w": 500}, WIDTHS, rng, 1.0, 0.0)["w"] - 500) / 10 for _ in range(3000)]
    late = [abs(mutate_ordinal({"w": 500}, WIDTHS, rng, 1.0, 1.0)["w"] - 500) / 10 for _ in range(3000)]
    assert min(early) >= 1 and min(late) >= 1  # a mutation always moves
    assert np.mean(late) < 2.0 < np.mean(early)
    assert step_size(100, 0.0) == pytest.approx(19.8) and step_size(100, 1.0) == 1.0
    at_edge = {mutate_ordinal({"w": 990}, WIDTHS, rng, 1.0, 1.0)["w"] for _ in range(500)}
    assert at_edge <= set(WIDTHS["w"].choices) and max(at_edge) < 990  # reflected back into the range


def test_an_ordered_gene_of_few_values_is_redrawn_as_in_the_paper():
    few = {"m": IntDistribution(1, 6)}
    a, b = np.random.RandomState(3), np.random.RandomState(3)
    assert [mutate_ordinal({"m": 1}, few, a, 1.0, 1.0)["m"] for _ in range(300)] == \
        [mutate({"m": 1}, few, b, 1.0)["m"] for _ in range(300)]  # 1 -> 6 in one move, late in the search too


def test_genes_without_an_order_mutate_as_in_the_paper():
    assert not is_ordered(BLOCKS["b"]) and is_ordered(WIDTHS["w"]) and is_ordered(IntDistribution(0, 5))
    rng = np.random.RandomState(1)
    seen = collections.Counter(mutate_ordinal({"b": "bert"}, BLOCKS, rng, 1.0)["b"] for _ in range(2000))
    assert set(seen) == {"mobilebert", "other"}


def test_the_operators_are_recorded_a_resume_keeps_them_and_other_ones_are_refused():
    space = WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2)
    assert "operators" not in WPCASampler(space, operators="paper").settings  # as studies recorded before the choice
    assert WPCASampler(space, operators="ordinal").settings["operators"] == "ordinal"
    with pytest.raises(ValueError, match="operators must be one of paper, ordinal, boundary"):
        WPCASampler(space, operators="gaussian")
    study = optuna.create_study(sampler=WPCASampler(space, population_size=3, seed=0, operators="ordinal"))
    study.optimize(lambda t: space.num_params(space.suggest(t)), n_trials=9)
    study.sampler = WPCASampler(space, population_size=3, seed=0, operators="paper")
    with pytest.raises(ValueError, match="GA settings"):
        study.optimize(lambda t: space.num_params(space.suggest(t)), n_trials=1)
    study.sampler = resumed = WPCASampler(space, population_size=3, seed=0)  # none given: the study's own
    study.optimize(lambda t: space.num_params(space.suggest(t)), n_trials=3)
    assert resumed.operators == "ordinal" and len(study.trials) == 13
    fresh = WPCASampler(space, population_size=3, seed=0)
    optuna.create_study(sampler=fresh).optimize(lambda t: space.num_params(space.suggest(t)), n_trials=1)
    assert fresh.operators == "paper"  # a W-PCA space: the paper's search, by its name
    decoders = DecoderSpace(num_layers_choices=(2, 3), hidden_sizes=(64, 128), heads=(2,), ffn_sizes=tuple(range(64, 513)))
    assert WPCASampler(decoders).operators == DEFAULT_OPERATORS == "boundary"


def test_an_ordinal_search_on_decoder_widths_stays_in_the_space_and_the_budget():
    space = DecoderSpace(num_layers_choices=(2, 3), hidden_sizes=(64, 128), heads=(2,), ffn_sizes=tuple(range(64, 513)),
                         max_position_embeddings=64)
    budget = space.min_params() * 3
    study = optuna.create_study(direction="maximize",
                                sampler=WPCASampler(space, max_params=budget, population_size=6, seed=0,
                                                    n_generations=5, operators="ordinal"))
    study.optimize(lambda t: float(space.num_params(space.suggest(t))), n_trials=30)
    assert all(t.value <= budget for t in study.trials)
    assert isinstance(space.distributions()["layer_00_ffn_size"], IntDistribution)
    assert all(t.params[n] in values_of(d) for t in study.trials for n, d in space.distributions().items())


def test_the_paper_mutation_draws_the_same_on_integer_and_on_categorical_genes():
    # A study's genes changed kind in 0.3; the paper's GA must still draw what it drew for a seed.
    as_int = {"w": IntDistribution(0, 990, step=10)}
    for seed in range(5):
        a, b = np.random.RandomState(seed), np.random.RandomState(seed)
        assert [mutate({"w": 500}, WIDTHS, a, 0.5)["w"] for _ in range(200)] == \
            [mutate({"w": 500}, as_int, b, 0.5)["w"] for _ in range(200)]


def test_fill_budget_raises_one_gene_up_to_the_boundary_and_leaves_inactive_genes_alone():
    space = DecoderSpace(num_layers_choices=(2, 3), hidden_sizes=(64, 128), heads=(2, 4),
                         ffn_sizes=tuple(range(64, 2049)), max_position_embeddings=64)
    dists = space.distributions()
    size = lambda p: space.num_params(space.from_params(p))  # noqa: E731
    params = space.to_params(space.sample(0))
    params.update(num_layers=2, hidden_size=64, layer_00_ffn_size=64, layer_01_ffn_size=64)
    budget = size(params) + 50_000
    rng = np.random.RandomState(0)
    for _ in range(20):
        out = fill_budget(params, dists, lambda p: size(p) <= budget, size, rng)
        assert budget - 2 * 64 - 1 < size(out) <= budget  # within one FFN step (2h + 1 parameters) of it
        assert out["layer_02_ffn_size"] == params["layer_02_ffn_size"]  # layer 3 is inactive at depth 2
    assert fill_budget(params, dists, lambda p: size(p) <= size(params), size, rng) == params


def test_boundary_operators_fill_half_the_children_of_a_budgeted_search():
    space = DecoderSpace(num_layers_choices=(2, 3), hidden_sizes=(64, 128), heads=(2,), ffn_sizes=tuple(range(64, 513)),
                         max_position_embeddings=64)
    budget = space.min_params() * 3
    studies = {}
    for operators in ("ordinal", "boundary"):
        studies[operators] = study = optuna.create_study(
            direction="maximize", sampler=WPCASampler(space, max_params=budget, population_size=10, seed=0,
                                                      n_generations=4, operators=operators))
        study.optimize(lambda t: float(space.num_params(space.suggest(t))), n_trials=40)
    near = {k: sum(t.value > budget - 2 * 128 - 1 for t in s.trials[10:]) for k, s in studies.items()}
    assert near["boundary"] >= 10 and near["boundary"] > 2 * near["ordinal"]
    assert all(t.value <= budget for s in studies.values() for t in s.trials)


def test_on_a_space_without_fine_genes_every_operator_set_is_the_papers_draw_for_draw():
    space = WPCASpace(num_layers=4, hidden_size=64, bert_heads=4, mobilebert_heads=2)  # FFN multiple 1-6
    budget = space.min_params() * 2

    def trials(operators):
        study = optuna.create_study(direction="maximize", sampler=WPCASampler(
            space, max_params=budget, population_size=6, seed=3, operators=operators))
        study.optimize(lambda t: float(space.num_params(space.suggest(t))), n_trials=30)
        return [t.params for t in study.trials]

    paper = trials("paper")
    assert trials("ordinal") == paper and trials("boundary") == paper
    assert len({str(p) for p in paper[6:]}) > 5  # children, not copies of generation 0
