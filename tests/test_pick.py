"""The second stage (``optuna_wpca.pick``, ``optuna-wpca pick``): shortlist, pruning, the recorded pick,
show/export reading it, one-line refusals, and a resume after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from optuna_wpca import DecoderSpace, WPCASpace, ZeroCostObjective, text_batch
from optuna_wpca import _attributes as attr
from optuna_wpca.cli import main
from optuna_wpca.pick import (
    PickProtocol,
    ShortlistObjective,
    ShortlistTrainer,
    default_protocol,
    pick_top_trials,
    read_pick,
    shortlist,
)

SPACE = DecoderSpace(num_layers_choices=(1, 2), hidden_sizes=(32, 64), heads=(2,), ffn_sizes=(64, 128))
TINY = PickProtocol(steps=4, report_every=1, batch_size=2, seq_len=16, eval_windows=2, warmup_steps=1,
                    learning_rate=3e-3)


def _zero_cost_study(url: str, name: str = "zc", n: int = 12) -> optuna.Study:
    study = optuna.create_study(study_name=name, storage=url, direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(ZeroCostObjective(SPACE, proxies=["params"], batch=text_batch(batch_size=2, seq_len=16)),
                   n_trials=n)
    return study


def _names(url: str) -> list[str]:
    return sorted(s.study_name for s in optuna.get_all_study_summaries(url))


def test_the_stage_trains_the_shortlist_prunes_and_records_the_pick(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    study = _zero_cost_study(url)
    distinct = shortlist(study, 4)
    assert [t.value for t in distinct] == sorted((t.value for t in distinct), reverse=True)
    record = pick_top_trials(study, k=4, protocol=TINY, checkpoint_root=tmp_path / "ckpt")
    stage = optuna.load_study(study_name="zc-pick", storage=url)
    states = [t.state for t in stage.trials]
    assert states.count(TrialState.PRUNED) >= 1, "successive halving at reduction factor 2 stops someone"
    complete = [t for t in stage.trials if t.state == TrialState.COMPLETE]
    best = min(complete, key=lambda t: t.value)
    assert record["zero_cost_trial"] == best.user_attrs[attr.SOURCE_TRIAL]
    assert record["loss"] == pytest.approx(best.value)
    assert [r["zero_cost_trial"] for r in record["shortlist"]] == [t.number for t in distinct]
    for t in stage.trials:  # every report is in the trial, and in its recorded losses
        assert {str(s): v for s, v in t.intermediate_values.items()} == t.user_attrs[attr.LOSSES]
        if t.state == TrialState.PRUNED:
            assert max(t.intermediate_values) < TINY.steps
    # the same stage again trains nothing and records the same pick
    again = pick_top_trials(study, k=4, protocol=TINY, checkpoint_root=tmp_path / "ckpt")
    assert len(optuna.load_study(study_name="zc-pick", storage=url).trials) == len(stage.trials)
    assert again["zero_cost_trial"] == record["zero_cost_trial"]
    assert read_pick(optuna.load_study(study_name="zc", storage=url))["zero_cost_trial"] == record["zero_cost_trial"]


def test_show_and_export_use_the_recorded_pick(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    study = _zero_cost_study(url)
    record = pick_top_trials(study, k=3, protocol=TINY)
    picked = record["zero_cost_trial"]
    assert main(["show", "--storage", url, "--study-name", "zc"]) == 0
    out = capsys.readouterr().out
    assert f"trial {picked} picked" in out and "<- pick" in out
    assert main(["export", "--storage", url, "--study-name", "zc", "--out", str(tmp_path / "m")]) == 0
    exported = json.loads((tmp_path / "m" / "architecture.json").read_text())
    assert exported["trial"] == picked
    card = (tmp_path / "m" / "README.md").read_text()
    assert "the second stage's pick" in card and "<- pick" in card
    # --trial still exports another one, and its card says which was picked
    other = next(r["zero_cost_trial"] for r in record["shortlist"] if r["zero_cost_trial"] != picked)
    assert main(["export", "--storage", url, "--study-name", "zc", "--trial", str(other),
                 "--out", str(tmp_path / "o")]) == 0
    assert f"The second stage picked trial {picked}, not this one" in (tmp_path / "o" / "README.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["--shortlist", "50"], "fewer than a shortlist of 50"),
    (["--shortlist", "0"], "--shortlist must be >= 1"),
    (["--steps", "0"], "--steps: steps must be an integer >= 1"),
    (["--signal", "kd"], "a decoder trains by next-token loss"),
])
def test_pick_refuses_in_one_line_and_writes_nothing(tmp_path, capsys, args, message):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    _zero_cost_study(url, n=6)
    assert main(["pick", "--storage", url, "--study-name", "zc", "--work-dir", str(tmp_path / "w"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert _names(url) == ["zc"] and not (tmp_path / "w").exists()


def test_pick_refuses_a_study_without_a_zero_cost_objective(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    plain = optuna.create_study(study_name="plain", storage=url, direction="maximize")
    plain.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    plain.set_user_attr(attr.SPACE, SPACE.to_dict())  # a space, but no zero-cost objective recorded
    assert main(["pick", "--storage", url, "--study-name", "plain", "--work-dir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "no zero-cost objective recorded" in err or "optuna-wpca" in err
    assert len(err.strip().splitlines()) == 1
    assert _names(url) == ["plain"]
    with pytest.raises(ValueError, match="no zero-cost objective recorded"):
        shortlist(plain, 1)


def test_a_resume_with_another_protocol_is_refused_before_anything_is_written(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    study = _zero_cost_study(url)
    pick_top_trials(study, k=2, protocol=TINY)
    before = len(optuna.load_study(study_name="zc-pick", storage=url).trials)
    other = PickProtocol(**{**TINY.to_dict(), "learning_rate": 1e-4})
    with pytest.raises(ValueError, match=r"another protocol: learning_rate 0.003 \(now 0.0001\)"):
        pick_top_trials(study, k=2, protocol=other)
    with pytest.raises(ValueError, match="holds a shortlist of 2, not 3"):
        pick_top_trials(study, k=3, protocol=TINY)
    assert len(optuna.load_study(study_name="zc-pick", storage=url).trials) == before


def test_the_objective_works_in_a_plain_optuna_study_with_any_pruner():
    trainer = ShortlistTrainer(SPACE, TINY)
    study = optuna.create_study(direction="minimize", pruner=optuna.pruners.MedianPruner(n_startup_trials=1))
    study.optimize(ShortlistObjective(trainer), n_trials=3)
    first = study.trials[0]
    assert first.state == TrialState.COMPLETE and sorted(first.intermediate_values) == [1, 2, 3, 4]
    assert first.value == pytest.approx(first.intermediate_values[4])


def test_the_default_protocols_are_the_committed_ones():
    # Changing these changes what every measured pick in docs/benchmarks.md stands for: a new protocol
    # needs a new measurement (benchmarks/pick.py), not an edit here.
    assert default_protocol("encoder").to_dict() == {
        "steps": 100, "report_every": 25, "batch_size": 32, "seq_len": 64, "learning_rate": 1e-3,
        "warmup_steps": 40, "eval_windows": 128, "train_examples": 512, "signal": "auto",
        "pruner": "successive-halving", "reduction_factor": 2, "seed": 0}
    assert default_protocol("decoder").batch_size == 16
    assert default_protocol("encoder").signal_for("encoder") == "kd"
    assert default_protocol("decoder").signal_for("decoder") == "next_token"
    assert default_protocol("encoder").rungs() == [25, 50, 75, 100]


def test_an_encoder_shortlist_trains_by_kd_against_the_bundled_teacher(tmp_path):
    space = WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
    protocol = PickProtocol(steps=2, report_every=1, batch_size=2, seq_len=16, eval_windows=4, train_examples=8,
                            pruner="none")
    trainer = ShortlistTrainer(space, protocol, work_dir=tmp_path)
    curve = trainer.train(space.sample(0))
    assert trainer.signal == "kd" and sorted(curve.losses) == [1, 2]
    assert all(v > 0 for v in curve.losses.values())
    assert any(p.name.startswith("teacher-targets-") for p in tmp_path.iterdir())
    # a checkpointed run resumes where it stopped and reports its measurements again
    again = trainer.train(space.sample(0), checkpoint_dir=tmp_path / "c")
    resumed = trainer.train(space.sample(0), checkpoint_dir=tmp_path / "c")
    assert resumed.resumed_from == 2 and resumed.losses == pytest.approx(again.losses)


SCRIPT = """
import sys
from optuna_wpca.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_kill_9_during_the_stage_then_a_rerun_finishes_it_training_nothing_twice(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    _zero_cost_study(url)
    args = [sys.executable, "-c", SCRIPT, "pick", "--storage", url, "--study-name", "zc", "--shortlist", "3",
            "--steps", "40", "--report-every", "4", "--batch-size", "2", "--seq-len", "16", "--eval-windows", "2",
            "--pruner", "none", "--work-dir", str(tmp_path / "w")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    killed_in = None
    try:
        while time.time() < deadline:  # wait for: one architecture done, the next one checkpointed
            time.sleep(0.2)
            if "zc-pick" not in _names(url):
                continue
            stage = optuna.load_study(study_name="zc-pick", storage=url)
            done = [t for t in stage.trials if t.state == TrialState.COMPLETE]
            running = [t for t in stage.trials if t.state == TrialState.RUNNING]
            if done and running and len(running[0].intermediate_values) >= 2:
                killed_in = running[0].user_attrs[attr.SOURCE_TRIAL]
                break
        assert killed_in is not None, "the stage never reached a checkpointed second architecture"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    finished_before = {t.user_attrs[attr.SOURCE_TRIAL]: t.number for t in
                       optuna.load_study(study_name="zc-pick", storage=url).trials if t.state == TrialState.COMPLETE}
    rerun = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    stage = optuna.load_study(study_name="zc-pick", storage=url)
    by_source: dict[int, list] = {}
    for t in stage.trials:
        by_source.setdefault(t.user_attrs[attr.SOURCE_TRIAL], []).append(t)
    assert len(by_source) == 3
    for source, trials in by_source.items():
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        assert len(complete) == 1, f"zero-cost trial {source} finished once"
        if source in finished_before:  # finished before the kill: not trained again
            assert complete[0].number == finished_before[source] and len(trials) == 1
    killed = by_source[killed_in]
    assert [t.state for t in killed] == [TrialState.FAIL, TrialState.COMPLETE]
    resumed = killed[1]
    assert resumed.user_attrs["resumed_from_step"] >= 8, "the killed run resumed from its checkpoint"
    assert sorted(resumed.intermediate_values) == list(range(4, 41, 4))  # earlier measurements reported again
    assert "picked" in rerun.stdout
    record = read_pick(optuna.load_study(study_name="zc", storage=url))
    assert {r["state"] for r in record["shortlist"]} == {"COMPLETE"}


def test_the_guide_pick_snippet_names_nothing_undefined():
    import ast
    import re

    import optuna_wpca
    import optuna_wpca.pick as pick

    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide.md").read_text()
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", guide, flags=re.S) if "PickTopTrials(" in b)
    tree = ast.parse(snippet)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("optuna_wpca", "optuna_wpca.pick"):
            module = optuna_wpca if node.module == "optuna_wpca" else pick
            assert all(hasattr(module, a.name) for a in node.names)
    assert hasattr(optuna_wpca, "preset") and hasattr(optuna_wpca, "ZeroCostObjective")
