"""A zero-cost architecture search with the package loaded from OptunaHub.

    python example.py            # loads samplers/wpca_nas from the registry
    python example.py --local    # loads this directory instead (no network)
"""

import argparse
from pathlib import Path

import optuna
import optunahub


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--local", action="store_true", help="load the package from this directory")
    parser.add_argument("--storage", default=None, help="Optuna storage URL (default: in memory)")
    parser.add_argument("--n-trials", type=int, default=20, help="evaluations (default 20)")
    args = parser.parse_args()
    if args.local:
        wpca = optunahub.load_local_module(package="samplers/wpca_nas",
                                           registry_root=str(Path(__file__).resolve().parents[2]))
    else:
        wpca = optunahub.load_module(package="samplers/wpca_nas")

    space = wpca.WPCASpace(num_layers=4, hidden_size=128, bert_heads=2, mobilebert_heads=2)
    sampler = wpca.WPCASampler(space, max_params=1.5e6, population_size=10, seed=0)
    objective = wpca.ZeroCostObjective(space, batch=wpca.text_batch(batch_size=8, seq_len=64))
    study = optuna.create_study(sampler=sampler, storage=args.storage, direction="maximize")
    study.optimize(objective, n_trials=args.n_trials)
    best = study.best_trial
    print(f"best W-PCA {best.value:.4g} with {best.user_attrs['num_params']:,} parameters: "
          f"{best.user_attrs['architecture']}  (B/M: BERT/MobileBERT block, number: FFN width)")


if __name__ == "__main__":
    main()
