"""W-PCA against measured CPU latency: a two-objective search and its Pareto front.

    python examples/pareto_latency.py [--n-trials 60] [--out pareto_latency.png]

The LiteTransformerSearch use case: maximise W-PCA, minimise the median forward latency (batch 1,
128 tokens, after warm-up) measured on this machine; WPCASampler then selects parents by NSGA-II
rank and crowding distance.
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import optuna  # noqa: E402

import optuna_wpca  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--n-trials", type=int, default=60, help="evaluations (default 60)")
parser.add_argument("--population-size", type=int, default=20, help="GA population (default 20)")
parser.add_argument("--out", default="pareto_latency.png", help="figure of the Pareto front (default pareto_latency.png)")
parser.add_argument("--storage", default=None, help="Optuna storage URL, e.g. sqlite:///wpca.db, so that "
                    "optuna-dashboard can open the study (default: in memory)")
parser.add_argument("--study-name", default=None, help="study name (default: a generated one)")
args = parser.parse_args()

space, budget = optuna_wpca.preset("wpca-tiny")
sampler = optuna_wpca.WPCASampler(space, max_params=budget.max_params, population_size=args.population_size, seed=0)
objective = optuna_wpca.ZeroCostObjective(
    space, proxies=("wpca", "latency"), batch=optuna_wpca.text_batch(batch_size=16, seq_len=32)
)
study = optuna.create_study(storage=args.storage, study_name=args.study_name, directions=["maximize", "minimize"],
                            sampler=sampler)
study.optimize(objective, n_trials=args.n_trials)
ax = optuna.visualization.matplotlib.plot_pareto_front(study, target_names=["W-PCA", "latency (ms)"])
ax.figure.savefig(args.out, dpi=120, bbox_inches="tight")
print(f"{len(study.best_trials)} Pareto-optimal trials; wrote {args.out}")
for t in sorted(study.best_trials, key=lambda t: t.values[1]):
    print(f"  trial {t.number:>3}: W-PCA {t.values[0]:.4g}, {t.values[1]:.2f} ms, {t.user_attrs['num_params']:,} params")
