"""The quick examples run as written, with tiny settings."""

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(script, *args, cwd):
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                            cwd=cwd, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_quickstart(tmp_path):
    out = run("quickstart.py", "--n-trials", "6", "--storage", f"sqlite:///{tmp_path / 'q.db'}", cwd=tmp_path)
    assert "best W-PCA" in out and "layer 5:" in out


def test_pareto_latency(tmp_path):
    out = run("pareto_latency.py", "--n-trials", "8", "--population-size", "4", "--out", "front.png", cwd=tmp_path)
    assert "Pareto-optimal trials" in out
    assert (tmp_path / "front.png").stat().st_size > 1000
