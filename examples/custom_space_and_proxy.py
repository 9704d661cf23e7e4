"""A custom search space (from a JSON file) and a custom proxy registered next to the built-in ones.

    python examples/custom_space_and_proxy.py [--n-trials 12]
"""

import argparse
import json
import tempfile

import optuna
import torch

import optuna_wpca
from optuna_wpca import ProxyResult, register_proxy

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--n-trials", type=int, default=12, help="evaluations (default 12)")
parser.add_argument("--storage", default=None, help="Optuna storage URL, e.g. sqlite:///wpca.db, so that "
                    "optuna-dashboard can open the study (default: in memory)")
parser.add_argument("--study-name", default=None, help="study name (default: a generated one)")
args = parser.parse_args()


# A proxy is one function with the shared signature; the registry makes it usable everywhere
# (ZeroCostObjective, optuna-wpca rank --proxy, benchmarks).
@register_proxy("output_rank", needs_grad=False, description="numerical rank of the last hidden states")
def output_rank(model, batch):
    with torch.inference_mode():
        hidden = model(**batch.to(next(model.parameters()).device).as_kwargs())
    return ProxyResult(float(torch.linalg.matrix_rank(hidden.flatten(0, 1).float())))


# A space is data: 4 layers at hidden 256, FFN widths 64 x {2, 4, 8}, MobileBERT blocks only.
spec = {"type": "wpca", "num_layers": 4, "hidden_size": 256, "blocks": ["mobilebert"], "ffn_unit": 64,
        "ffn_mults": [2, 4, 8], "bert_heads": 8, "mobilebert_heads": 4}
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump(spec, f)
space = optuna_wpca.load_space(f.name)  # what `optuna-wpca search --space FILE` reads

study = optuna.create_study(storage=args.storage, study_name=args.study_name, directions=["maximize", "maximize"],
                            sampler=optuna_wpca.WPCASampler(space, population_size=4))
objective = optuna_wpca.ZeroCostObjective(space, proxies=("wpca", "output_rank"),
                                          batch=optuna_wpca.text_batch(batch_size=8, seq_len=32))
study.optimize(objective, n_trials=args.n_trials)
print(f"{len(study.best_trials)} Pareto-optimal trials over (W-PCA, output rank):")
for t in study.best_trials:
    print(f"  trial {t.number}: W-PCA {t.values[0]:.4g}, output rank {t.values[1]:.0f}, {space.describe(space.from_params(t.params))}")
