"""What a new user meets first: refusals before anything is written, the README agreeing with the code,
refined trials shown like searched ones, latency models that say what they are worth."""

import ast
import json
import logging
import re
import threading
import time
from pathlib import Path

import optuna
import pytest

import optuna_wpca
from optuna_wpca import (
    Budget, DecoderSpace, WPCASampler, WPCASpace, ZeroCostObjective, record_search, text_batch,
)
from optuna_wpca import _attributes as attr
from optuna_wpca.cli import build_parser, main
from optuna_wpca.proxies import DEFAULT_OBJECTIVES, LatencyModel, get_proxy

ROOT = Path(__file__).resolve().parents[1]
SPACE = WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)
DECODER = DecoderSpace(num_layers_choices=(2,), hidden_sizes=(64,), heads=(2,), ffn_sizes=(64, 128),
                       vocab_size=30522, max_position_embeddings=64)


def _space_file(tmp_path, space=SPACE) -> Path:
    path = tmp_path / f"{space.kind}.json"
    path.write_text(json.dumps(space.to_dict()))
    return path


def _search_args(tmp_path, url, name, *extra, space=SPACE):
    return ["search", "--space", str(_space_file(tmp_path, space)), "--storage", url, "--study-name", name,
            "--population-size", "3", "--batch-size", "4", "--seq-len", "16", "--quiet", *extra]


# -- a proxy that a command cannot feed is refused before anything is written -----------------------------------

def test_search_refuses_the_supernet_proxy_before_any_storage_is_touched(tmp_path, capsys):
    db = tmp_path / "b.db"
    assert main(_search_args(tmp_path, f"sqlite:///{db}", "b", "--n-trials", "2", "--proxy", "supernet")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--proxy supernet needs supernet=" in err[0] and "rank --proxy supernet" in err[0]
    assert not db.exists()  # no study, no FAIL trial: a rerun under that name is free
    with pytest.raises(ValueError, match="cannot score without supernet="):
        ZeroCostObjective(SPACE, proxies=["supernet"])
    assert get_proxy("supernet").requires == ("supernet",)
    assert get_proxy("predicted_latency").requires == ("latency_model",)


def test_a_combination_requires_what_its_parts_require():
    assert get_proxy("wpca+predicted_latency").requires == ("latency_model",)
    assert get_proxy("wpca+params").requires == ()


# -- distill on a decoder study ----------------------------------------------------------------------------------

def test_distill_refuses_a_decoder_study_before_the_kd_study_exists(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'd.db'}"
    study = optuna.create_study(study_name="dec", storage=url, direction="maximize")
    study.optimize(ZeroCostObjective(DECODER, batch=text_batch(batch_size=2, seq_len=16)), n_trials=1)
    assert main(["distill", "--storage", url, "--study-name", "dec", "--teacher-steps", "0", "--steps", "1",
                 "--k", "1", "--train-examples", "8", "--pruner", "none", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "needs an encoder space" in err and "Traceback" not in err
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["dec"]  # no "dec-kd"
    from optuna_wpca.distill import DistillationObjective, load_task

    with pytest.raises(ValueError, match="needs an encoder space"):
        DistillationObjective(DECODER, load_task("rt-sentiment"))


# -- the README says what the code does ---------------------------------------------------------------------------

def test_the_readme_states_the_search_defaults_of_the_code():
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `optuna-wpca search`"))
    proxy = re.search(r"`--proxy` \(default ([^;]*);", row)
    assert proxy, "the search row states --proxy's default"
    named = re.findall(r"`([a-z_+]+)`", proxy.group(1))
    assert named == [DEFAULT_OBJECTIVES["encoder"], DEFAULT_OBJECTIVES["decoder"]]
    assert "encoders" in proxy.group(1) and "decoders" in proxy.group(1)
    search = build_parser()._subparsers._group_actions[0].choices["search"]
    storage = next(a for a in search._actions if "--storage" in a.option_strings).default
    assert f"`--storage` default `{storage}`" in row
    from optuna_wpca.cli._study_commands import BATCH_SECONDS

    assert f"at least every {BATCH_SECONDS:g} s" in row
    from optuna_wpca.sampler import DEFAULT_OPERATORS

    assert f"else `{DEFAULT_OPERATORS}` where the space has ordered genes" in row and "`paper` on W-PCA's spaces" in row
    # "0.2's default" names a past default: the package is past 0.2
    assert "0.2's default" not in readme or not optuna_wpca.__version__.startswith("0.2")


def test_every_option_with_a_default_says_it_in_its_help():
    parser = build_parser()
    missing = []
    for name, sub in parser._subparsers._group_actions[0].choices.items():
        for action in sub._actions:
            if not action.option_strings or action.help in (None, "==SUPPRESS==") or action.dest == "help":
                continue
            if action.default in (None, False) or isinstance(action.default, bool):
                continue
            if "default" not in action.help:
                missing.append(f"{name} {action.option_strings[0]}")
    assert not missing, f"options whose help does not state the default: {missing}"


def test_the_guide_distillation_snippet_names_nothing_undefined():
    guide = (ROOT / "docs" / "guide.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, flags=re.S)
    snippet = next(b for b in blocks if "DistillTopTrials(" in b)
    tree = ast.parse(snippet)
    import builtins

    defined = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert used <= defined, f"undefined in the guide's snippet: {sorted(used - defined)}"
    import optuna_wpca.distill as distill

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("optuna_wpca", "optuna_wpca.distill"):
            module = optuna_wpca if node.module == "optuna_wpca" else distill
            assert all(hasattr(module, a.name) for a in node.names)


# -- the teacher --------------------------------------------------------------------------------------------------

class _Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_load_teacher_defaults_to_the_bundled_one_and_says_when_its_head_is_random(capfd):
    from optuna_wpca.distill import bundled_teacher_path, load_teacher

    handler = _Collect()
    logger = logging.getLogger("optuna.optuna_wpca.distill")
    logger.addHandler(handler)
    try:
        encoder = load_teacher()
        assert encoder.config.model_type == "bert" and not handler.messages
        load_teacher(bundled_teacher_path(), num_labels=2)
    finally:
        logger.removeHandler(handler)
    assert len(handler.messages) == 1 and "no trained classification head for 2 labels" in handler.messages[0]
    assert "classifier" in handler.messages[0]
    assert "LOAD REPORT" not in capfd.readouterr().err  # transformers' table is replaced by that one line


# -- pruners from the CLI -----------------------------------------------------------------------------------------

def _distill_args(*extra):
    return build_parser().parse_args(["distill", *extra])


def test_pruner_resources_reach_the_pruner_and_a_pruner_with_one_report_is_refused():
    from optuna_wpca.cli._distill import check_distill_args, make_pruner
    from optuna_wpca.cli import CLIError

    pruner = make_pruner(_distill_args("--steps", "600", "--eval-every", "50", "--min-resource", "100",
                                       "--reduction-factor", "2"))
    assert isinstance(pruner, optuna.pruners.HyperbandPruner)
    assert pruner._min_resource == 100 and pruner._max_resource == 600 and pruner._reduction_factor == 2
    sha = make_pruner(_distill_args("--pruner", "successive-halving", "--steps", "600", "--eval-every", "50"))
    assert isinstance(sha, optuna.pruners.SuccessiveHalvingPruner) and sha._min_resource == 50
    median = make_pruner(_distill_args("--pruner", "median", "--steps", "600", "--eval-every", "50"))
    assert isinstance(median, optuna.pruners.MedianPruner) and median._n_warmup_steps == 50
    with pytest.raises(CLIError, match="--eval-every 100 >= --steps 8"):
        check_distill_args(_distill_args("--steps", "8"))
    check_distill_args(_distill_args("--steps", "8", "--pruner", "none"))
    with pytest.raises(CLIError, match="must be below --max-resource"):
        make_pruner(_distill_args("--steps", "600", "--min-resource", "700"))


# -- storage before minibatch; budgets that constrain nothing --------------------------------------------------------

def test_a_bad_storage_url_is_said_before_the_minibatch_is_cut(tmp_path, capsys, monkeypatch):
    import optuna_wpca._text as text

    def no_batch(*_a, **_k):
        raise AssertionError("the minibatch was cut before the storage was opened")

    monkeypatch.setattr(text, "text_batch", no_batch)
    assert main(_search_args(tmp_path, "sqlite:/nope", "x", "--n-trials", "1")) == 2
    assert "storage URL 'sqlite:/nope' is malformed" in capsys.readouterr().err


def test_a_budget_above_the_largest_candidate_is_said(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    assert SPACE.num_params(SPACE.sample(0)) <= SPACE.max_params()
    assert max(SPACE.num_params(SPACE.sample(i)) for i in range(64)) <= SPACE.max_params()
    assert main(_search_args(tmp_path, url, "l", "--n-trials", "2", "--max-params", "1e30", "--top", "1")) == 0
    captured = capsys.readouterr()
    assert f"above the space's largest candidate ({SPACE.max_params():,} parameters" in captured.err
    assert "best 1 distinct architecture:" in captured.out  # one, not "1 ... architectures"


# -- refined trials look like searched ones, plus where they came from ---------------------------------------------

def test_a_refined_trial_gets_the_note_picture_and_card_of_a_searched_one(tmp_path, capsys):
    from test_dashboard import get_json, running_dashboard

    url = f"sqlite:///{tmp_path / 'r.db'}"
    artifacts = tmp_path / "artifacts"
    assert main(_search_args(tmp_path, url, "r", "--n-trials", "6", "--proxy", "wpca", "--artifact-dir",
                             str(artifacts), "--max-params", str(SPACE.num_params(SPACE.sample(0)) * 1.5))) == 0
    study = optuna.load_study(study_name="r", storage=url)
    assert study.user_attrs[attr.ARTIFACT_DIR] == str(artifacts.resolve())
    source = max((t for t in study.trials if t.state.name == "COMPLETE"), key=lambda t: t.value).number
    # refine without --artifact-dir: the search's folder is recorded in the study
    assert main(["refine", "--storage", url, "--study-name", "r", "--trial", str(source), "--no-heads"]) == 0
    capsys.readouterr()
    study = optuna.load_study(study_name="r", storage=url)
    refined = [t for t in study.trials if t.user_attrs.get(attr.REFINED_FROM) == source]
    assert refined, "the refinement changed nothing: no trial to look at"
    number = refined[0].number
    with running_dashboard(url, artifacts) as base:
        sid = next(s["study_id"] for s in get_json(f"{base}/api/studies")["study_summaries"]
                   if s["study_name"] == "r")
        trials = {t["number"]: t for t in get_json(f"{base}/api/studies/{sid}")["trials"]}
    searched, ours = trials[source], trials[number]
    assert "PCA dim" in searched["note"]["body"] and "PCA dim" in ours["note"]["body"]
    assert f"Refined from trial {source}" in ours["note"]["body"]
    assert ours["artifacts"] and ours["artifacts"][0]["filename"] == f"trial-{number:05d}-architecture.svg"
    out = tmp_path / "export"
    assert main(["export", "--storage", url, "--study-name", "r", "--trial", str(number), "--out", str(out)]) == 0
    card = (out / "README.md").read_text()
    assert f"Refined from trial {source} by `optuna-wpca refine`" in card
    ga = next(line for line in card.splitlines() if line.startswith("- GA"))
    assert f"trial {source}, the one refined, came from generation" in ga and "generations the study has run" in ga
    searched_card = tmp_path / "export-searched"
    assert main(["export", "--storage", url, "--study-name", "r", "--trial", str(source), "--out",
                 str(searched_card)]) == 0
    assert "this trial came from generation" in (searched_card / "README.md").read_text()


# -- latency models -----------------------------------------------------------------------------------------------

def _latency_model(space, tau):
    return LatencyModel({"matmul_gflop": 1.0, "attention_gflop": 1.0, "layers": 0.1, "intercept": 0.5}, "cpu",
                        (1, 128), {"fitted_on": 6, "holdout": 4, "holdout_kendall_tau": tau,
                                   "holdout_median_relative_error": 2.5, "space": space.to_dict()})


def test_a_latency_model_is_strict_json_and_says_whether_it_ranks(tmp_path):
    path = tmp_path / "lm.json"
    _latency_model(SPACE, float("nan")).save(path)
    raw = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"bare {c} in the JSON"))
    assert raw["calibration"]["holdout_kendall_tau"] is None
    loaded = LatencyModel.load(path)
    assert loaded.holdout_tau is None and not loaded.reliable
    assert _latency_model(SPACE, 0.8).reliable and not _latency_model(SPACE, -0.467).reliable


def test_calibrate_latency_warns_and_exits_1_below_the_stated_tau(tmp_path, capsys, monkeypatch):
    import optuna_wpca.proxies as proxies

    monkeypatch.setattr(proxies, "calibrate_latency_model", lambda space, **_k: _latency_model(space, float("nan")))
    out = tmp_path / "lm.json"
    assert main(["calibrate-latency", "--space", str(_space_file(tmp_path)), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Kendall tau of undefined (the predictions are all equal) is below 0.5" in err
    assert json.loads(out.read_text())["calibration"]["space"] == SPACE.to_dict()
    monkeypatch.setattr(proxies, "calibrate_latency_model", lambda space, **_k: _latency_model(space, 0.9))
    assert main(["calibrate-latency", "--space", str(_space_file(tmp_path)), "--out", str(out)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_search_refuses_a_latency_model_of_another_space_and_warns_of_a_poor_one(tmp_path, capsys):
    other = tmp_path / "other.json"
    _latency_model(DECODER, 0.9).save(other)
    db = tmp_path / "p.db"
    args = _search_args(tmp_path, f"sqlite:///{db}", "p", "--n-trials", "2", "--proxy", "wpca", "--proxy",
                        "predicted_latency")
    assert main([*args, "--latency-model", str(other)]) == 2
    err = capsys.readouterr().err
    assert "was calibrated on another space (decoder" in err and not db.exists()
    poor = tmp_path / "poor.json"
    _latency_model(SPACE, -0.467).save(poor)
    assert main([*args, "--latency-model", str(poor)]) == 0
    assert "Kendall tau -0.47, below 0.5" in capsys.readouterr().err


# -- the reference sample, once per study -------------------------------------------------------------------------

def test_two_workers_starting_one_study_score_the_reference_sample_once(tmp_path, monkeypatch):
    monkeypatch.setattr(ZeroCostObjective, "claim_settle", 1.0)  # the default: what settles a race
    monkeypatch.setattr(ZeroCostObjective, "claim_poll", 0.1)
    url = f"sqlite:///{tmp_path / 'ref.db'}"
    batch = text_batch(batch_size=2, seq_len=16)
    study = optuna.create_study(study_name="ref", storage=url, direction="maximize")
    record_search(study, SPACE, Budget(), proxies=["wpca+params"], batch=batch)
    scored, results = [0, 0], [None, None]

    def worker(i):
        objective = ZeroCostObjective(SPACE, proxies=["wpca+params"], batch=batch, reference_size=6)
        mine = optuna.load_study(study_name="ref", storage=url)

        def progress(n=1):
            scored[i] += n

        def waiting(done, total):
            assert 0 <= done <= total == 6  # the other worker's progress, as its claim reports it

        results[i] = objective.reference(mine, progress=progress, waiting=waiting)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    threads[0].start()
    # The second worker starts once the first one's claim is in the study: what it does then is decided
    # by the claim, not by how the two threads happen to be scheduled on a busy machine.
    deadline = time.time() + 120
    while not (optuna.load_study(study_name="ref", storage=url).user_attrs.get(attr.REFERENCE_CLAIM) or scored[0]):
        assert time.time() < deadline and threads[0].is_alive(), "the first worker never claimed the sample"
        time.sleep(0.05)
    threads[1].start()
    for t in threads:
        t.join(timeout=120)
    assert scored == [6, 0]  # the first worker scored all six, the second none (it waited, or came late)
    assert results[0].to_dict() == results[1].to_dict()
    assert optuna.load_study(study_name="ref", storage=url).user_attrs[attr.REFERENCE_CLAIM] is None


def test_a_live_claim_holds_and_a_stale_one_is_taken_over(monkeypatch):
    from optuna_wpca import _claim
    from optuna_wpca._claim import StudyClaim

    now = [1000.0]  # a clock of the test's own: the claim's ages do not depend on the machine's speed
    monkeypatch.setattr(_claim.time, "time", lambda: now[0])
    study = optuna.create_study()
    first = StudyClaim(study, "k", settle=0.0)
    assert first.acquire(total=5)
    first.refresh(2, 5)
    now[0] += 100.0  # younger than the default 120 s
    second = StudyClaim(study, "k", settle=0.0)
    assert not second.acquire() and second.progress() == (2, 5)
    now[0] += 30.0  # first's claim is 130 s old and was not refreshed: stale
    impatient = StudyClaim(study, "k", settle=0.0)
    assert impatient.acquire() and study.user_attrs["k"]["owner"] == impatient.owner
    first.release()  # not the holder any more: leaves the claim alone
    assert study.user_attrs["k"]["owner"] == impatient.owner


# -- Ctrl-C while the reference sample is scored --------------------------------------------------------------------

def test_ctrl_c_during_the_reference_sample_stops_and_records_nothing_half_done(tmp_path):
    import signal
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'c.db'}"
    args = _search_args(tmp_path, url, "c", "--n-trials", "4", "--reference-size", "400", space=DECODER)
    args.remove("--quiet")  # the progress line is what says the sample is being scored
    proc = subprocess.Popen([sys.executable, "-m", "optuna_wpca.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(lambda: proc.stderr.read(1), "")), daemon=True)
    reader.start()
    deadline = time.time() + 300  # however busy the machine: wait for the stage, not for a number of seconds
    while not re.search(r"reference sample:\s+\d+%.*\s([1-9]\d*)/400", "".join(err)):
        assert proc.poll() is None and time.time() < deadline, "".join(err)
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=300)  # a guard against a hang; the latency is benchmarks/stop_latency.py's
    reader.join(timeout=10)
    text = "".join(err)
    assert proc.returncode == 130, text
    assert "stopped while scoring the reference sample" in text and "Traceback" not in text
    study = optuna.load_study(study_name="c", storage=url)
    assert attr.REFERENCE not in study.user_attrs and study.user_attrs[attr.REFERENCE_CLAIM] is None
    assert not study.trials


# -- every proxy option is recorded and compared on resume ---------------------------------------------------------

def test_a_resume_with_another_proxy_option_is_refused_and_defaults_are_no_choice():
    batch = text_batch(batch_size=4, seq_len=16)
    study = optuna.create_study(direction="maximize")
    study.optimize(ZeroCostObjective(SPACE, batch=batch, reduce="mean", eta_mobilebert=0.9), n_trials=2)
    source = study.user_attrs[attr.MINIBATCH_SOURCE]
    assert source["options"] == {"eta_mobilebert": 0.9, "reduce": "mean"}
    assert optuna_wpca.read_search(study).objective_settings()["reduce"] == "mean"
    with pytest.raises(ValueError, match=r"options \{'eta_mobilebert': 0.9, 'reduce': 'mean'\} -> "):
        ZeroCostObjective(SPACE, batch=batch, eta_mobilebert=0.9).record(study)  # what the CLI calls first
    assert len(study.trials) == 2 and study.user_attrs[attr.MINIBATCH_SOURCE] == source  # nothing written
    plain = optuna.create_study(direction="maximize")
    plain.optimize(ZeroCostObjective(SPACE, batch=batch), n_trials=1)
    plain.optimize(ZeroCostObjective(SPACE, batch=batch, reduce="sum"), n_trials=1)  # the default: same search
    assert "options" not in plain.user_attrs[attr.MINIBATCH_SOURCE] and len(plain.trials) == 2


def test_proxy_options_from_the_cli_are_checked_recorded_and_compared(tmp_path, capsys):
    db = tmp_path / "o.db"
    url = f"sqlite:///{db}"
    assert main(_search_args(tmp_path, url, "o", "--n-trials", "2", "--proxy", "wpca", "--proxy-option",
                             "redcue=mean")) == 2
    assert "unknown proxy option 'redcue' for wpca" in capsys.readouterr().err and not db.exists()
    assert main(_search_args(tmp_path, url, "o", "--n-trials", "2", "--proxy", "wpca", "--proxy-option",
                             "reduce=mean", "--proxy-option", "eta_mobilebert=0.9")) == 0
    study = optuna.load_study(study_name="o", storage=url)
    assert study.user_attrs[attr.MINIBATCH_SOURCE]["options"] == {"eta_mobilebert": 0.9, "reduce": "mean"}
    capsys.readouterr()
    assert main(_search_args(tmp_path, url, "o", "--n-trials", "3", "--proxy", "wpca", "--proxy-option",
                             "reduce=mean")) == 2
    assert "eta_mobilebert" in capsys.readouterr().err
    assert len(optuna.load_study(study_name="o", storage=url).trials) == 2


def test_an_own_benchmark_entry_without_params_is_one_line(tmp_path, capsys):
    entry = {"id": "a", "space": SPACE.to_dict(), "params": SPACE.to_params(SPACE.sample(0)), "scores": {"m": 1.0}}
    broken = {"id": "b", "space": SPACE.to_dict(), "scores": {"m": 2.0}}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"default_metric": "m", "entries": [entry, broken]}))
    assert main(["rank", "--benchmark", str(path), "--proxy", "params", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "entry 'b' has no 'params' object" in err and "Traceback" not in err and "KeyError" not in err
