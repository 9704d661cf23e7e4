"""Faults: a worker killed mid-evaluation, a distillation killed mid-training, a crash mid-checkpoint."""

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from benchmarks import reliability  # noqa: E402


def test_killed_worker_loses_nothing(postgres_url, tmp_path):
    result = reliability.run(postgres_url, workers=4, trials=24, kill=True, workdir=tmp_path)
    print(json.dumps(result))
    assert result["killed_trial"] is not None
    assert result["exit_codes"][0] == -signal.SIGKILL and result["exit_codes"][1:] == [0, 0, 0]
    assert result["completed"] == 24
    assert result["duplicated"] == 0 and result["lost"] == 0
    assert result["retried_after_kill"] >= 1 and result["failed"] >= 1


def test_a_cli_search_killed_while_proposing_finishes_on_the_rerun(tmp_path):
    result = reliability.run_cli(f"sqlite:///{tmp_path / 'p.db'}", signal.SIGKILL, phase="proposal", trials=8,
                                 after=2)
    print(json.dumps(result))
    assert result["exit_codes"] == [-signal.SIGKILL, 0] and not result["traceback"]
    assert result["stopped_trial_state_after_signal"] == "RUNNING"
    assert not result["stopped_trial_objective_had_begun"]
    assert result["finished"] == 8 and result["running"] == 0 and result["waiting"] == 0
    assert result["lost"] == 0 and result["duplicated"] == 0 and result["retried"] == 1


TRAIN = textwrap.dedent(
    """
    import sys, optuna_wpca
    from optuna_wpca import WPCASpace
    from optuna_wpca.distill import StudentClassifier, Task, TrainConfig, load_task, train
    full = load_task("rt-sentiment")
    task = Task("small", full.train[:64], full.dev[:16], 2)
    space = WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
    model = StudentClassifier.from_candidate(space.build(space.sample(0), seed=0), 2)
    r = train(model, task, TrainConfig(steps=int(sys.argv[2]), batch_size=4, max_seq_len=16, eval_every=50,
                                       checkpoint_every=2), checkpoint_dir=sys.argv[1])
    print("RESUMED_FROM", r.resumed_from, "STEPS", r.steps)
    """
)


def test_killed_distillation_resumes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    ckpt = tmp_path / "ckpt"
    proc = subprocess.Popen([sys.executable, str(script), str(ckpt), "100000"], stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (ckpt / "checkpoint.pt").exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    step = torch.load(ckpt / "checkpoint.pt", weights_only=False)["step"]
    assert step >= 2
    done = subprocess.run([sys.executable, str(script), str(ckpt), str(step + 4)], capture_output=True, text=True,
                          check=True)
    assert f"RESUMED_FROM {step} STEPS {step + 4}" in done.stdout


def test_crash_during_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch):
    from optuna_wpca.distill import _trainer

    _trainer._save_checkpoint(tmp_path, {"step": 1, "weights": torch.ones(3)})

    def broken_save(obj, path, *args, **kwargs):
        Path(path).write_bytes(b"half a checkpo")
        raise OSError("disk full")

    monkeypatch.setattr(_trainer.torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        _trainer._save_checkpoint(tmp_path, {"step": 2, "weights": torch.zeros(3)})
    monkeypatch.undo()
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert state["step"] == 1 and torch.equal(state["weights"], torch.ones(3))
