"""The pick under a budget on small hand-made benchmarks whose picks are known, and in `rank`."""

import json

import numpy as np
import pytest

from optuna_wpca.cli import main
from optuna_wpca.ranking import bootstrap_picks, budget_pick, budget_pick_within, budgets_at

# Six architectures: params 10..60; truth rises with size except that the 40 is the best of the
# four smallest. The objective ties the 20 and the 40 at the top among those.
PARAMS = [10, 20, 30, 40, 50, 60]
TRUTH = [1.0, 2.0, 3.0, 5.0, 4.0, 6.0]
OBJECTIVE = [0.0, 9.0, 1.0, 9.0, 2.0, 3.0]


def test_a_budget_pick_with_ties_is_the_average_of_the_tied_picks():
    out = budget_pick(OBJECTIVE, TRUTH, PARAMS, percentiles=[50], top=1)
    row = out["budgets"][0]
    # budget 35: 10, 20, 30 fit; the objective's best is the 20 (9.0), second best of three -> 0.5
    assert row["max_params"] == pytest.approx(35.0) and row["feasible"] == 3
    assert row["pick"] == pytest.approx(0.5) and row["regret"] == pytest.approx(1.0)
    out = budget_pick(OBJECTIVE, TRUTH, PARAMS, percentiles=[60], top=1)
    row = out["budgets"][0]
    # budget 40: four fit; the 20 (percentile 1/3) and the 40 (1.0) tie: the pick is their mean
    assert row["feasible"] == 4 and row["pick"] == pytest.approx((1 / 3 + 1.0) / 2)
    assert row["regret"] == pytest.approx(((5 - 2) + 0) / 2)
    # file order does not decide a tie: reversing the entries gives the same pick
    rev = budget_pick(OBJECTIVE[::-1], TRUTH[::-1], PARAMS[::-1], percentiles=[60], top=1)
    assert rev["budgets"][0]["pick"] == pytest.approx(row["pick"])


def test_best_of_top_k_counts_ties_at_the_cut_by_their_expectation():
    # all tied: the best of a random 2 of 4 with percentiles 0, 1/3, 2/3, 1 has expectation
    # P(max = 1/3) 1/6, P(max = 2/3) 2/6, P(max = 1) 3/6
    out = budget_pick([1, 1, 1, 1], [1, 2, 3, 4], [1, 1, 1, 1], percentiles=[100], top=2)
    assert out["budgets"][0]["best_of_top"] == pytest.approx(1 / 6 * 1 / 3 + 2 / 6 * 2 / 3 + 3 / 6 * 1.0)
    assert out["budgets"][0]["pick"] == pytest.approx(0.5)
    perfect = budget_pick([4, 3, 2, 1], [4, 3, 2, 1], [1, 1, 1, 1], percentiles=[100], top=2)
    assert perfect["mean"] == 1.0 and perfect["worst"] == 1.0 and perfect["mean_regret"] == 0.0


def test_a_minimised_objective_and_nan_scores():
    # latency-like: lower is better; the NaN entry is never picked
    out = budget_pick([3.0, float("nan"), 1.0], [1.0, 9.0, 2.0], [1, 1, 1], maximize=False, percentiles=[100])
    assert out["budgets"][0]["pick"] == pytest.approx(0.5)


def test_budgets_and_within_depth():
    assert budgets_at(PARAMS, [0, 100]) == [10.0, 60.0]
    out = budget_pick_within(OBJECTIVE * 2, TRUTH * 2, PARAMS * 2, [2] * 6 + [4] * 6, percentiles=[100], min_size=5)
    assert set(out["groups"]) == {"2", "4"}
    assert out["mean"]["mean"] == pytest.approx(budget_pick(OBJECTIVE, TRUTH, PARAMS, percentiles=[100])["mean"])


def test_bootstrap_intervals_contain_the_point_and_differences_are_paired():
    rng = np.random.default_rng(0)
    params = rng.integers(1, 100, 60)
    truth = params + rng.normal(0, 20, 60)
    good = truth + rng.normal(0, 1, 60)
    out = bootstrap_picks({"params": (params, True), "good": (good, True)}, truth, params, resamples=200)
    point = budget_pick(good, truth, params)["mean"]
    lo, hi = out["good"]["mean_interval"]
    assert lo <= point <= hi
    assert out["params"]["difference_interval"] == [0.0, 0.0]
    assert out["good"]["difference_interval"][0] > 0  # a near-oracle beats the count on every resample


def test_rank_prints_and_writes_the_budget_table(tmp_path, capsys):
    out = tmp_path / "rank.json"
    code = main(["rank", "--benchmark", "lts-gpt2-wt103", "--limit", "12", "--proxy", "num_layers",
                 "--proxy", "params+num_layers", "--batch-size", "2", "--seq-len", "16", "--resamples", "50",
                 "--reference-size", "8", "--quiet", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "pick under a budget" in text and "params+num_layers" in text
    data = json.loads(out.read_text())
    pick = data["proxies"]["params+num_layers"]["budget_pick"]
    assert len(pick["budgets"]) == 8 and {"pick", "regret", "best_of_top", "max_params"} <= set(pick["budgets"][0])
    assert 0.0 <= pick["worst"] <= pick["mean"] <= 1.0
    assert pick["bootstrap"]["resamples"] == 50 and "difference_interval" in pick["bootstrap"]
    assert data["reference"] == {"size": 8, "seed": 0}


@pytest.mark.parametrize("args, message", [
    (["--proxy", "wpca+nosuch"], "unknown proxy 'nosuch' in the combination 'wpca+nosuch'"),
    (["--proxy", "wpca", "--reference-size", "0"], "--reference-size must be >= 2"),
])
def test_rank_refuses_bad_combinations_in_one_line(args, message, capsys):
    assert main(["rank", "--benchmark", "lts-gpt2-wt103", "--limit", "3", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
