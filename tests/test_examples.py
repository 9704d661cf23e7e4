"""The quick examples run as written, with tiny settings."""

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(script, *args, cwd):
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                            cwd=cwd, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_quickstart(tmp_path):
    out = run("quickstart.py", "--n-trials", "6", "--storage", f"sqlite:///{tmp_path / 'q.db'}", cwd=tmp_path)
    import re

    import optuna

    import optuna_wpca

    # what it prints is what the study holds: the best value, its architecture's count and layers
    study = optuna.load_study(study_name="quickstart", storage=f"sqlite:///{tmp_path / 'q.db'}")
    assert len(study.trials) == 6
    space, budget = optuna_wpca.preset("wpca-tiny")
    best = space.from_params(study.best_trial.params)
    assert f"best W-PCA {study.best_value:.4g} with {space.num_params(best):,} parameters" in out
    assert space.num_params(best) <= budget.max_params
    assert re.findall(r"  layer (\d): (.*)", out) == [(str(i), line) for i, line in enumerate(space.describe(best))]


def test_pareto_latency(tmp_path):
    out = run("pareto_latency.py", "--n-trials", "8", "--population-size", "4", "--out", "front.png", cwd=tmp_path)
    assert "Pareto-optimal trials" in out
    assert (tmp_path / "front.png").stat().st_size > 1000


def test_paper_presets_tiny(tmp_path):
    out = run("paper_presets.py", "--preset", "tiny", "--generations", "2", "--population-size", "3",
              "--batch-size", "4", "--seq-len", "16", cwd=tmp_path)
    assert "W-PCA-Tiny: best W-PCA" in out


def test_custom_space_and_proxy(tmp_path):
    out = run("custom_space_and_proxy.py", "--n-trials", "6", cwd=tmp_path)
    import re

    header = re.search(r"(\d+) Pareto-optimal trials over \(W-PCA, output rank\):", out)
    assert header, out
    rows = re.findall(r"  trial (\d+): W-PCA ([0-9.e+]+), output rank (\d+)", out)
    assert len(rows) == int(header.group(1)) >= 1
    # a Pareto front: no listed trial is dominated by another listed one
    points = [(float(w), float(r)) for _, w, r in rows]
    dominates = lambda a, b: a[0] >= b[0] and a[1] >= b[1] and a != b  # noqa: E731 - both maximised
    assert not any(dominates(a, b) for a in points for b in points)


def test_distributed_on_postgres(tmp_path, postgres_url):
    import optuna

    optuna.create_study(study_name="ex", storage=postgres_url, direction="maximize")  # once, as the docs say
    procs = [subprocess.Popen([sys.executable, str(EXAMPLES / "distributed_postgres.py"), "--storage", postgres_url,
                               "--study-name", "ex", "--n-trials", "4", "--batch-size", "4", "--seq-len", "16"],
                              cwd=tmp_path, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all("this worker is done" in o for o in outs)
    import optuna

    assert len(optuna.load_study(study_name="ex", storage=postgres_url).trials) == 8


def test_decoder_pareto(tmp_path):
    out = run("decoder_pareto.py", "--n-trials", "6", "--population-size", "3", "--out", "d.png", cwd=tmp_path)
    assert "Pareto-optimal decoders" in out and (tmp_path / "d.png").stat().st_size > 1000


def test_two_stage_tiny(tmp_path):
    out = run("two_stage.py", "--storage", f"sqlite:///{tmp_path / 't.db'}", "--search-trials", "6",
              "--kd-trials", "3", "--steps", "4", "--teacher-steps", "2", "--train-examples", "64", cwd=tmp_path)
    assert "stage 1: 6 zero-cost trials" in out
    assert "stage 2:" in out and out.count("from zero-cost trial") == 3


def test_the_smallest_complete_space_is_one_file_and_works_everywhere(tmp_path):
    """examples/uniform_space.py: a space defined in one class registers itself and is searched, recorded,
    read back, counted exactly and drawn in its declared colours."""
    import runpy

    import optuna
    import torch

    import optuna_wpca
    from optuna_wpca._dashboard import architecture_svg

    out = run("uniform_space.py", "--n-trials", "6", "--storage", f"sqlite:///{tmp_path / 'u.db'}", cwd=tmp_path)
    assert "searched uniform-bert with a budget of <= " in out and "bert ffn" in out
    UniformSpace = runpy.run_path(str(EXAMPLES / "uniform_space.py"), run_name="uniform_space")["UniformSpace"]
    space = optuna_wpca.space_from_dict({"type": "uniform-bert", "num_layers": 3, "hidden_size": 64,
                                         "ffn_sizes": [64, 128], "heads": [2, 4]})
    assert isinstance(space, UniformSpace)
    for params in ({"ffn_size": 64, "heads": 2}, {"ffn_size": 128, "heads": 4}):
        arch = space.from_params(params)
        model = space.build(arch)
        body = sum(p.numel() for name, p in model.named_parameters() if not name.startswith("embeddings."))
        assert space.num_params(arch, "all") == sum(p.numel() for p in model.parameters())
        assert space.num_params(arch) == body
        assert space.to_params(arch) == params
        assert model(torch.ones(1, 8, dtype=torch.long)).shape[-1] == 64
    study = optuna.create_study()
    optuna_wpca.record_search(study, space)
    assert optuna_wpca.read_search(study).space == space
    assert 'fill="#4C72B0"' in architecture_svg(space, space.from_params({"ffn_size": 64, "heads": 2}))


def test_a_space_with_a_model_of_its_own_is_searched_scored_exported_and_loaded(tmp_path):
    out = run("activation_space.py", "--n-trials", "8", "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert "ActivationTransformersModel, same outputs: True" in out
    import json
    import re

    saliency = float(re.search(r"synaptic saliency ([0-9.e+-]+)", out).group(1))
    assert saliency > 0
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["model_type"] == "example_activation" and len(config["layers"]) == 4
    assert {layer["activation"] for layer in config["layers"]} <= {"gelu", "relu", "silu"}


def test_no_generic_module_tests_a_model_class():
    import ast

    root = EXAMPLES.parent / "optuna_wpca"
    found = []
    for path in root.rglob("*.py"):
        if path.parent.name == "models":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                names = [n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)]
                if any(n.endswith("Model") for n in names):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []


def test_optuna_samplers_search_within_the_budget(tmp_path):
    import optuna

    import optuna_wpca

    storage = f"sqlite:///{tmp_path / 's.db'}"
    out = run("optuna_samplers.py", "--sampler", "tpe", "--n-trials", "8", "--batch", "8x16", "--storage", storage,
              "--max-params", "7e6", cwd=tmp_path)
    study = optuna.load_study(study_name="wpca-tiny-tpe", storage=storage)
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    pruned = study.get_trials(states=(optuna.trial.TrialState.PRUNED,))
    assert len(done) == 8 and pruned  # about half the space is over 7M: TPE's first draws cross it
    assert f"8 evaluations, {len(pruned)} candidates over the budget pruned unscored" in out
    space, _ = optuna_wpca.preset("wpca-tiny")
    assert all(space.num_params(space.from_params(t.params)) <= 7e6 for t in done)
    assert all(space.num_params(space.from_params(t.params)) > 7e6 and "seconds" not in t.user_attrs for t in pruned)
    best = space.from_params(study.best_trial.params)
    assert f"best wpca {study.best_value:.4g} with {space.num_params(best):,} parameters" in out
    # a rerun with the same storage adds to the study up to the total asked
    run("optuna_samplers.py", "--sampler", "tpe", "--n-trials", "10", "--batch", "8x16", "--storage", storage,
        "--max-params", "7e6", cwd=tmp_path)
    assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 10
