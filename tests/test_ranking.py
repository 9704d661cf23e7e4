import json
import re

import pytest

from optuna_wpca import text_batch
from optuna_wpca.ranking import _rank
from optuna_wpca.ranking import correlations, load_benchmark, rank_proxies, seed_noise
from optuna_wpca.ranking import benchmark_path

BATCH = dict(batch_size=4, seq_len=16)


@pytest.fixture(scope="module")
def bench():
    return load_benchmark(str(benchmark_path("nas-bench-bert")))


def test_a_stopped_ranking_resumes_from_its_checkpoint(bench, tmp_path, monkeypatch):
    batch = text_batch(**BATCH)
    whole = rank_proxies(bench, ["wpca", "vpca"], batch=batch, limit=5)
    ckpt = tmp_path / "rank.jsonl"
    rank_proxies(bench, ["wpca", "vpca"], batch=batch, limit=5, checkpoint=ckpt)
    lines = ckpt.read_text().splitlines()
    assert len(lines) == 1 + 5
    # Stop "during" entry 3: two entries kept, the third cut mid-line.
    ckpt.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])
    scored = []
    real = _rank._score_entry
    monkeypatch.setattr(_rank, "_score_entry", lambda how, i: scored.append(i) or real(how, i))
    resumed = rank_proxies(bench, ["wpca", "vpca"], batch=batch, limit=5, checkpoint=ckpt)
    assert scored == [2, 3, 4]
    for name in ("wpca", "vpca", "params", "num_layers"):
        assert resumed[name].values == pytest.approx(whole[name].values)
        assert resumed[name].kendall_tau == pytest.approx(whole[name].kendall_tau)
    assert resumed["vpca"].shared_with == "wpca"


def test_a_checkpoint_from_other_settings_is_refused(bench, tmp_path):
    ckpt = tmp_path / "rank.jsonl"
    rank_proxies(bench, ["wpca"], batch=text_batch(**BATCH), limit=2, checkpoint=ckpt)
    with pytest.raises(ValueError, match="other settings.*seed"):
        rank_proxies(bench, ["wpca"], batch=text_batch(**BATCH), limit=2, seed=7, checkpoint=ckpt)
    (tmp_path / "junk.jsonl").write_text("not json\n")
    with pytest.raises(ValueError, match="does not start with a ranking settings line"):
        rank_proxies(bench, ["wpca"], batch=text_batch(**BATCH), limit=2, checkpoint=tmp_path / "junk.jsonl")


def test_shards_share_one_checkpoint_and_the_last_one_ranks(bench, tmp_path, monkeypatch):
    batch = text_batch(**BATCH)
    whole = rank_proxies(bench, ["wpca"], batch=batch, limit=5)
    ckpt = tmp_path / "rank.jsonl"
    scored = []
    real = _rank._score_entry
    monkeypatch.setattr(_rank, "_score_entry", lambda how, i: scored.append(i) or real(how, i))
    assert rank_proxies(bench, ["wpca"], batch=batch, limit=5, checkpoint=ckpt, shard=(1, 2)) is None
    assert scored == [1, 3]
    # Both shards found the file empty and wrote the header: the copy is tolerated.
    header = ckpt.read_text().splitlines()[0]
    ckpt.write_text(header + "\n" + ckpt.read_text())
    last = rank_proxies(bench, ["wpca"], batch=batch, limit=5, checkpoint=ckpt, shard=(0, 2))
    assert scored == [1, 3, 0, 2, 4]
    assert last["wpca"].values == pytest.approx(whole["wpca"].values)
    assert last["wpca"].kendall_tau == pytest.approx(whole["wpca"].kendall_tau)
    with pytest.raises(ValueError, match="shard needs a checkpoint"):
        rank_proxies(bench, ["wpca"], batch=batch, limit=5, shard=(0, 2))
    with pytest.raises(ValueError, match="0 <= k < m"):
        rank_proxies(bench, ["wpca"], batch=batch, limit=5, checkpoint=ckpt, shard=(2, 2))


def own_benchmark_file(tmp_path):
    """Scores rise with size within a depth but fall with depth: #params must score 1 within depth."""
    import numpy as np

    from optuna_wpca import WPCASpace

    entries = []
    for depth in (2, 3):
        space = WPCASpace(num_layers=depth, hidden_size=64, bert_heads=4, mobilebert_heads=2)
        for j in range(4):
            arch = space.sample(np.random.default_rng(10 * depth + j))
            entries.append({"id": f"d{depth}-{j}", "space": space.to_dict(), "params": space.to_params(arch),
                            "num_params": space.num_params(arch)})
    for i, e in enumerate(entries):
        depth = e["space"]["num_layers"]
        e["scores"] = {"kd": -1e9 * depth + e["num_params"]}
        # per-seed scores without ties: seed 1 agrees with seed 0 at depth 2 and reverses it at depth 3
        r = 10 * e["num_params"] + i
        e["runs"] = {"kd": {"0": -1e9 * depth + r, "1": -1e9 * depth + (1 if depth == 2 else -1) * r}}
    path = tmp_path / "own.json"
    path.write_text(json.dumps({"default_metric": "kd", "entries": entries}))
    return path


def test_own_format_ranks_within_each_depth(tmp_path):
    bench = load_benchmark(own_benchmark_file(tmp_path))
    assert bench.metric == "kd" and len(bench.archs) == 8 and bench.space is None
    result = rank_proxies(bench, ["params"], batch=text_batch(**BATCH))
    within = result["params"].by_depth
    assert set(within["depths"]) == {"2", "3"}
    assert within["mean"]["kendall_tau"] == pytest.approx(1.0)
    assert result["params"].kendall_tau < 0.5  # deeper models are bigger but score lower overall
    assert result["num_layers"].by_depth["mean"]["kendall_tau"] == pytest.approx(0.0)


def test_seed_noise_of_an_own_benchmark(tmp_path):
    noise = seed_noise(load_benchmark(own_benchmark_file(tmp_path)))
    assert noise["seeds"] == ["0", "1"] and noise["n"] == 8
    # 28 pairs: the 16 across depths and the 6 at depth 2 agree, the 6 at depth 3 disagree
    assert noise["kendall_tau"] == pytest.approx((22 - 6) / 28)
    assert noise["within_depth"]["depths"]["2"]["kendall_tau"] == pytest.approx(1.0)
    assert noise["within_depth"]["depths"]["3"]["kendall_tau"] == pytest.approx(-1.0)
    assert noise["within_depth"]["mean"]["kendall_tau"] == pytest.approx(0.0)


def test_nas_bench_bert_has_no_seed_noise(bench):
    assert seed_noise(bench) is None  # one score per entry


def test_cli_rank_on_an_own_benchmark(tmp_path, capsys):
    from optuna_wpca.cli import main

    out = tmp_path / "rank.json"
    assert main(["rank", "--benchmark", str(own_benchmark_file(tmp_path)), "--proxy", "wpca", "--json", str(out),
                 "--batch-size", "4", "--seq-len", "16", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "depth tau" in printed and "seed noise (kd, seed 0 against seed 1, 8 architectures): tau 0.571" in printed
    data = json.loads(out.read_text())
    assert data["metric"] == "kd" and "within_depth" in data["proxies"]["wpca"]
    assert data["seed_noise"]["kendall_tau"] == pytest.approx(16 / 28)


def test_one_checkpoint_serves_every_metric_and_a_grown_file(tmp_path, monkeypatch):
    path = own_benchmark_file(tmp_path)
    data = json.loads(path.read_text())
    for e in data["entries"]:
        e["scores"]["labels"] = -e["scores"]["kd"]
    # An earlier export: the last three entries not scored yet.
    early = tmp_path / "early" / "own.json"
    early.parent.mkdir()
    partial = json.loads(json.dumps(data))
    for e in partial["entries"][5:]:
        e["scores"] = {}
    early.write_text(json.dumps(partial))
    path.write_text(json.dumps(data))
    ckpt = tmp_path / "rank.jsonl"
    batch = text_batch(**BATCH)
    rank_proxies(load_benchmark(early), ["wpca"], batch=batch, checkpoint=ckpt)
    scored = []
    real = _rank._score_entry
    monkeypatch.setattr(_rank, "_score_entry", lambda how, i: scored.append(how.benchmark.ids[i]) or real(how, i))
    kd = rank_proxies(load_benchmark(path), ["wpca"], batch=batch, checkpoint=ckpt)
    assert scored == ["d3-1", "d3-2", "d3-3"]  # only the entries the early file did not have
    labels = rank_proxies(load_benchmark(path, metric="labels"), ["wpca"], batch=batch, checkpoint=ckpt)
    assert scored == ["d3-1", "d3-2", "d3-3"] and labels["wpca"].values == kd["wpca"].values
    assert labels["wpca"].kendall_tau == pytest.approx(-kd["wpca"].kendall_tau)
    fresh = rank_proxies(load_benchmark(path), ["wpca"], batch=batch)
    assert kd["wpca"].values == pytest.approx(fresh["wpca"].values)


def test_a_checkpoint_by_index_from_before_entry_keys_is_still_read(bench, tmp_path, monkeypatch):
    batch = text_batch(**BATCH)
    ckpt = tmp_path / "rank.jsonl"
    whole = rank_proxies(bench, ["wpca"], batch=batch, limit=3, checkpoint=ckpt)
    lines = [json.loads(line) for line in ckpt.read_text().splitlines()]
    lines[0]["settings"]["metric"] = "glue"  # the older layout: metric in the settings, entries by index
    for i, record in enumerate(lines[1:]):
        record["index"] = i
        del record["key"]
    ckpt.write_text("".join(json.dumps(r) + "\n" for r in lines))
    monkeypatch.setattr(_rank, "_score_entry", lambda *a: pytest.fail("scored again"))
    again = rank_proxies(bench, ["wpca"], batch=batch, limit=3, checkpoint=ckpt)
    assert again["wpca"].values == pytest.approx(whole["wpca"].values)
    with pytest.raises(ValueError, match="other settings.*metric"):
        rank_proxies(load_benchmark(str(benchmark_path("nas-bench-bert")), metric="mnli"), ["wpca"], batch=batch, limit=3,
                     checkpoint=ckpt)


def test_own_format_ranks_within_each_size_bucket(tmp_path, capsys):
    """Buckets cut across depth here: params orders each bucket's members as the score does."""
    from optuna_wpca.cli import main

    path = own_benchmark_file(tmp_path)
    data = json.loads(path.read_text())
    for i, e in enumerate(data["entries"]):
        e["bucket"] = i % 2
    path.write_text(json.dumps(data))
    bench = load_benchmark(path)
    assert bench.buckets == [0, 1] * 4
    result = rank_proxies(bench, ["params"], batch=text_batch(**BATCH))
    by_bucket = result["params"].by_bucket
    assert set(by_bucket["buckets"]) == {"0", "1"} and all(g["n"] == 4 for g in by_bucket["buckets"].values())
    scores = [e["scores"]["kd"] for e in data["entries"]]
    sizes = [e["num_params"] for e in data["entries"]]
    for b in (0, 1):
        expected = correlations([sizes[i] for i in range(8) if i % 2 == b], [scores[i] for i in range(8) if i % 2 == b])
        assert by_bucket["buckets"][str(b)]["kendall_tau"] == pytest.approx(expected[0])
    noise = seed_noise(bench)
    assert set(noise["within_bucket"]["buckets"]) == {"0", "1"}
    out = tmp_path / "rank.json"
    assert main(["rank", "--benchmark", str(path), "--proxy", "params", "--json", str(out), "--batch-size", "4",
                 "--seq-len", "16", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "size tau" in printed and "within size bucket tau" in printed
    assert "within_bucket" in json.loads(out.read_text())["proxies"]["params"]


def test_a_new_benchmark_format_is_one_registered_loader_and_the_report_prints_what_it_cites(tmp_path):
    import json

    from optuna_wpca import WPCASpace
    from optuna_wpca.ranking import BENCHMARK_FORMATS, Benchmark, format_table, register_benchmark_format

    space = WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
    rows = [{"params": space.to_params(space.sample(i)), "acc": 0.5 + i / 100} for i in range(6)]
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"my_trained_set": rows}))
    with pytest.raises(ValueError, match="is in no known format"):
        load_benchmark(path)

    def load(raw, path, *, metric, space, count):
        entries = raw["my_trained_set"]
        return Benchmark([space_.from_params(e["params"]) for e in entries], [e["acc"] for e in entries],
                         list(range(len(entries))), space_, str(path), metric or "acc",
                         cited={"params": (0.1, 0.2)}, cited_source="a paper about this set")

    space_ = space
    register_benchmark_format("mine", lambda raw: isinstance(raw, dict) and "my_trained_set" in raw, load)
    try:
        bench = load_benchmark(path)
        assert len(bench.archs) == 6 and bench.metric == "acc"
        results = rank_proxies(bench, ["params"], batch=text_batch(batch_size=2, seq_len=16))
        table = format_table(results, bench)
        assert "paper tau" in table and "paper columns: a paper about this set" in table
        assert results["params"].to_dict()["paper"] == {"kendall_tau": 0.1, "spearman_rho": 0.2,
                                                        "source": "a paper about this set"}
        assert "paper tau" not in format_table(rank_proxies(load_benchmark("lts-gpt2-wt103"), ["params"], limit=4,
                                                            batch=text_batch(batch_size=2, seq_len=16)),
                                               load_benchmark("lts-gpt2-wt103"))
    finally:
        BENCHMARK_FORMATS.unregister("mine")
    with pytest.raises(ValueError, match=r"is in no known format \(optuna-wpca, LiteTransformerSearch, NAS-Bench-BERT\)"):
        load_benchmark(path)


@pytest.mark.parametrize("spoil, message", [
    (lambda e: e.pop("hparams"), "malformed: missing 'hparams'"),
    (lambda e: e["hparams"]["model_hparam_overrides"].pop("hidden_size"), "malformed: missing 'hidden_size'"),
    (lambda e: e["hparams"]["model_hparam_overrides"]["nas_config"]["encoder_layers"][0].pop("operation_type"),
     "malformed: missing 'operation_type'"),
    (lambda e: e.__setitem__("scores", 3), "has no scores['glue']"),
    (lambda e: e["scores"].__setitem__("glue", "high"), "scores['glue'] = 'high', not a finite number"),
])
def test_every_input_a_nas_bench_bert_entry_can_lack_is_named_in_one_line(tmp_path, spoil, message):
    import copy
    import json

    from optuna_wpca import InputError
    from optuna_wpca.ranking import benchmark_path

    raw = copy.deepcopy(json.loads(benchmark_path("nas-bench-bert").read_text())[:3])
    spoil(raw[1])
    path = tmp_path / "b.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=re.escape(message)):
        load_benchmark(path)
