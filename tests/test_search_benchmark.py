"""benchmarks/search.py: runs from several processes meet in one partial file, none overwritten."""

import json
import multiprocessing
from pathlib import Path

from benchmarks import search  # noqa: E402

SETTINGS = {"batch": [16, 64], "evaluations": 1000, "population": 50, "budget_params": 15.7e6}


def _save_many(path: str, seed: int) -> None:
    for name in ("wpca_ga", "random", "tpe", "nsgaii"):
        search.save_run(Path(path), SETTINGS, f"{name}/{seed}", {"best": float(seed)})


def test_two_processes_keep_each_others_runs(tmp_path):
    path = tmp_path / "search.json.partial"
    search.save_run(path, SETTINGS, "wpca_ga/0", {"best": 1.0})
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_save_many, args=(str(path), seed)) for seed in (1, 2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    runs = json.loads(path.read_text())["runs"]
    assert sorted(runs) == sorted(
        ["wpca_ga/0"] + [f"{n}/{s}" for s in (1, 2) for n in ("wpca_ga", "random", "tpe", "nsgaii")]
    )
    assert runs["tpe/2"] == {"best": 2.0}


def test_runs_of_other_settings_are_not_mixed_in(tmp_path):
    path = tmp_path / "search.json.partial"
    search.save_run(path, {**SETTINGS, "evaluations": 10}, "random/0", {"best": 1.0})
    runs = search.save_run(path, SETTINGS, "random/1", {"best": 2.0})
    assert runs == {"random/1": {"best": 2.0}}
    assert json.loads(path.read_text())["settings"] == SETTINGS
