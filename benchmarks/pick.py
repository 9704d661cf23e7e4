"""The pick, trained: does a short training of the zero-cost shortlist pick better than the proxy alone?

For each of the 8 budgets (20th..90th percentile of the benchmark's parameter count), the default
objective's top K among the architectures that fit go through the product's second stage
(``optuna_wpca.pick.pick_top_trials``: a zero-cost study holding them, a second-stage Optuna study
with the protocol's pruner), and the pick's trained-score percentile among the architectures that
fit is set against the zero-cost pick's and the best of the top K.

Each shortlisted architecture is trained once to the protocol's last step, its held-out loss and CPU
seconds recorded at every rung in a journal (one JSON line per architecture, appended as it
finishes; a killed run resumes there and trains nothing twice). Training is a function of the
architecture and the protocol alone (seeded weights, batches drawn from (seed, step), a constant
rate), so a run stopped at step s is the first s steps of the full run: each budget's second stage
then runs for real in Optuna, its trials replaying the journal's curves to the pruner, and is
charged the CPU seconds of the steps it trained before its pruner stopped it.

    python benchmarks/pick.py --benchmark nas-bench-bert --objective wpca \\
        --checkpoint benchmarks/results/rank_16x128.nas-bench-bert.checkpoint.jsonl
    python benchmarks/pick.py --benchmark lts-gpt2-wt103 --objective wpca_saliency \\
        --checkpoint benchmarks/results/rank_16x128.lts-gpt2-wt103.checkpoint.jsonl
    python benchmarks/pick.py ... --pilot 6      # settings pilot: 6 architectures in no shortlist

Any benchmark file that ``optuna-wpca rank`` takes works, with a ``rank`` checkpoint of its scores.
Writes ``benchmarks/results/pick.BENCHMARK.json`` (and ``pick_pilot.BENCHMARK.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from scipy.stats import kendalltau

from optuna_wpca import _attributes as attr
from optuna_wpca import text_batch
from optuna_wpca.pick import PickProtocol, default_protocol, ShortlistTrainer, TrainingCurve, pick_top_trials
from optuna_wpca.proxies import get_proxy
from optuna_wpca.ranking import load_benchmark, rank_proxies
from optuna_wpca.ranking._budget_pick import DEFAULT_PERCENTILES, _expected_best_of_top, _oriented, _percentiles_of
from optuna_wpca.ranking._checkpoint import entry_key

RESULTS = Path(__file__).parent / "results"


def objective_values(bench, objective: str, checkpoint: Path) -> list[float]:
    """The objective's value per architecture, read from a ``rank`` checkpoint (scored again if absent)."""
    settings = json.loads(checkpoint.read_text().splitlines()[0])["settings"]
    sequences, tokens = settings["batch"]
    proxies = list(dict.fromkeys([*settings["proxies"], objective]))  # the settings line names the scored set
    results = rank_proxies(bench, proxies, batch=text_batch(batch_size=sequences, seq_len=tokens),
                           checkpoint=checkpoint, options=settings["options"], seed=settings["seed"])
    return list(results[objective].values)


def _params_key(bench, i: int) -> str:
    return json.dumps(bench.space_of(i).to_params(bench.archs[i]), sort_keys=True, default=str)


def shortlists(bench, values, counts, k: int) -> list[dict[str, Any]]:
    """Per budget: the architectures that fit and the objective's top ``k`` distinct architectures among
    them, best first, as a study's shortlist holds them (NAS-Bench-BERT lists 9 architectures twice,
    trained twice: one entry stands for both, and a pick of it is read as the mean of their
    percentiles). Ties in the objective keep file order."""
    oriented = _oriented(values, True)
    out = []
    for q, budget in zip(DEFAULT_PERCENTILES, np.percentile(counts, list(DEFAULT_PERCENTILES))):
        fits = np.flatnonzero(counts <= budget)
        order = fits[np.argsort(-oriented[fits], kind="stable")]
        top, seen = [], set()
        for i in order:
            key = _params_key(bench, int(i))
            if key not in seen:
                seen.add(key)
                top.append(int(i))
            if len(top) == k:
                break
        out.append({"percentile": q, "max_params": float(budget), "fits": fits.tolist(), "top": top})
    return out


class JournalTrainer:
    """A :class:`ShortlistTrainer` that trains each architecture once to the last step, journals its
    curve, and replays journalled curves to the second stage's reports."""

    def __init__(self, bench, protocol: PickProtocol, journal: Path, device: str) -> None:
        self.bench, self.protocol, self.journal = bench, protocol, journal
        self.trainers: dict[int, ShortlistTrainer] = {}
        self.device = device
        self.curves: dict[str, dict[str, Any]] = {}
        if journal.is_file():
            for line in journal.read_text().splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a kill: trained again
                    continue
                if row.get("protocol") != protocol.to_dict():
                    raise SystemExit(f"{journal} holds runs of another protocol; use another --journal")
                self.curves[row["key"]] = row

    def trainer_of(self, i: int) -> ShortlistTrainer:
        space = self.bench.space_of(i)
        if id(space) not in self.trainers:
            self.trainers[id(space)] = ShortlistTrainer(space, self.protocol, device=self.device)
        return self.trainers[id(space)]

    def ensure(self, i: int) -> dict[str, Any]:
        key = entry_key(self.bench, i)
        if key in self.curves:
            return self.curves[key]
        trainer = self.trainer_of(i)
        trainer._prepare()  # the teacher's targets, once per process: setup_seconds, not this run's cost
        cpu0 = time.process_time()
        cpu_at: dict[str, float] = {}

        def report(step: int, _loss: float) -> None:
            cpu_at[str(step)] = time.process_time() - cpu0

        curve = trainer.train(self.bench.archs[i], report=report)
        row = {"key": key, "id": self.bench.ids[i], "losses": {str(s): v for s, v in curve.losses.items()},
               "cpu_at": cpu_at, "seconds": curve.seconds, "cpu_seconds": curve.cpu_seconds,
               "setup_seconds": trainer.setup_seconds, "protocol": self.protocol.to_dict()}
        with open(self.journal, "a") as f:
            f.write(json.dumps(row) + "\n")
        self.curves[key] = row
        print(f"  trained {self.bench.ids[i]}: " + " ".join(f"@{s} {v:.4f}" for s, v in curve.losses.items())
              + f" ({curve.cpu_seconds:.0f} CPU s, {curve.seconds:.0f} s)", flush=True)
        return row


class Replay:
    """The second stage's trainer for one budget: replays journalled curves (see the module docstring)."""

    def __init__(self, journal: JournalTrainer, space, by_params: dict[str, int]) -> None:
        self.journal, self.space, self.by_params = journal, space, by_params
        self.protocol = journal.protocol
        inner = journal.trainer_of(next(iter(by_params.values())))
        self.signal, self.loss_name = inner.signal, inner.loss_name
        self.charged = 0.0

    def train(self, arch, *, report=None, checkpoint_dir=None) -> TrainingCurve:
        i = self.by_params[json.dumps(self.space.to_params(arch), sort_keys=True, default=str)]
        row = self.journal.ensure(i)
        curve = TrainingCurve()
        try:
            for step in sorted(row["losses"], key=int):
                curve.losses[int(step)] = row["losses"][step]
                curve.cpu_seconds = row["cpu_at"][step]
                if report is not None:
                    report(int(step), row["losses"][step])
        finally:
            self.charged += curve.cpu_seconds
        curve.seconds = curve.cpu_seconds
        return curve


def second_stage(bench, values, shortlist: list[int], journal: JournalTrainer) -> tuple[dict, float]:
    """The product's second stage on one budget's shortlist; returns its pick record and CPU seconds."""
    space = bench.space_of(shortlist[0])
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    study.set_user_attr(attr.PROXIES, "benchmark objective")
    dists = space.distributions()
    by_params = {}
    for i in shortlist:
        params = space.to_params(bench.archs[i])
        by_params[json.dumps(params, sort_keys=True, default=str)] = i
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=float(values[i])))
    replay = Replay(journal, space, by_params)
    record = pick_top_trials(study, k=len(shortlist), trainer=replay, space=space)  # type: ignore[arg-type]
    return record, replay.charged


def budget_row(args, bench, values, truth, b, journal) -> dict[str, Any]:
    """One budget's second stage, read against the benchmark."""
    fits = np.asarray(b["fits"])
    pct = _percentiles_of(truth[fits])
    same: dict[str, list[int]] = {}
    for j, i in enumerate(fits):
        same.setdefault(_params_key(bench, int(i)), []).append(j)

    def percentile(i: int) -> float:  # an architecture listed twice: the mean of its entries
        return float(np.mean([pct[j] for j in same[_params_key(bench, i)]]))

    record, cpu = second_stage(bench, values, b["top"], journal)
    picked = b["top"][record["zero_cost_rank"] - 1]
    obj = _oriented(values, True)[fits]
    return {
        "percentile": b["percentile"], "max_params": b["max_params"], "feasible": len(fits),
        "zero_cost_pick": float(pct[obj == obj.max()].mean()),
        "second_stage_pick": percentile(picked),
        "best_of_top": _expected_best_of_top(obj, pct, args.k),
        "best_of_shortlist": max(percentile(i) for i in b["top"]),
        "picked": bench.ids[picked], "picked_zero_cost_rank": record["zero_cost_rank"],
        "cpu_seconds": cpu,
        "unpruned_cpu_seconds": sum(journal.curves[entry_key(bench, i)]["cpu_seconds"] for i in b["top"]),
        "shortlist": [{"id": bench.ids[i], "truth_percentile": percentile(i), "state": r["state"],
                       "losses": r["losses"]} for i, r in zip(b["top"], record["shortlist"])],
    }


def run(args) -> None:
    bench = load_benchmark(args.benchmark)
    protocol = default_protocol(bench.space_of(0).family)
    values = objective_values(bench, args.objective, Path(args.checkpoint))
    if get_proxy(args.objective).direction != "maximize":
        raise SystemExit("the objective must be maximised")
    truth = np.asarray(bench.truth, dtype=float)
    counts = np.asarray([bench.space_of(i).num_params(a) for i, a in enumerate(bench.archs)], dtype=float)
    lists = shortlists(bench, values, counts, args.k)
    name = Path(bench.path).stem if args.benchmark not in ("nas-bench-bert", "lts-gpt2-wt103") else args.benchmark
    journal = JournalTrainer(bench, protocol, Path(args.journal or RESULTS / f"pick.{name}.journal.jsonl"),
                             args.device)
    if args.pilot:
        return pilot(args, bench, lists, journal, truth, name)
    needed = sorted({i for b in lists for i in b["top"]})
    print(f"{bench.path}: {len(needed)} distinct architectures in the 8 shortlists of {args.k}; "
          f"{sum(entry_key(bench, i) in journal.curves for i in needed)} already in the journal", flush=True)
    rows = []
    for b in lists:  # budget by budget, so a stopped run leaves whole budgets measured (and reported)
        for i in b["top"]:
            journal.ensure(i)
        rows.append(budget_row(args, bench, values, truth, b, journal))
        if len(rows) < len(lists):
            report(args, bench, rows, journal, truth, values, name, lists, partial=True)
    report(args, bench, rows, journal, truth, values, name, lists)


def _bootstrap(diffs: np.ndarray, resamples: int = 1000, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    means = [float(diffs[rng.integers(0, len(diffs), len(diffs))].mean()) for _ in range(resamples)]
    return [float(x) for x in np.percentile(means, [2.5, 97.5])]


def report(args, bench, rows, journal, truth, values, name, lists, partial: bool = False) -> None:
    second = np.array([r["second_stage_pick"] for r in rows])
    zero = np.array([r["zero_cost_pick"] for r in rows])
    setup = max((c.get("setup_seconds", 0.0) for c in journal.curves.values()), default=0.0)
    out = {
        "benchmark": bench.path, "metric": bench.metric, "objective": args.objective, "k": args.k,
        "checkpoint": args.checkpoint, "protocol": journal.protocol.to_dict(),
        "signal": next(iter(journal.trainers.values())).signal if journal.trainers else None,
        "machine": f"{os.cpu_count()} CPUs, torch threads {__import__('torch').get_num_threads()}",
        "budgets": rows,
        "second_stage": {"mean": float(second.mean()), "worst": float(second.min()),
                         "mean_interval_over_budgets": _bootstrap(second)},
        "zero_cost": {"mean": float(zero.mean()), "worst": float(zero.min()),
                      "mean_interval_over_budgets": _bootstrap(zero)},
        "difference": {"mean": float((second - zero).mean()), "interval_over_budgets": _bootstrap(second - zero)},
        "mean_best_of_top": float(np.mean([r["best_of_top"] for r in rows])),
        "cpu_seconds_per_budget": {"mean": float(np.mean([r["cpu_seconds"] for r in rows])),
                                   "max": float(np.max([r["cpu_seconds"] for r in rows])),
                                   "teacher_targets_once": setup},
        "budgets_measured": f"{len(rows)} of {len(lists)}" + (" (a stopped run: resume with the same command)"
                                                              if partial else ""),
        "intervals": "1000 bootstrap resamples of the 8 budgets (seed 0): retraining per architecture resample "
                     "is out of reach, so the interval is over budgets, not architectures",
    }
    print(f"\n{'budget':>6} {'fit':>4} {'zero-cost':>9} {'2nd stage':>9} {'best of top':>11} {'rank':>4} "
          f"{'CPU s':>7} {'unpruned':>8}")
    for r in rows:
        print(f"{r['percentile']:>5.0f}% {r['feasible']:>4} {r['zero_cost_pick']:9.3f} {r['second_stage_pick']:9.3f} "
              f"{r['best_of_top']:11.3f} {r['picked_zero_cost_rank']:>4} {r['cpu_seconds']:7.0f} "
              f"{r['unpruned_cpu_seconds']:8.0f}")
    print(f"mean / worst: zero-cost {zero.mean():.3f} / {zero.min():.3f}, second stage {second.mean():.3f} / "
          f"{second.min():.3f} (difference {out['difference']['mean']:+.3f}, 95% over budgets "
          f"{out['difference']['interval_over_budgets'][0]:+.3f}..{out['difference']['interval_over_budgets'][1]:+.3f}); "
          f"best of top {args.k} {out['mean_best_of_top']:.3f}")
    path = Path(args.json or RESULTS / f"pick.{name}.json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


def pilot(args, bench, lists, journal, truth, name) -> None:
    """Settings pilot on architectures in no shortlist: cost per run, and how the rungs order them."""
    listed = {i for b in lists for i in b["top"]}
    rng = np.random.default_rng(0)
    pool = [i for i in range(len(bench.archs)) if i not in listed]
    chosen = sorted(rng.choice(pool, size=args.pilot, replace=False).tolist())
    rows = [journal.ensure(i) for i in chosen]
    rungs = sorted(rows[0]["losses"], key=int)
    tau = {s: float(kendalltau([-r["losses"][s] for r in rows], truth[chosen]).statistic) for s in rungs}
    last = rungs[-1]
    agree = {s: float(kendalltau([r["losses"][s] for r in rows], [r["losses"][last] for r in rows]).statistic)
             for s in rungs}
    out = {"benchmark": bench.path, "architectures": [bench.ids[i] for i in chosen],
           "protocol": journal.protocol.to_dict(), "losses": [r["losses"] for r in rows],
           "cpu_seconds": [r["cpu_seconds"] for r in rows], "tau_vs_truth": tau, "tau_vs_last_rung": agree}
    print(json.dumps({k: out[k] for k in ("cpu_seconds", "tau_vs_truth", "tau_vs_last_rung")}, indent=1))
    path = RESULTS / f"pick_pilot.{name}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", required=True, help="a bundled benchmark name or a file rank takes")
    parser.add_argument("--objective", required=True, help="the zero-cost objective whose top K are shortlisted")
    parser.add_argument("--checkpoint", required=True, help="a `rank` checkpoint holding the objective's scores")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--journal", default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--pilot", type=int, default=0, help="train N architectures in no shortlist instead")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
