"""GPT-style decoders: W-PCA against measured latency and peak memory, as a three-objective search.

    python examples/decoder_pareto.py [--n-trials 60] [--out decoder_pareto.png]

LiteTransformerSearch's setting on this machine: the decoder space (depth, width, per-layer heads
and FFN width), quality by a zero-cost proxy, cost by measured latency and peak memory (batch 1,
128 tokens). WPCASampler selects parents by NSGA-II rank and crowding over the three objectives.
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import optuna  # noqa: E402

import optuna_wpca  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--n-trials", type=int, default=60, help="evaluations (default 60)")
parser.add_argument("--population-size", type=int, default=20, help="GA population (default 20)")
parser.add_argument("--out", default="decoder_pareto.png", help="figure of the Pareto front (default decoder_pareto.png)")
parser.add_argument("--storage", default=None, help="Optuna storage URL, e.g. sqlite:///wpca.db, so that "
                    "optuna-dashboard can open the study (default: in memory)")
parser.add_argument("--study-name", default=None, help="study name (default: a generated one)")
args = parser.parse_args()
optuna.logging.set_verbosity(optuna.logging.WARNING)

space = optuna_wpca.DecoderSpace.small()
objective = optuna_wpca.ZeroCostObjective(space, proxies=("wpca", "latency", "peak_memory"),
                                          batch=optuna_wpca.text_batch(batch_size=16, seq_len=64))
study = optuna.create_study(storage=args.storage, study_name=args.study_name, directions=["maximize", "minimize", "minimize"],
                            sampler=optuna_wpca.WPCASampler(space, population_size=args.population_size, seed=0))
study.optimize(objective, n_trials=args.n_trials)
ax = optuna.visualization.matplotlib.plot_pareto_front(
    study, targets=lambda t: (t.values[0], t.values[1]), target_names=["W-PCA", "latency (ms)"])
ax.figure.savefig(args.out, dpi=120, bbox_inches="tight")
print(f"{len(study.best_trials)} Pareto-optimal decoders over (W-PCA, latency, peak memory); wrote {args.out}")
for t in sorted(study.best_trials, key=lambda t: t.values[1])[:10]:
    arch = space.from_params(t.params)
    print(f"  trial {t.number:>3}: {arch.num_layers} layers x {arch.hidden_size}, W-PCA {t.values[0]:.4g}, "
          f"{t.values[1]:.2f} ms, {t.values[2]:.1f} MB")
