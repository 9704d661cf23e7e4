"""Optuna's own sampler test suite (optuna.testing.pytest_samplers), run against WPCASampler."""

import pytest
from optuna.testing.pytest_samplers import (
    BasicSamplerTestCase,
    MultiObjectiveSamplerTestCase,
    RelativeSamplerTestCase,
)

from optuna_wpca import WPCASampler, WPCASpace

SPACE = WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2)


class _WPCASamplerFactory:
    # Every operator set: the paper's, the ordinal steps, and the boundary moves (which need a budget).
    @pytest.fixture(params=["paper", "ordinal", "boundary", "boundary under a budget"])
    def sampler(self, request):
        operators, _, budget = request.param.partition(" under ")
        max_params = SPACE.min_params() * 2 if budget else None
        return lambda: WPCASampler(SPACE, population_size=4, seed=0, operators=operators, max_params=max_params)


class TestBasic(_WPCASamplerFactory, BasicSamplerTestCase):
    pass


class TestRelative(_WPCASamplerFactory, RelativeSamplerTestCase):
    pass


class TestMultiObjective(_WPCASamplerFactory, MultiObjectiveSamplerTestCase):
    pass


def test_the_sampler_pickles_and_the_copy_proposes_the_same():
    import pickle

    import optuna

    sampler = WPCASampler(SPACE, population_size=4, seed=3)
    copy = pickle.loads(pickle.dumps(sampler))
    proposals = []
    for s in (sampler, copy):
        study = optuna.create_study(sampler=s)
        study.optimize(lambda t: float(SPACE.num_params(SPACE.suggest(t))), n_trials=10)
        proposals.append([t.params for t in study.trials])
    assert proposals[0] == proposals[1]


def test_partial_fixed_sampler_fixes_a_gene_and_the_ga_proposes_the_rest():
    import optuna

    fixed = optuna.samplers.PartialFixedSampler({"layer_00_block": "bert"},
                                                WPCASampler(SPACE, population_size=4, seed=0))
    study = optuna.create_study(sampler=fixed)
    study.optimize(lambda t: float(SPACE.num_params(SPACE.suggest(t))), n_trials=12)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    assert {t.params["layer_00_block"] for t in study.trials} == {"bert"}
    assert len({t.params["layer_01_ffn_mult"] for t in study.trials}) > 1  # the rest still varies
