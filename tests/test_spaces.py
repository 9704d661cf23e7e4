import json

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution

from optuna_wpca import DecoderSpace, FlexiBERTSpace, WPCASpace, load_space, space_from_dict
from optuna_wpca.spaces._genes import values_of
from optuna_wpca.ranking import benchmark_path


@pytest.fixture(scope="module")
def benchmark_entries():
    with open(str(benchmark_path("nas-bench-bert"))) as f:
        return json.load(f)


def test_wpca_space_genes_are_per_layer_integers_where_ordered_and_categoricals_else():
    space = WPCASpace.small()
    dists = space.distributions()
    assert len(dists) == 24
    assert dists["layer_03_block"] == CategoricalDistribution(("bert", "mobilebert"))
    assert dists["layer_11_ffn_mult"] == IntDistribution(1, 6)
    legacy = WPCASpace.small(integer_genes=False)
    assert legacy.distributions()["layer_11_ffn_mult"] == CategoricalDistribution((1, 2, 3, 4, 5, 6))
    assert legacy.to_dict()["integer_genes"] is False and "integer_genes" not in space.to_dict()
    assert space_from_dict(legacy.to_dict()) == legacy != space
    assert [legacy.sample(s) for s in range(5)] == [space.sample(s) for s in range(5)]  # the same draws
    decoder = DecoderSpace.lts_gpt2().distributions()
    assert decoder["layer_00_ffn_size"] == IntDistribution(512, 2048)
    assert decoder["hidden_size"] == CategoricalDistribution((64, 128, 256, 512))  # not evenly stepped
    assert DecoderSpace().distributions()["layer_00_ffn_size"] == IntDistribution(128, 4032, step=64)
    assert WPCASpace.tiny().num_layers == 6


@pytest.mark.parametrize("space", [WPCASpace.small(), WPCASpace.tiny(), FlexiBERTSpace()], ids=["small", "tiny", "flexi"])
def test_params_round_trip(space):
    for seed in range(20):
        arch = space.sample(seed)
        params = space.to_params(arch)
        assert set(params) == set(space.distributions())
        assert space.from_params(params) == arch


def test_suggest_through_a_real_trial_gives_the_same_architecture():
    space = WPCASpace.tiny()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    arch = space.suggest(trial)
    assert space.from_params(trial.params) == arch
    assert arch.num_layers == 6
    assert {layer.ffn_size for layer in arch.layers} <= {132 * k for k in range(1, 7)}


@pytest.mark.parametrize("count", ["non_embedding", "all"])
def test_wpca_num_params_matches_built_model(count):
    space = WPCASpace.small(count=count)
    rng = np.random.default_rng(0)
    for _ in range(6):
        arch = space.sample(rng)
        model = space.build(arch, seed=None)
        assert space.num_params(arch) == model.num_parameters()
    assert space.num_params(arch, "all") == sum(p.numel() for p in model.parameters())


def test_wpca_paper_budget_convention():
    # Non-embedding counting is what lets hidden-528 models fit the paper's 15.7M budget.
    space = WPCASpace.small()
    assert space.min_params() < 15.7e6 < space.num_params(space.sample(0), "all") + 16e6
    embeddings = space.num_params(space.sample(0), "all") - space.num_params(space.sample(0))
    assert embeddings > 4e6  # 30522 x 128 table, trigram projection, positions


def test_min_params_is_the_smallest():
    space = WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)
    import itertools

    values = [
        space.num_params(space.from_params(dict(zip(space.distributions(), combo))))
        for combo in itertools.product(*(values_of(d) for d in space.distributions().values()))
    ]
    assert space.min_params() == min(values)


def test_every_benchmark_entry_loads_and_counts_exactly(benchmark_entries):
    assert len(benchmark_entries) == 500
    for as_trained in (False, True):
        space = FlexiBERTSpace(as_trained=as_trained)
        for entry in benchmark_entries:
            arch = space.from_benchmark_entry(entry)
            model = space.build(arch, seed=None)
            assert space.num_params(arch) == sum(p.numel() for p in model.parameters()), entry["id"]


def test_from_params_errors_name_the_problem():
    space = WPCASpace.tiny()
    params = space.to_params(space.sample(0))
    bad = dict(params, layer_02_block="lstm")
    with pytest.raises(ValueError, match="layer_02_block='lstm' is not one of"):
        space.from_params(bad)
    missing = {k: v for k, v in params.items() if k != "layer_05_ffn_mult"}
    with pytest.raises(ValueError, match="missing parameter.*layer_05_ffn_mult"):
        space.from_params(missing)
    with pytest.raises(ValueError, match="must be a mapping"):
        space.from_params(["bert"])  # type: ignore[arg-type]


def test_from_params_builds_the_genes_once_and_again_after_a_setting_changes(monkeypatch):
    # The sampler's budget fill calls from_params some 200 times per child; rebuilding the 16 genes of 1,537
    # widths each time cost ~1.7 s a child on lts-gpt2.
    space = DecoderSpace.lts_gpt2()
    params = space.to_params(space.sample(0))
    calls = []
    real = DecoderSpace.distributions
    monkeypatch.setattr(DecoderSpace, "distributions", lambda self: calls.append(1) or real(self))
    space.heads = (2, 4, 8)  # a setting written: the genes are built again on the next check, once
    for _ in range(5):
        space.from_params(params)
    assert len(calls) == 1
    narrower = dict(params, layer_00_ffn_size=2000)
    space.from_params(narrower)
    space.ffn_sizes = tuple(range(512, 1025))  # a changed setting is checked against its new genes
    with pytest.raises(ValueError, match="layer_00_ffn_size=2000 is not one of"):
        space.from_params(narrower)
    assert len(calls) == 2


def test_bad_space_arguments():
    with pytest.raises(ValueError, match="not divisible by bert_heads"):
        WPCASpace(hidden_size=100)
    with pytest.raises(ValueError, match="blocks must be"):
        WPCASpace(blocks=("lstm",))
    with pytest.raises(ValueError, match="num_layers"):
        WPCASpace(num_layers=0)
    with pytest.raises(ValueError, match="convention"):
        WPCASpace(count="some")


def test_space_files(tmp_path):
    space = WPCASpace(num_layers=4, hidden_size=256, bert_heads=8, ffn_mults=(1, 2, 3))
    path = tmp_path / "space.json"
    path.write_text(json.dumps(space.to_dict()))
    again = load_space(path)
    assert again.distributions() == space.distributions()
    assert isinstance(space_from_dict(FlexiBERTSpace().to_dict()), FlexiBERTSpace)
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(ValueError, match="is empty"):
        load_space(tmp_path / "empty.json")
    (tmp_path / "broken.json").write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_space(tmp_path / "broken.json")
    with pytest.raises(ValueError, match="'type' must be one of"):
        space_from_dict({"type": "rnn"})
    with pytest.raises(ValueError, match="malformed wpca search space"):
        space_from_dict({"type": "wpca", "depth": 3})
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_space(tmp_path / "nowhere.json")


def test_a_space_type_registers_itself_and_a_second_class_under_a_taken_kind_is_refused():
    from optuna_wpca.spaces._base import SPACES

    with pytest.raises(ValueError, match="search-space type 'wpca' is already optuna_wpca.spaces._wpca.WPCASpace"):
        class Impostor(WPCASpace):  # noqa: F841
            kind = "wpca"

    class Narrow(WPCASpace):
        kind = "narrow-test"

    try:
        assert isinstance(space_from_dict({"type": "narrow-test", "num_layers": 2, "hidden_size": 32,
                                           "bert_heads": 2, "mobilebert_heads": 2}), Narrow)
    finally:
        SPACES.unregister("narrow-test")
    with pytest.raises(ValueError, match="'type' must be one of"):
        space_from_dict({"type": "narrow-test"})
