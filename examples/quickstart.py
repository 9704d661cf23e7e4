"""Quickstart: the README's example with small settings (a minute on 2 cores).

    python examples/quickstart.py [--n-trials 40] [--storage sqlite:///quickstart.db]
"""

import argparse

import optuna

import optuna_wpca

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--n-trials", type=int, default=40, help="evaluations (default 40)")
parser.add_argument("--storage", default=None, help="Optuna storage URL (default: in memory)")
args = parser.parse_args()

space, budget = optuna_wpca.preset("wpca-tiny")  # 6 layers at hidden 528, <= 10M parameters
sampler = optuna_wpca.WPCASampler(space, max_params=budget.max_params, population_size=10, seed=0)
study = optuna.create_study(direction="maximize", sampler=sampler, storage=args.storage,
                            study_name="quickstart", load_if_exists=True)
batch = optuna_wpca.text_batch(batch_size=16, seq_len=32)
# The objective reads the budget that the sampler recorded in the study.
study.optimize(optuna_wpca.ZeroCostObjective(space, proxy="wpca", batch=batch), n_trials=args.n_trials)
best = space.from_params(study.best_trial.params)
print(f"best W-PCA {study.best_value:.4g} with {space.num_params(best):,} parameters")
for i, line in enumerate(space.describe(best)):
    print(f"  layer {i}: {line}")
