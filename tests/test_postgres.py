"""The plugin against a real PostgreSQL server: one study, several worker processes."""

import collections
import subprocess
import sys
import textwrap

import optuna
from optuna.trial import TrialState

WORKER = textwrap.dedent(
    """
    import sys, optuna
    from optuna_wpca import WPCASampler, WPCASpace, ZeroCostObjective, text_batch
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    space = WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)
    budget = space.min_params() * 3
    sampler = WPCASampler(space, max_params=budget, population_size=8, seed=seed)
    study = optuna.create_study(study_name="pg", storage=url, direction="maximize", sampler=sampler,
                                load_if_exists=True)
    objective = ZeroCostObjective(space, batch=text_batch(batch_size=4, seq_len=16), max_params=budget)
    study.optimize(objective, n_trials=n)
    """
)


def test_four_workers_on_one_postgres_study(postgres_url, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    # Create the study once so that the workers do not race on creating it.
    optuna.create_study(study_name="pg", storage=postgres_url, direction="maximize")
    workers = [subprocess.Popen([sys.executable, str(script), postgres_url, "10", str(seed)]) for seed in range(4)]
    assert [w.wait(timeout=600) for w in workers] == [0, 0, 0, 0]
    study = optuna.load_study(study_name="pg", storage=postgres_url)
    trials = study.trials
    assert len(trials) == 40
    assert sorted(t.number for t in trials) == list(range(40))
    assert all(t.state == TrialState.COMPLETE for t in trials)
    generations = collections.Counter(t.system_attrs["WPCASampler:generation"] for t in trials)
    assert sum(generations.values()) == 40 and max(generations) >= 2
    assert all(t.user_attrs["feasible"] for t in trials)
    # The same budget in one process, for the record: parallel GA generations are noisier, so this is
    # reported, and only sanity-checked.
    single_script = tmp_path / "single.py"
    single_script.write_text(WORKER.replace('study_name="pg"', 'study_name="pg-single"'))
    optuna.create_study(study_name="pg-single", storage=postgres_url, direction="maximize")
    assert subprocess.run([sys.executable, str(single_script), postgres_url, "40", "0"], timeout=600).returncode == 0
    single = optuna.load_study(study_name="pg-single", storage=postgres_url)
    assert len(single.trials) == 40
    print(f"\nbest W-PCA: 4 workers {study.best_value:.6g}, 1 worker {single.best_value:.6g} (40 trials each)")
    assert study.best_value > 0 and single.best_value > 0


def test_a_bare_postgresql_url_works_as_documented(postgres_url, capsys):
    # SQLAlchemy maps postgresql:// to psycopg 3; the project installs psycopg2: open_storage picks it.
    from optuna_wpca import open_storage
    from optuna_wpca.cli import main

    bare = "postgresql://" + postgres_url.split("://", 1)[1]
    assert bare != postgres_url
    storage = open_storage(bare)
    optuna.create_study(storage=storage, study_name="bare-url").optimize(
        lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    assert len(optuna.load_study(study_name="bare-url", storage=postgres_url).trials) == 2
    assert main(["search", "--preset", "wpca-tiny", "--storage", bare, "--study-name", "bare-cli", "--n-trials", "2",
                 "--population-size", "2", "--batch-size", "4", "--seq-len", "16", "--quiet"]) == 0
    assert len(optuna.load_study(study_name="bare-cli", storage=postgres_url).trials) == 2
