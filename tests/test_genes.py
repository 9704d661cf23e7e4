"""Integer genes (0.3) and the way back for a study searched with categorical genes before them."""

import json

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution

from optuna_wpca import DecoderSpace, WPCASampler, ZeroCostObjective, text_batch
from optuna_wpca import _attributes as attr
from optuna_wpca.cli import main
from optuna_wpca.spaces._genes import describe, gene, holds, values_of

SPACE = DecoderSpace(num_layers_choices=(2, 3), hidden_sizes=(64,), heads=(2,), ffn_sizes=tuple(range(64, 257, 8)),
                     vocab_size=30522, max_position_embeddings=64)
LEGACY = DecoderSpace(**{**SPACE.config(), "integer_genes": False})


def test_a_gene_is_an_integer_range_only_where_its_values_are_evenly_stepped_integers():
    assert gene(range(64, 257, 8)) == IntDistribution(64, 256, step=8)
    assert gene((64, 128, 256, 512)) == CategoricalDistribution((64, 128, 256, 512))
    assert gene((1, 2)) == CategoricalDistribution((1, 2))  # two values: nothing between them
    assert gene((3, 2, 1)) == CategoricalDistribution((3, 2, 1))
    assert gene((1.0, 2.0, 3.0)) == CategoricalDistribution((1.0, 2.0, 3.0))
    assert gene(range(1, 7), integer=False) == CategoricalDistribution((1, 2, 3, 4, 5, 6))
    width = gene(range(512, 2049))
    assert holds(width, 1000) and not holds(width, 2050) and not holds(width, 1000.5) and not holds(width, True)
    assert len(values_of(width)) == 1537 and describe(width) == "512..2048"
    assert "1,537" not in json.dumps(optuna.distributions.distribution_to_json(width))  # two bounds, no list


def test_the_study_stores_integer_genes_and_the_sampler_and_objective_agree_on_them():
    sampler = WPCASampler(SPACE, population_size=4, seed=0)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(ZeroCostObjective(SPACE, "params", batch=text_batch(batch_size=2, seq_len=16)), n_trials=10)
    assert isinstance(study.trials[-1].distributions["layer_00_ffn_size"], IntDistribution)
    assert [sampler.get_trial_generation(study, t) for t in study.trials] == [0] * 4 + [1] * 4 + [2] * 2
    assert len({t.params["layer_00_ffn_size"] for t in study.trials}) > 1
    assert all(holds(SPACE.distributions()[n], v) for t in study.trials for n, v in t.params.items())


def _legacy_study(storage: str) -> optuna.Study:
    study = optuna.create_study(storage=storage, study_name="old", direction="maximize",
                                sampler=WPCASampler(LEGACY, population_size=3, seed=0))
    study.optimize(ZeroCostObjective(LEGACY, "params", batch=text_batch(batch_size=2, seq_len=16)), n_trials=4)
    # a study written before 0.3 recorded its space without the key
    study.set_user_attr(attr.SPACE, {k: v for k, v in LEGACY.to_dict().items() if k != "integer_genes"})
    return study


def test_a_study_searched_with_categorical_genes_is_refused_in_one_line_then_resumes_with_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    study = _legacy_study(url)
    assert isinstance(study.trials[0].distributions["layer_00_ffn_size"], CategoricalDistribution)
    batch = text_batch(batch_size=2, seq_len=16)
    resumed = optuna.load_study(study_name="old", storage=url, sampler=WPCASampler(SPACE, population_size=3, seed=1))
    with pytest.raises(ValueError, match=r"gene layer_00_\w+ is categorical \(searched before 0.3\); resume it with "
                                         r"integer_genes=False \(CLI: --categorical-genes\)"):
        resumed.optimize(ZeroCostObjective(SPACE, "params", batch=batch), n_trials=1)
    assert len(resumed.trials) == 4 + 1 and resumed.trials[-1].state == optuna.trial.TrialState.FAIL  # none RUNNING
    legacy = optuna.load_study(study_name="old", storage=url, sampler=WPCASampler(LEGACY, population_size=3, seed=1))
    legacy.optimize(ZeroCostObjective(LEGACY, "params", batch=batch), n_trials=3)
    done = [t for t in legacy.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 7 and legacy.user_attrs[attr.SPACE] == LEGACY.to_dict()  # the record says it now
    assert all(isinstance(t.distributions["layer_00_ffn_size"], CategoricalDistribution) for t in done)


def test_the_cli_resumes_a_categorical_study_with_its_flag(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    _legacy_study(url)
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(SPACE.to_dict()))
    args = ["search", "--space", str(space_file), "--storage", url, "--study-name", "old", "--population-size", "3",
            "--batch-size", "2", "--seq-len", "16", "--quiet", "--proxy", "params", "--n-trials", "6"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--categorical-genes" in err[0]
    assert main([*args, "--categorical-genes"]) == 0
    study = optuna.load_study(study_name="old", storage=url)
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) == 6
