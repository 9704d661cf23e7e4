"""benchmarks/own_bench_pairs.py: a proxy against the parameter count on the pairs they order differently."""

import json
from pathlib import Path

import pytest

from benchmarks import own_bench_pairs  # noqa: E402


def _entry(i: int, depth: int, blocks: list[str], params: int, truth: float, spread: float = 0.001) -> dict:
    genes = {}
    for k, block in enumerate(blocks):
        genes[f"layer_{k:02d}_block"] = block
        genes[f"layer_{k:02d}_ffn_mult"] = 2
    return {"id": f"a{i}", "depth": depth, "bucket": i % 2, "num_params": params, "params": genes,
            "runs": {"m": {"0": truth - spread / 2, "1": truth + spread / 2}}}


def _write(tmp_path: Path, entries: list[dict], proxies: dict[str, list[float]]) -> tuple[Path, Path]:
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"entries": entries}))
    lines = [json.dumps({"settings": {}})]
    for k, e in enumerate(entries):
        lines.append(json.dumps({"id": e["id"], "scores": {n: [v[k], 0.0, n] for n, v in proxies.items()}}))
    ckpt = tmp_path / "ckpt.jsonl"
    ckpt.write_text("\n".join(lines) + "\n")
    return bench, ckpt


def test_a_proxy_that_sees_block_types_beats_the_parameter_count(tmp_path, capsys):
    # Depth 4, 12 architectures: the ground truth rewards BERT blocks, against the parameter count.
    entries = []
    for i in range(12):
        bert = i % 5
        entries.append(_entry(i, 4, ["bert"] * bert + ["mobilebert"] * (4 - bert), 1_000_000 + 7_919 * i,
                              truth=0.1 * bert - 1e-4 * i))
    params = [e["num_params"] for e in entries]
    sees_blocks = [e["runs"]["m"]["0"] for e in entries]  # orders exactly as the truth
    bench, ckpt = _write(tmp_path, entries, {"params": params, "oracle": sees_blocks})
    out_path = tmp_path / "out.json"
    own_bench_pairs.main(["--benchmark", str(bench), "--metric", "m", "--checkpoint", str(ckpt),
                          "--json", str(out_path)])
    out = json.loads(out_path.read_text())
    assert out["architectures"] == 12 and out["decided_pairs"] > 0
    same = out["proxies"]["params"]
    assert same["contested"] == 0 and not same["better_than_params"]
    oracle = out["proxies"]["oracle"]
    assert oracle["contested"] > 10 and oracle["params_right"] == 0 and oracle["better_than_params"]
    assert out["features"]["bert_blocks"]["4"]["kendall_tau"] > 0.8
    assert "oracle" in capsys.readouterr().out


def test_pairs_inside_seed_noise_or_across_depths_are_not_decided(tmp_path):
    entries = [_entry(0, 4, ["bert"] * 4, 10, 0.50, spread=0.2), _entry(1, 4, ["bert"] * 4, 20, 0.60, spread=0.2),
               _entry(2, 5, ["bert"] * 5, 30, 0.90), _entry(3, 5, ["bert"] * 5, 40, 0.10)]
    bench, _ = _write(tmp_path, entries, {})
    truth = own_bench_pairs.read_truth(bench, "m")
    assert own_bench_pairs.decided_pairs(truth) == [("a2", "a3")]


def test_a_checkpoint_missing_architectures_is_one_line(tmp_path):
    entries = [_entry(i, 4, ["bert"] * 4, 10 + i, 0.1 * i) for i in range(3)]
    bench, ckpt = _write(tmp_path, entries, {"params": [1, 2, 3]})
    ckpt.write_text(ckpt.read_text().splitlines()[0] + "\n")
    with pytest.raises(SystemExit, match="no proxy values for 3 architectures"):
        own_bench_pairs.main(["--benchmark", str(bench), "--metric", "m", "--checkpoint", str(ckpt)])
