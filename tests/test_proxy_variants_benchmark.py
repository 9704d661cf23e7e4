"""benchmarks/proxy_variants.py: features collected once, every variant scored, the rule applied."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "proxy_variants.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def test_collect_resumes_and_evaluate_scores_every_variant(tmp_path):
    for bench in ("lts-gpt2-wt103", "nas-bench-bert"):
        out = tmp_path / f"variants_{bench}.jsonl"
        small = ["--batch-size", "4", "--seq-len", "16", "--quiet", "--out", str(out)]
        assert _run("collect", "--benchmark", bench, "--limit", "3", *small).returncode == 0
        assert _run("collect", "--benchmark", bench, "--limit", "4", *small).returncode == 0  # adds one
        lines = out.read_text().splitlines()
        assert len(lines) == 1 + 4 and len({json.loads(x)["id"] for x in lines[1:]}) == 4
        # Other settings are refused rather than mixed in.
        other = _run("collect", "--benchmark", bench, "--limit", "4", "--batch-size", "8", "--seq-len", "16",
                     "--quiet", "--out", str(out))
        assert other.returncode != 0 and "other settings" in other.stderr
    done = _run("evaluate", "--dir", str(tmp_path), "--out", str(tmp_path / "v.json"))
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "v.json").read_text())
    names = [r["variant"] for r in result["variants"]]
    assert len(names) == 22 and names[0] == "wpca"
    for r in result["variants"]:
        expected = (r["lts"]["kendall_tau"] > 0.886 and r["lts"]["spearman_rho"] > 0.980
                    and r["nas_bench_bert"]["kendall_tau"] >= result["nas_bench_bert_reference"]["wpca_same_features"]["kendall_tau"]
                    and r["nas_bench_bert"]["spearman_rho"] >= result["nas_bench_bert_reference"]["wpca_same_features"]["spearman_rho"])
        assert r["qualifies"] == expected
    assert "written down before any variant was scored" in result["rule"]
