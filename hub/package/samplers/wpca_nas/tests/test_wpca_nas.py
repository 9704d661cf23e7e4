"""The package as OptunaHub loads it: a sampler that proposes architectures within the budget."""

from pathlib import Path

import optuna
import optunahub

ROOT = Path(__file__).resolve().parents[3]


def test_load_local_module_and_search():
    wpca = optunahub.load_local_module(package="samplers/wpca_nas", registry_root=str(ROOT))
    space = wpca.WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
    sampler = wpca.WPCASampler(space, max_params=40_000, population_size=4, seed=0)
    assert isinstance(sampler, optuna.samplers.BaseSampler)
    objective = wpca.ZeroCostObjective(space, batch=wpca.text_batch(batch_size=4, seq_len=16))
    study = optuna.create_study(sampler=sampler, direction="maximize")
    study.optimize(objective, n_trials=8)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert complete and all(t.user_attrs["num_params"] <= 40_000 for t in complete)
    assert study.best_value > 0


def test_readme_front_matter_has_what_the_registry_requires():
    text = (ROOT / "samplers" / "wpca_nas" / "README.md").read_text()
    assert text.startswith("---\n")
    front = dict(line.split(": ", 1) for line in text.split("---\n")[1].strip().splitlines())
    assert set(front) == {"author", "title", "description", "tags", "optuna_versions", "license"}
    assert "sampler" in [t.strip() for t in front["tags"].strip("[]").split(",")]
    # The versions the package was tested with: real releases, oldest first, none below the plugin's floor (5.0);
    # a newer Optuna than the list is not an error (OptunaHub shows the list, it does not pin it).
    from packaging.version import Version

    listed = [Version(v.strip()) for v in front["optuna_versions"].strip("[]").split(",")]
    assert listed == sorted(listed) and listed[0] >= Version("5.0.0")
    assert front["license"] == "MIT License"
    assert (ROOT / "samplers" / "wpca_nas" / "LICENSE").read_text().startswith("MIT License")
