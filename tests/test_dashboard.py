"""The real optuna-dashboard server, on a loopback port, reads back what the plugin wrote."""

import contextlib
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
    with running_dashboard(url, artifacts) as base:
        yield base, study, space


@contextlib.contextmanager
def running_dashboard(url, artifacts):
    """The real optuna-dashboard on a free loopback port; its base URL once it answers."""
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
    try:
        yield base
    finally:
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
    assert "`wpca`" in note and "4 x 16 tokens of bundled WikiText-2" in note and "initialisation seed 0" in note
    trial_note = trials[0]["note"]["body"]
    assert "PCA dim" in trial_note and "| wpca |" in trial_note
    number = trials[0]["number"]
    assert f"optuna-wpca export --storage {study._storage._backend.url} --study-name dash --trial {number}" in trial_note
    assert isinstance(attrs["architecture"], str) and len(attrs["architecture"]) < 60  # one short line
    assert len(attrs["seconds"].split(".")[-1]) <= 3 and "architecture_artifact" not in attrs  # values come as text
    artifacts = trials[0]["artifacts"]
    assert artifacts and artifacts[0]["mimetype"] == "image/svg+xml"
    assert artifacts[0]["filename"] == f"trial-{number:05d}-architecture.svg"
    study_id, trial_id = ours[0]["study_id"], trials[0]["trial_id"]
    with urllib.request.urlopen(f"{base}/artifacts/{study_id}/{trial_id}/{artifacts[0]['artifact_id']}") as r:
        svg = r.read().decode()
    assert svg.startswith("<svg") and svg.count('class="layer"') == 3
    assert f"{int(attrs['num_params']) / 1e3:.3g}k parameters" in svg and "wpca " in svg and "PCA dim" in svg


def test_svg_has_one_bar_per_layer_a_legend_and_the_pca_dims():
    space = WPCASpace.tiny()
    arch = space.from_params({**{f"layer_{i:02d}_block": "bert" if i % 2 else "mobilebert" for i in range(6)},
                              **{f"layer_{i:02d}_ffn_mult": 1 + i for i in range(6)}})
    svg = architecture_svg(space, arch, values={"wpca": 1.23e9, "latency": 6.5}, pca_dims=[10, 20, 30, 40, 50, 60])
    assert svg.count('class="layer"') == 6 and "BERT block" in svg and "MobileBERT block" in svg
    assert "wpca 1.23G" in svg and "latency 6.5" in svg and f"{space.num_params(arch) / 1e6:.3g}M parameters" in svg
    assert ">792 / 60<" in svg  # the last layer: FFN 132 x 6 and its PCA dim


def test_every_picture_of_a_space_is_drawn_on_one_scale():
    import re

    space = WPCASpace.tiny()
    narrow = space.from_params({**{f"layer_{i:02d}_block": "bert" for i in range(6)},
                                **{f"layer_{i:02d}_ffn_mult": 3 for i in range(6)}})  # FFN 396 everywhere
    wide = space.from_params({**{f"layer_{i:02d}_block": "bert" for i in range(6)},
                              **{f"layer_{i:02d}_ffn_mult": 6 for i in range(6)}})  # FFN 792 everywhere

    def first_bar(svg):
        return float(re.search(r'<g class="layer">.*?<rect x="\d+" y="[\d.]+" width="([\d.]+)"', svg, re.S).group(1))

    a, b = first_bar(architecture_svg(space, narrow)), first_bar(architecture_svg(space, wide))
    assert b == pytest.approx(2 * a, rel=0.01)  # 792 is drawn twice as long as 396, in any trial
