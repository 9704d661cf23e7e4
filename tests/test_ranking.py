import json

import pytest

from optuna_wpca import text_batch
from optuna_wpca import _ranking
from optuna_wpca._ranking import load_benchmark, rank_proxies
from optuna_wpca.cli import bundled_benchmark_path

BATCH = dict(batch_size=4, seq_len=16)


@pytest.fixture(scope="module")
def bench():
    return load_benchmark(bundled_benchmark_path())


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
    real = _ranking._score_entry
    monkeypatch.setattr(_ranking, "_score_entry", lambda b, i, *a: scored.append(i) or real(b, i, *a))
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
