"""ELM's elastic space: heads per layer as Optuna distributions, exact counts, round trips, presets."""

import json

import optuna
import pytest
import torch

from optuna_wpca import ELMSpace, WPCASampler, ZeroCostObjective, preset, space_from_dict, text_batch
from optuna_wpca.cli import main


def test_round_trips_and_exact_parameter_counts():
    space = ELMSpace(num_layers=4, hidden_size=96, bert_head_choices=(1, 2, 4, 8), mobilebert_head_choices=(1, 2, 4))
    for seed in range(15):
        arch = space.sample(seed)
        assert space.from_params(space.to_params(arch)) == arch
        model = space.build(arch, seed=seed)
        assert space.num_params(arch) == model.num_parameters()
        assert space.num_params(arch, "all") == model.num_parameters("all")
        assert [block.attention.num_heads for block in model.layers] == [layer.heads for layer in arch.layers]
    again = space_from_dict(json.loads(json.dumps(space.to_dict())))
    assert isinstance(again, ELMSpace) and again.config() == space.config()


def test_heads_change_the_model_but_not_its_count():
    space = ELMSpace(num_layers=2, hidden_size=96, bert_head_choices=(2, 8), mobilebert_head_choices=(1, 3))
    base = {"layer_00_block": "bert", "layer_01_block": "mobilebert", "layer_00_ffn_mult": 2, "layer_01_ffn_mult": 2,
            "layer_00_mobilebert_heads": 1, "layer_01_bert_heads": 2}
    few = space.from_params({**base, "layer_00_bert_heads": 2, "layer_01_mobilebert_heads": 1})
    many = space.from_params({**base, "layer_00_bert_heads": 8, "layer_01_mobilebert_heads": 3})
    assert space.num_params(few) == space.num_params(many)
    ids = torch.arange(100, 132).reshape(2, 16)
    with torch.no_grad():
        assert not torch.allclose(space.build(few, seed=0)(ids), space.build(many, seed=0)(ids))
    # the inert gene (the other block type's heads) does not change the architecture
    assert space.from_params({**base, "layer_00_bert_heads": 2, "layer_01_mobilebert_heads": 1,
                              "layer_00_mobilebert_heads": 3}) == few


def test_head_counts_that_do_not_divide_the_width_are_refused():
    with pytest.raises(ValueError, match=r"bert_head_choices \[5\] do not divide the attention width 528"):
        ELMSpace(bert_head_choices=(4, 5))
    with pytest.raises(ValueError, match=r"mobilebert_head_choices \[5\] do not divide the attention width 132"):
        ELMSpace(mobilebert_head_choices=(5,))


def test_presets_at_the_w_pca_budgets_and_a_budgeted_search():
    small, budget = preset("elm-small")
    assert isinstance(small, ELMSpace) and small.num_layers == 12 and budget.max_params == 15.7e6
    tiny, budget = preset("elm-tiny")
    assert tiny.num_layers == 6 and budget.max_params == 10e6
    space = ELMSpace(num_layers=3, hidden_size=64, bert_head_choices=(1, 2, 4), mobilebert_head_choices=(1, 2))
    cap = space.num_params(space.sample(0)) * 1.2
    study = optuna.create_study(direction="maximize", sampler=WPCASampler(space, max_params=cap, population_size=4,
                                                                         seed=0))
    study.optimize(ZeroCostObjective(space, batch=text_batch(batch_size=4, seq_len=32)), n_trials=10)
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert done and all(t.user_attrs["num_params"] <= cap for t in done)
    assert all("h" in t.user_attrs["architecture"] for t in done)


def test_the_cli_searches_the_elm_preset(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'elm.db'}"
    assert main(["search", "--preset", "elm-tiny", "--storage", url, "--n-trials", "4", "--population-size", "4",
                 "--batch-size", "4", "--seq-len", "32", "--quiet"]) == 0
    assert "heads" in capsys.readouterr().out
