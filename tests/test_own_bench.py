"""The own-benchmark builder: stratified sampling, resumable runs as trials, the exported file ranks."""

import json
import os
import socket
from collections import Counter

import optuna
import pytest

from benchmarks import own_bench  # noqa: E402

from optuna_wpca.ranking import load_benchmark, rank_proxies  # noqa: E402
from optuna_wpca import text_batch  # noqa: E402


def test_every_depth_and_size_cell_gets_the_same_number():
    archs = own_bench.sample_architectures(60, [4, 5, 6], 256, (0.6e6, 1.6e6), 4, seed=0)
    assert len(archs) == 60 and len({a["id"] for a in archs}) == 60
    cells = Counter((a["space"].num_layers, a["bucket"]) for a in archs)
    assert set(cells.values()) == {5} and len(cells) == 12
    edges = [0.6e6, 0.85e6, 1.1e6, 1.35e6, 1.6e6]
    assert all(edges[a["bucket"]] <= a["num_params"] < edges[a["bucket"] + 1] for a in archs)
    assert len({json.dumps(a["space"].to_params(a["arch"]), sort_keys=True) for a in archs}) == 60


def test_a_band_no_depth_can_fill_is_refused():
    with pytest.raises(ValueError, match="depth 1 has too few architectures"):
        own_bench.sample_architectures(4, [1], 32, (50_000, 60_000), 2, seed=0)


TINY = ["--n", "4", "--depths", "1", "2", "--hidden", "32", "--band", "1100", "7500", "--buckets", "2",
        "--steps", "2", "--teacher-steps", "2", "--batch-size", "4", "--max-seq-len", "16"]


def test_plan_work_export_resumes_a_dead_workers_run(tmp_path, capsys):
    work = tmp_path / "work"
    args = [*TINY, "--work-dir", str(work), "--storage", str(work / "own_bench.journal"),
            "--out", str(tmp_path / "own.json")]
    own_bench.main(["plan", *args])
    study = optuna.load_study(study_name="own-bench", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(work / "own_bench.journal"))))
    assert len(study.get_trials(states=(optuna.trial.TrialState.WAITING,))) == 4 * 2 * 2
    # A worker that died mid-run: its trial is RUNNING with a pid that no longer exists.
    dead = study.ask()
    dead.set_user_attr("host", socket.gethostname())
    dead.set_user_attr("pid", 2**22 + 12345)
    # A worker of the same host before a reboot, and one of another host (a committed journal picked
    # up on a new machine): only --takeover treats the second as dead.
    rebooted = study.ask()
    for key, value in {"host": socket.gethostname(), "pid": os.getpid(), "boot": "an-earlier-boot"}.items():
        rebooted.set_user_attr(key, value)
    elsewhere = study.ask()
    for key, value in {"host": "another-machine", "pid": os.getpid(), "boot": "x"}.items():
        elsewhere.set_user_attr(key, value)
    own_bench.main(["plan", *args])  # planning again adds nothing while those runs are RUNNING
    assert len(study.get_trials(states=(optuna.trial.TrialState.WAITING,))) == 13
    own_bench.main(["work", *args])
    out = capsys.readouterr().out
    assert out.count("of dead worker") == 2 and "enqueued again" in out
    running = study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    assert [t.user_attrs["host"] for t in running] == ["another-machine"]
    own_bench.main(["all", "--takeover", *args])
    out = capsys.readouterr().out
    assert out.count("of dead worker") == 1
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    data = json.loads((tmp_path / "own.json").read_text())
    assert data["runs_done"] == data["runs_planned"] == 16
    jobs = Counter(t.user_attrs["job"] for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)))
    assert len(jobs) == 16 and set(jobs.values()) == {1}
    metrics = {"labels", "kd", "labels_loglik", "kd_loglik"}
    assert all(set(e["scores"]) == metrics for e in data["entries"])
    assert set(data["seed_noise"]) == metrics and data["versions"]["torch"]
    trial = next(t for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
                 if t.user_attrs["job"] == job_of(data["entries"][0], 1, "kd"))
    assert data["entries"][0]["runs"]["kd_loglik"]["1"] == -trial.user_attrs["dev_loss"] < 0
    assert data["entries"][0]["runs"]["kd"]["1"] == trial.value
    (fingerprint, used), = data["teacher"]["fingerprints"].items()
    assert len(fingerprint) == 64 and used["kd_runs"] == 8 and 0 <= used["dev_accuracy"] <= 1
    bench = load_benchmark(tmp_path / "own.json")
    assert bench.metric == "kd" and len(bench.archs) == 4
    result = rank_proxies(bench, ["wpca"], batch=text_batch(batch_size=2, seq_len=8))
    assert result["wpca"].by_depth is not None


def job_of(entry, seed, mode):
    return own_bench.job_key(entry["id"], seed, mode)


def test_the_plan_visits_every_cell_before_a_second_architecture_of_any(tmp_path):
    args = [*TINY, "--n", "8", "--work-dir", str(tmp_path), "--storage", str(tmp_path / "own.journal")]
    own_bench.main(["plan", *args])
    study = optuna.load_study(study_name="own-bench", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "own.journal"))))
    waiting = sorted(study.get_trials(states=(optuna.trial.TrialState.WAITING,)), key=lambda t: t.number)
    archs = [t.user_attrs["arch_id"] for t in waiting]
    assert len(archs) == 8 * 2 * 2
    order = list(dict.fromkeys(archs))
    assert all(archs[4 * i: 4 * i + 4] == [a] * 4 for i, a in enumerate(order))  # an architecture's runs together
    first_round = order[:4]
    assert all(a.endswith("-0") for a in first_round) and len({a.rsplit("-", 1)[0] for a in first_round}) == 4
    assert [(t.user_attrs["seed"], t.user_attrs["mode"]) for t in waiting[:4]] == [
        (0, "labels"), (0, "kd"), (1, "labels"), (1, "kd")]


def test_masked_lm_pilot_then_full_run_reuses_the_pilots_runs(tmp_path, capsys):
    storage = tmp_path / "mlm.journal"
    args = [*TINY, "--n", "8", "--task", "mlm", "--work-dir", str(tmp_path), "--storage", str(storage),
            "--out", str(tmp_path / "own.json")]
    args[args.index("--steps"):args.index("--steps") + 2] = []
    own_bench.main(["plan", "--pilot", "--pilot-steps", "1", "2", *args])
    study = optuna.load_study(study_name="own-bench-mlm", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(storage))))
    assert study.direction == optuna.study.StudyDirection.MINIMIZE
    pilot = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert len(pilot) == 4 * 2 and all(t.user_attrs["arch_id"].endswith("-0") for t in pilot)
    assert {tuple(t.user_attrs["checkpoints"]) for t in pilot} == {(1, 2)}
    own_bench.main(["work", *args])
    own_bench.main(["export", *args])
    out = capsys.readouterr().out
    assert "pilot     1 steps: 8 runs, seed-noise tau" in out and "pilot choice by the rule" in out
    # The full run at the pilot's 2 steps: the pilot's architectures are already measured there.
    own_bench.main(["plan", "--steps", "2", *args])
    full = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert len(full) == 4 * 2 and not any(t.user_attrs["arch_id"].endswith("-0") for t in full)
    with pytest.raises(SystemExit, match="planned at 2 steps, not 3"):
        own_bench.main(["plan", "--steps", "3", *args])
    own_bench.main(["work", "--max-runs", "1", *args])  # a worker that must end in time
    assert "stopping after 1 runs" in capsys.readouterr().out
    assert len(study.get_trials(states=(optuna.trial.TrialState.WAITING,))) == 4 * 2 - 1
    own_bench.main(["all", "--steps", "2", *args])
    data = json.loads((tmp_path / "own.json").read_text())
    assert data["mlm"]["runs_done"] == 16 and data["mlm"]["steps"] == 2
    assert sum("mlm" in e["scores"] for e in data["entries"]) == 8
    assert sum("mlm@1" in e["scores"] for e in data["entries"]) == 4
    done = {(t.user_attrs["arch_id"], t.user_attrs["seed"]): t
            for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))}
    entry = data["entries"][0]
    assert entry["runs"]["mlm"]["0"] == -done[(entry["id"], 0)].user_attrs["losses"]["2"] < 0
    assert data["mlm"]["pilot"]["complete"] and len(data["mlm"]["pilot"]["table"]) == 2
    bench = load_benchmark(tmp_path / "own.json", metric="mlm")
    assert len(bench.archs) == 8 and len(bench.buckets) == 8
    with pytest.raises(SystemExit):  # the masked-LM study needs --pilot or --steps
        own_bench.main(["plan", *args])


def test_kd_pretraining_pilot_scores_every_checkpoint_per_matched_term(tmp_path, capsys):
    storage = tmp_path / "kdpre.journal"
    args = [*TINY, "--task", "kdpre", "--text-limit", "40", "--work-dir", str(tmp_path), "--storage", str(storage),
            "--out", str(tmp_path / "own.json")]
    args[args.index("--steps"):args.index("--steps") + 2] = []
    own_bench.main(["all", "--pilot", "--pilot-steps", "1", "2", *args])
    out = capsys.readouterr().out
    assert "pilot     2 steps: 8 runs" in out
    study = optuna.load_study(study_name="own-bench-kdpre", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(storage))))
    runs = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(runs) == 8 and study.direction == optuna.study.StudyDirection.MINIMIZE
    t = runs[0]
    depth = int(t.user_attrs["arch_id"][1])
    assert t.user_attrs["losses"]["2"] == pytest.approx(t.user_attrs["raw_dev_kd_loss"]["2"] / (1 + 2 * depth))
    assert t.value == t.user_attrs["losses"]["2"] > 0 and len(t.user_attrs["teacher"]) == 64
    data = json.loads((tmp_path / "own.json").read_text())
    assert sum("kdpre@2" in e["scores"] for e in data["entries"]) == 4 and data["kdpre"]["pilot"]["complete"]
