"""Predicted latency: calibrated once, then independent of the machine's load; the CLI path."""

import json
import threading
import time

import optuna
import pytest

import optuna_wpca
from optuna_wpca.cli import main
from optuna_wpca.proxies import LatencyModel, calibrate_latency_model, compute_proxy, operation_counts

SPACE = optuna_wpca.WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)
BATCH = optuna_wpca.text_batch(batch_size=2, seq_len=64)


def test_operation_counts_grow_with_the_ffn_and_are_the_same_under_load():
    narrow = SPACE.from_params({**{f"layer_{i:02d}_block": "bert" for i in range(3)},
                                **{f"layer_{i:02d}_ffn_mult": 1 for i in range(3)}})
    wide = SPACE.from_params({**{f"layer_{i:02d}_block": "bert" for i in range(3)},
                              **{f"layer_{i:02d}_ffn_mult": 6 for i in range(3)}})
    a = operation_counts(SPACE.build(narrow, seed=0), BATCH)
    b = operation_counts(SPACE.build(wide, seed=0), BATCH)
    assert b["matmul_gflop"] > a["matmul_gflop"] > 0 and b["attention_gflop"] == a["attention_gflop"] > 0
    assert a["layers"] == 3.0
    stop = threading.Event()

    def burn():  # another job on the machine
        while not stop.is_set():
            sum(i * i for i in range(10_000))

    worker = threading.Thread(target=burn)
    worker.start()
    try:
        assert operation_counts(SPACE.build(narrow, seed=0), BATCH) == a
    finally:
        stop.set()
        worker.join()


def test_calibration_round_trips_and_the_proxy_needs_it(tmp_path):
    model = calibrate_latency_model(SPACE, n=6, holdout=3, repeats=2, batch=BATCH)
    assert all(c >= 0 for c in model.coefficients.values())
    assert {"holdout_kendall_tau", "holdout_median_relative_error"} <= set(model.calibration)
    model.save(tmp_path / "lm.json")
    again = LatencyModel.load(tmp_path / "lm.json")
    built = SPACE.build(SPACE.sample(3), seed=0)
    value = compute_proxy("predicted_latency", built, BATCH, latency_model=again).value
    assert value == pytest.approx(model.predict(operation_counts(built, BATCH)))
    with pytest.raises(ValueError, match="needs a calibrated latency model"):
        compute_proxy("predicted_latency", built, BATCH)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LatencyModel.load(tmp_path / "nope.json")


def test_a_cli_search_against_predicted_latency(tmp_path, capsys):
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(SPACE.to_dict()))
    lm = tmp_path / "lm.json"
    rc = main(["calibrate-latency", "--space", str(space_file), "--n", "6", "--holdout", "3", "--repeats", "2",
               "--out", str(lm)])
    assert rc == (0 if LatencyModel.load(lm).reliable else 1)  # 3 held-out timings: tau is one of +-1, +-1/3
    assert "Kendall tau" in capsys.readouterr().out
    url = f"sqlite:///{tmp_path / 'p.db'}"
    args = ["search", "--space", str(space_file), "--storage", url, "--study-name", "p", "--population-size", "2",
            "--batch-size", "8", "--seq-len", "16", "--quiet", "--proxy", "wpca", "--proxy", "predicted_latency"]
    assert main([*args, "--n-trials", "3"]) == 2  # no --latency-model
    assert "needs --latency-model" in capsys.readouterr().err
    assert main([*args, "--n-trials", "4", "--latency-model", str(lm)]) == 0
    study = optuna.load_study(study_name="p", storage=url)
    assert study.metric_names == ["wpca", "predicted_latency (ms)"]
    assert study.user_attrs["optuna_wpca.minibatch_source"]["latency_model"] == json.loads(lm.read_text())
    model = LatencyModel.load(lm)
    for t in study.trials:
        built = SPACE.build(SPACE.from_params(t.params), seed=0)
        assert t.values[1] == pytest.approx(model.predict(operation_counts(built, optuna_wpca.text_batch(
            batch_size=8, seq_len=16))))
