"""The real optuna-dashboard server, on a loopback port, reads back what the plugin wrote."""

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest

from optuna_wpca import WPCASampler, WPCASpace, ZeroCostObjective, text_batch
from optuna_wpca._dashboard import architecture_svg


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dash")
    url = f"sqlite:///{tmp / 'nas.db'}"
    artifacts = tmp / "artifacts"
    artifacts.mkdir()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)
    budget = space.min_params() * 2
    study = optuna.create_study(study_name="dash", storage=url, direction="maximize",
                                sampler=WPCASampler(space, max_params=budget, population_size=3, seed=0))
    store = optuna.artifacts.FileSystemArtifactStore(str(artifacts))
    # The budget is given once, to the sampler; the sampler and the objective record the search.
    study.optimize(ZeroCostObjective(space, batch=text_batch(batch_size=4, seq_len=16), artifact_store=store),
                   n_trials=4)
    port = free_port()
    exe = Path(sys.executable).with_name("optuna-dashboard")
    proc = subprocess.Popen([str(exe), url, "--host", "127.0.0.1", "--port", str(port), "--artifact-dir",
                             str(artifacts)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            get_json(f"{base}/api/meta")
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("optuna-dashboard did not start")
            time.sleep(0.3)
    yield base, study, space
    proc.terminate()
    proc.wait(timeout=10)


def test_study_and_trials_over_http(dashboard):
    base, study, space = dashboard
    studies = get_json(f"{base}/api/studies")["study_summaries"]
    ours = [s for s in studies if s["study_name"] == "dash"]
    assert ours
    detail = get_json(f"{base}/api/studies/{ours[0]['study_id']}")
    trials = detail["trials"]
    assert len(trials) == 4
    attrs = {a["key"]: a["value"] for a in trials[0]["user_attrs"]}
    assert {"num_params", "pca_dims", "architecture", "feasible", "wpca.vpca"} <= set(attrs)
    note = detail["note"]["body"]
    assert "optuna-wpca search" in note and f"<= {study.user_attrs['optuna_wpca.max_params']:,.0f}" in note
    assert "`wpca`" in note and "4x16" in note
    assert "PCA dim" in trials[0]["note"]["body"]
    artifacts = trials[0]["artifacts"]
    assert artifacts and artifacts[0]["mimetype"] == "image/svg+xml"
    study_id, trial_id = ours[0]["study_id"], trials[0]["trial_id"]
    with urllib.request.urlopen(f"{base}/artifacts/{study_id}/{trial_id}/{artifacts[0]['artifact_id']}") as r:
        svg = r.read().decode()
    assert svg.startswith("<svg") and svg.count("layer") >= 3


def test_svg_has_one_bar_per_layer():
    space = WPCASpace.tiny()
    assert architecture_svg(space, space.sample(0)).count('<rect x="210"') == 6
