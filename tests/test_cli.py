import json
import subprocess
import sys

import optuna
import pytest

from optuna_wpca.cli import main

TINY_SPACE = {"type": "wpca", "num_layers": 3, "hidden_size": 64, "bert_heads": 4, "mobilebert_heads": 2}
FAST = ["--batch-size", "4", "--seq-len", "16", "--quiet"]


def run_cli(*args):
    """The installed entry point in a subprocess: what a user sees."""
    return subprocess.run([sys.executable, "-m", "optuna_wpca.cli", *args], capture_output=True, text=True)


@pytest.fixture()
def space_file(tmp_path):
    path = tmp_path / "space.json"
    path.write_text(json.dumps(TINY_SPACE))
    return path


def test_rank_writes_the_documented_json(tmp_path, capsys):
    out = tmp_path / "rank.json"
    assert main(["rank", "--limit", "6", "--proxy", "wpca", "--json", str(out), *FAST]) == 0
    printed = capsys.readouterr().out
    assert "wpca" in printed and "num_layers" in printed and "params" in printed and "0.526" in printed
    data = json.loads(out.read_text())
    for name in ("wpca", "params", "num_layers"):
        entry = data["proxies"][name]
        assert entry["n"] == 6 and -1 <= entry["kendall_tau"] <= 1 and -1 <= entry["spearman_rho"] <= 1
        assert entry["seconds_per_1000"] >= 0
    assert data["batch"] == [4, 16]


def test_search_then_show(tmp_path, space_file, capsys):
    url = f"sqlite:///{tmp_path / 'nas.db'}"
    args = ["search", "--space", str(space_file), "--storage", url, "--study-name", "t", "--n-trials", "12",
            "--population-size", "4", *FAST]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "best architecture" in out and "layer  2:" in out
    study = optuna.load_study(study_name="t", storage=url)
    assert len(study.trials) == 12
    assert study.user_attrs["optuna_wpca.space"]["num_layers"] == 3
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "t", "--n-trials", "16",
                 "--population-size", "4", *FAST]) == 0
    assert len(optuna.load_study(study_name="t", storage=url).trials) == 16  # resumed up to the total
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "t", "--n-trials", "16",
                 "--population-size", "4", *FAST]) == 0
    assert len(optuna.load_study(study_name="t", storage=url).trials) == 16  # --n-trials is the total
    assert "already has 16 finished trials" in capsys.readouterr().out
    assert main(["show", "--storage", url, "--study-name", "t", "--top", "2"]) == 0
    assert "trial" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args,message",
    [
        (["search", "--preset", "bert-huge"], "unknown preset 'bert-huge'"),
        (["search", "--preset", "wpca-tiny", "--max-params", "1000"], "below the smallest candidate"),
        (["search", "--preset", "wpca-tiny", "--storage", "not-a-url"], "storage URL 'not-a-url' is malformed"),
        (["search", "--preset", "wpca-tiny", "--storage", "postgresql://u:p@127.0.0.1:1/db"], "cannot open storage"),
        (["show", "--storage", "sqlite:///:memory:", "--study-name", "nope"], "no study named 'nope'"),
        (["rank", "--proxy", "magic"], "unknown proxy 'magic'"),
        (["rank", "--benchmark", "/nonexistent.json"], "does not exist"),
        (["rank", "--eta", "1.5", "--limit", "2", "--batch-size", "2", "--seq-len", "8"], "eta must lie in (0, 1]"),
        (["search", "--space", "/nonexistent-space.json"], "does not exist"),
        (["rank", "--shard", "0/2", "--limit", "2"], "--shard needs --checkpoint"),
        (["rank", "--shard", "half", "--checkpoint", "c.jsonl", "--limit", "2"], "--shard must look like K/M"),
    ],
)
def test_cli_errors_are_one_line(args, message):
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr


def test_help_explains_every_option():
    """Every option of every command is in its --help with a sentence that says what it does."""
    from optuna_wpca.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    assert set(commands) == {"rank", "search", "show", "refine", "pick", "distill", "calibrate-latency", "export"}
    undocumented = [(name, action.option_strings[0]) for name, command in commands.items()
                    for action in command._actions if action.option_strings and action.dest != "help"
                    and (not action.help or len(action.help.split()) < 2)]
    assert undocumented == []
    result = run_cli("search", "--help")
    assert result.returncode == 0
    options = [a.option_strings[-1] for a in commands["search"]._actions if a.option_strings]
    assert len(options) > 30 and all(option in result.stdout for option in options)


def test_export_then_from_pretrained_in_a_fresh_process(tmp_path, space_file):
    url = f"sqlite:///{tmp_path / 'nas.db'}"
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "e", "--n-trials", "5",
                 "--population-size", "4", "--proxy", "wpca", *FAST]) == 0
    out = tmp_path / "exported"
    assert main(["export", "--storage", url, "--study-name", "e", "--out", str(out)]) == 0
    script = (
        "import sys, torch, optuna_wpca\n"
        "m = optuna_wpca.CandidateModel.from_pretrained(sys.argv[1])\n"
        "ids = torch.arange(1000, 1032).reshape(2, 16)\n"
        "torch.save(m(ids), sys.argv[2])\n"
    )
    subprocess.run([sys.executable, "-c", script, str(out), str(tmp_path / "a.pt")], check=True)
    from optuna_wpca import CandidateModel, space_from_dict

    meta = json.loads((out / "architecture.json").read_text())
    space = space_from_dict(meta["space"])
    rebuilt = space.build(space.from_params(meta["params"]), seed=meta["seed"])
    with __import__("torch").no_grad():
        expected = rebuilt(__import__("torch").arange(1000, 1032).reshape(2, 16))
    assert __import__("torch").equal(__import__("torch").load(tmp_path / "a.pt"), expected)
    assert isinstance(CandidateModel.from_pretrained(out), type(rebuilt))
    # A transformers directory: tokenizer files and a model card; AutoModel in a process that imported
    # transformers before optuna_wpca.
    assert (out / "tokenizer_config.json").is_file() and (out / "tokenizer.json").is_file()
    card = (out / "README.md").read_text()
    study = optuna.load_study(study_name="e", storage=url)
    best = study.best_trial
    assert f"trial {best.number}" in card and f"{best.user_attrs['num_params']:,}" in card
    assert f"| wpca | {best.value:,.0f} |" in card and "Untrained" in card and "optuna-wpca export" in card
    for line in space.describe(space.from_params(meta["params"])):
        assert f"| {line} |" in card
    script = (
        "import sys, torch, transformers, optuna_wpca\n"
        "from transformers import AutoModel\n"
        "m = AutoModel.from_pretrained(sys.argv[1])\n"
        "torch.save(m(torch.arange(1000, 1032).reshape(2, 16)).last_hidden_state, sys.argv[2])\n"
    )
    subprocess.run([sys.executable, "-c", script, str(out), str(tmp_path / "b.pt")], check=True)
    assert __import__("torch").equal(__import__("torch").load(tmp_path / "b.pt"), expected)


def test_resuming_someone_elses_study_is_refused(tmp_path, space_file):
    url = f"sqlite:///{tmp_path / 'other.db'}"
    study = optuna.create_study(study_name="theirs", storage=url)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    result = run_cli("search", "--space", str(space_file), "--storage", url, "--study-name", "theirs", *FAST)
    assert result.returncode == 2 and "not made by optuna-wpca" in result.stderr


def test_distill_top_trials_from_the_cli(tmp_path, space_file, capsys):
    url = f"sqlite:///{tmp_path / 'nas.db'}"
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "d", "--n-trials", "6",
                 "--population-size", "3", *FAST]) == 0
    assert main(["distill", "--storage", url, "--study-name", "d", "--k", "2", "--teacher-steps", "2",
                 "--train-examples", "64", "--steps", "4", "--batch-size", "4", "--max-seq-len", "16",
                 "--eval-every", "2", "--pruner", "none", "--quiet", "--save-dir", str(tmp_path / "students")]) == 0
    printed = capsys.readouterr()
    out = printed.out
    assert "Writing model shards" not in printed.err  # --quiet: not even transformers' progress bar when saving
    assert "teacher fine-tuned on rt-sentiment" in out and out.count("COMPLETE") == 2
    kd = optuna.load_study(study_name="d-kd", storage=url)
    assert len(kd.trials) == 2 and all("saved_to" in t.user_attrs for t in kd.trials)
    from optuna_wpca.distill import StudentClassifier

    assert StudentClassifier.from_pretrained(kd.trials[0].user_attrs["saved_to"]).num_labels == 2
    out = tmp_path / "exported-student"
    assert main(["export", "--storage", url, "--study-name", "d-kd", "--out", str(out)]) == 0
    assert "distilled student" in capsys.readouterr().out
    assert json.loads((out / "architecture.json").read_text())["trained"] is True
    student = StudentClassifier.from_pretrained(out)
    assert student.num_labels == 2 and student.labels == ["negative", "positive"]
    # transformers' Auto classes and pipeline, in a fresh process, give the plugin's own logits.
    script = (
        "import json, sys, torch, optuna_wpca\n"
        "from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, AutoTokenizer, pipeline\n"
        "path = sys.argv[1]\n"
        "config = AutoConfig.from_pretrained(path)\n"
        "tok = AutoTokenizer.from_pretrained(path)\n"
        "batch = tok(['a gripping, beautifully acted film', 'dull'], padding=True, return_tensors='pt')\n"
        "model = AutoModelForSequenceClassification.from_pretrained(path).eval()\n"
        "out = model(**batch, labels=torch.tensor([1, 0]))\n"
        "hidden = AutoModel.from_pretrained(path)(**batch).last_hidden_state\n"
        "classify = pipeline('text-classification', model=path, tokenizer=path)\n"
        "torch.save({'logits': out.logits, 'hidden': hidden, 'batch': dict(batch)}, sys.argv[2])\n"
        "print(json.dumps({'type': type(out).__name__, 'loss': out.loss is not None, 'labels': config.id2label,\n"
        "                  'pipe': classify('a gripping, beautifully acted film')}))\n"
    )
    run = subprocess.run([sys.executable, "-c", script, str(out), str(tmp_path / "hf.pt")], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["type"] == "SequenceClassifierOutput" and report["loss"]
    assert report["labels"] == {"0": "negative", "1": "positive"}
    import torch

    saved = torch.load(tmp_path / "hf.pt")
    with torch.no_grad():
        logits = student(**saved["batch"]).logits
        hidden = student.candidate(saved["batch"]["input_ids"], saved["batch"]["attention_mask"],
                                 saved["batch"].get("token_type_ids"))
    assert torch.allclose(saved["logits"], logits, atol=1e-6) and torch.allclose(saved["hidden"], hidden, atol=1e-6)
    probs = torch.softmax(logits[0], -1)
    (pipe,) = report["pipe"]
    assert pipe["label"] == student.labels[int(probs.argmax())] and abs(pipe["score"] - float(probs.max())) < 1e-5
    card = (out / "README.md").read_text()
    assert "library_name: transformers" in card and "Trained: distilled" in card
    assert "AutoModelForSequenceClassification.from_pretrained" in card
    # The distilled card: its score is the dev metric; the source trial is told, not listed as a score.
    best = kd.best_trial
    scores = card.split("## Scores")[1].split("## How it was found")[0]
    assert f"| dev accuracy | {best.value:.4g} | on rt-sentiment after knowledge distillation |" in scores
    assert len([line for line in scores.splitlines() if line.startswith("| ") and "---" not in line]) == 2
    assert f"from trial {best.user_attrs['zero_cost_trial']} of the zero-cost study `d`" in card


def test_distill_with_a_missing_teacher_is_one_line(tmp_path, space_file):
    url = f"sqlite:///{tmp_path / 'nas.db'}"
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "d", "--n-trials", "2",
                 "--population-size", "2", *FAST]) == 0
    result = run_cli("distill", "--storage", url, "--study-name", "d", "--teacher", str(tmp_path / "none"))
    assert result.returncode == 2 and "teacher directory" in result.stderr and "does not exist" in result.stderr


def _search_process(space_file, url, n_trials):
    args = [sys.executable, "-m", "optuna_wpca.cli", "search", "--space", str(space_file), "--storage", url,
            "--study-name", "f", "--n-trials", str(n_trials), "--population-size", "4", *FAST]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_completed(url, n, proc, timeout=120):
    import time

    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        try:
            study = optuna.load_study(study_name="f", storage=_storage(url))
            if len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) >= n:
                return
        except KeyError:
            pass
        time.sleep(0.2)
    raise AssertionError("the search did not reach the wanted number of trials while running")


def _storage(url):
    from optuna_wpca import open_storage

    return open_storage(url)


def _states(url):
    import collections

    return collections.Counter(t.state.name for t in optuna.load_study(study_name="f", storage=_storage(url)).trials)


def test_ctrl_c_stops_cleanly_and_a_rerun_finishes_the_search(tmp_path, space_file):
    import signal

    url = f"sqlite:///{tmp_path / 'c.db'}"
    proc = _search_process(space_file, url, 400)
    _wait_for_completed(url, 3, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "stopping at the next safe point" in err
    assert "run the same command again to finish" in err
    states = _states(url)
    assert states["RUNNING"] == 0 and states["COMPLETE"] < 400
    rerun = _search_process(space_file, url, 40 + states["COMPLETE"])
    assert rerun.wait(timeout=300) == 0
    states = _states(url)
    assert states["RUNNING"] == 0 and states["COMPLETE"] + states["PRUNED"] >= 40


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_killed_search_loses_nothing_after_the_rerun(tmp_path, space_file, kind):
    import signal
    import time

    from optuna_wpca.cli._storage import GRACE_PERIOD

    url = f"sqlite:///{tmp_path / 'k.db'}" if kind == "sqlite" else f"journal://{tmp_path / 'k.log'}"
    proc = _search_process(space_file, url, 400)
    _wait_for_completed(url, 3, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    time.sleep(GRACE_PERIOD + 1)  # a trial that was running now has a stale heartbeat
    target = 20 + _states(url)["COMPLETE"]
    assert _search_process(space_file, url, target).wait(timeout=300) == 0
    study = optuna.load_study(study_name="f", storage=_storage(url))
    states = _states(url)
    assert states["RUNNING"] == 0 and states["COMPLETE"] + states["PRUNED"] == target
    numbers = [t.number for t in study.trials]
    assert len(numbers) == len(set(numbers))


@pytest.mark.parametrize(
    "extra,space,message",
    [
        (["--device", "cuda:7"], None, "device 'cuda:7' is not available"),
        (["--max-params", "nan"], None, "max_params must be a finite number"),
        (["--seq-len", "600"], None, "longer than the space's max_position_embeddings (512)"),
        (["--n-trials", "0"], None, "--n-trials must be >= 1"),
        ([], {"vocab_size": 0}, "vocab_size must be >= 1, got 0"),
        ([], {"bert_heads": 0}, "bert_heads must be >= 1, got 0"),
        ([], {"num_layers": 2.7}, "num_layers must be a whole number, got 2.7"),
        ([], {"num_layers": 10000}, "num_layers must be between 1 and 64, got 10000"),
        (["--artifact-dir", "ARTIFACT_FILE"], None, "is a file, not a directory"),
    ],
)
def test_bad_search_input_is_one_line_and_writes_nothing(tmp_path, extra, space, message):
    db = tmp_path / "never.db"
    path = tmp_path / "space.json"
    path.write_text(json.dumps({**TINY_SPACE, **(space or {})}))
    (tmp_path / "file").write_text("x")
    extra = [str(tmp_path / "file") if a == "ARTIFACT_FILE" else a for a in extra]
    result = run_cli("search", "--space", str(path), "--storage", f"sqlite:///{db}", "--population-size", "4",
                     *FAST, *extra)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not db.exists()


def test_a_minibatch_too_small_for_a_meaningful_pca_is_warned_about(caplog):
    from optuna_wpca import WPCASpace, ZeroCostObjective, text_batch

    space = WPCASpace(**{k: v for k, v in TINY_SPACE.items() if k != "type"})
    with caplog.at_level("WARNING", logger="optuna.optuna_wpca.objective"):
        ZeroCostObjective(space, batch=text_batch(batch_size=1, seq_len=8))
    assert "use at least 96 tokens" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="optuna.optuna_wpca.objective"):
        ZeroCostObjective(space, batch=text_batch(batch_size=8, seq_len=16))
    assert caplog.text == ""


def test_several_proxies_make_a_multi_objective_search(tmp_path, space_file, capsys):
    url = f"sqlite:///{tmp_path / 'mo.db'}"
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "mo", "--n-trials", "8",
                 "--population-size", "4", "--proxy", "wpca", "--proxy", "latency", *FAST]) == 0
    out = capsys.readouterr().out
    assert "feasible trials on the Pareto front (wpca, latency (ms))" in out and "latency " in out
    study = optuna.load_study(study_name="mo", storage=url)
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    assert study.metric_names == ["wpca", "latency (ms)"]  # the unit on the dashboard's axis
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert len(done) == 8 and all(t.user_attrs["latency.latency_iqr_ms"] >= 0 for t in done)
    result = run_cli("export", "--storage", url, "--study-name", "mo", "--out", str(tmp_path / "x"))
    assert result.returncode == 2 and "several objectives and no single best trial; pass --trial N" in result.stderr
    front = sorted(t.number for t in study.best_trials)
    assert f"Pareto front: {', '.join(map(str, front))}" in result.stderr
    assert main(["export", "--storage", url, "--study-name", "mo", "--trial", str(front[0]),
                 "--out", str(tmp_path / "x")]) == 0
    assert "| latency |" in (tmp_path / "x" / "README.md").read_text()
    # The same study with another set of proxies is refused, naming both.
    result = run_cli("search", "--space", str(space_file), "--storage", url, "--study-name", "mo", "--n-trials", "9",
                     "--population-size", "4", *FAST)
    error = result.stderr.strip().splitlines()[-1]  # after the tiny-minibatch warning
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "with the proxies wpca,latency, not wpca" in error  # the default objective of an encoder space
    result = run_cli("search", "--space", str(space_file), "--storage", f"sqlite:///{tmp_path / 'n.db'}",
                     "--proxy", "wpca", "--proxy", "nosuch", *FAST)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "nosuch" in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "n.db").exists()


@pytest.mark.parametrize("extra, message", [
    (["--train-examples", "0"], "--train-examples must be >= 1"),
    (["--learning-rate", "nan"], "--learning-rate must be a finite number > 0"),
    (["--k", "0"], "--k must be >= 1"),
    (["--steps", "-3"], "--steps must be >= 1"),
    (["--task", "glue-nope"], "unknown task 'glue-nope'"),
])
def test_bad_distill_input_is_one_line_and_touches_no_study(tmp_path, space_file, extra, message):
    url = f"sqlite:///{tmp_path / 'd.db'}"
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "z", "--n-trials", "2",
                 "--population-size", "2", "--proxy", "wpca", *FAST]) == 0
    result = run_cli("distill", "--storage", url, "--study-name", "z", *extra)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["z"]  # no "z-kd"


@pytest.mark.parametrize("args, message", [
    (["search", "--top", "0"], "--top must be >= 1"),
    (["show", "--top", "0"], "--top must be >= 1"),
    (["rank", "--shard", "abc"], "--shard must look like K/M"),
    (["rank", "--limit", "1"], "--limit must be >= 2"),
    (["search", "--space", "DIR"], "is a directory, not a JSON file"),
    (["search", "--preset", "wpca-tiny", "--corpus", "DIR"], "is a directory, not a text file"),
    (["search", "--preset", "wpca-tiny", "--corpus", "LATIN1"], "is not UTF-8 text (byte 0xff"),
])
def test_rough_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    latin = tmp_path / "latin1.txt"
    latin.write_bytes(b"caf\xff au lait\n" * 50)
    named = "LATIN1" in args
    args = [str(tmp_path) if a == "DIR" else str(latin) if a == "LATIN1" else a for a in args]
    db = tmp_path / "never.db"
    storage = ["--storage", f"sqlite:///{db}"] if args[0] != "rank" else []
    result = run_cli(*args, *storage)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not named or str(latin) in lines[0]  # the file is named
    assert not db.exists()


def test_show_under_a_closed_pipe_exits_quietly(tmp_path, space_file):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    assert main(["search", "--space", str(space_file), "--storage", url, "--study-name", "p", "--n-trials", "4",
                 "--population-size", "2", "--proxy", "wpca", *FAST]) == 0
    for command in ("show", "export"):
        extra = ["--out", str(tmp_path / "x")] if command == "export" else []
        # the reader is gone before the command writes a byte (what `| head -0` does to a slow command)
        proc = subprocess.Popen([sys.executable, "-m", "optuna_wpca.cli", command, "--storage", url,
                                 "--study-name", "p", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait() == 0, err
        assert "Traceback" not in err and "BrokenPipe" not in err, err
