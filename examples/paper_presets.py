"""The paper's two searches: W-PCA-Small (12 layers, <= 15.7M) and W-PCA-Tiny (6 layers, <= 10M).

    python examples/paper_presets.py --preset small              # 50 x 40 = 2,000 evaluations
    python examples/paper_presets.py --preset tiny --generations 2 --population-size 6 --batch-size 8

Parameters are counted over the encoder layers (the convention under which the paper's budgets
admit hidden-528 models; see docs/guide.md). Defaults are the paper's: population 50, 40 generations,
parents from the top 10, mutation 0.1, a 128 x 128 batch.
"""

import argparse

import optuna

import optuna_wpca

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--preset", choices=("small", "tiny"), default="small", help="W-PCA-Small (<= 15.7M) or -Tiny (6 layers, <= 10M)")
parser.add_argument("--population-size", type=int, default=50, help="GA population (default 50, the paper's)")
parser.add_argument("--generations", type=int, default=40, help="GA generations (default 40, the paper's)")
parser.add_argument("--batch-size", type=int, default=128, help="sequences in the minibatch (default 128)")
parser.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (default 128)")
parser.add_argument("--storage", default=None, help="Optuna storage URL, e.g. sqlite:///wpca.db (default: in memory)")
args = parser.parse_args()

space, budget = optuna_wpca.preset(f"wpca-{args.preset}")
sampler = optuna_wpca.WPCASampler(space, max_params=budget.max_params, population_size=args.population_size,
                                  n_generations=args.generations, seed=0)
study = optuna.create_study(direction="maximize", sampler=sampler, storage=args.storage,
                            study_name=f"wpca-{args.preset}", load_if_exists=True)
batch = optuna_wpca.text_batch(batch_size=args.batch_size, seq_len=args.seq_len)
study.optimize(optuna_wpca.ZeroCostObjective(space, batch=batch), n_trials=sampler.n_trials)
best = space.from_params(study.best_trial.params)
print(f"W-PCA-{args.preset.capitalize()}: best W-PCA {study.best_value:.4g}, {space.num_params(best):,} parameters")
for i, line in enumerate(space.describe(best)):
    print(f"  layer {i:>2}: {line}")
