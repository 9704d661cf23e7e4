"""The smallest complete search space: one class in one file, searched, recorded and read back.

    python examples/uniform_space.py [--n-trials 12] [--storage sqlite:///uniform.db]

``UniformSpace`` is a stack of BERT blocks that all share one FFN width and one head count: two
genes, whatever the depth. Defining the class registers it under its ``kind``, so a study searched
over it is read back (``read_search``, ``optuna-wpca show`` in a process that imported it) like a
built-in one. It declares what the rest of the plugin needs from a space: its genes as Optuna
distributions, the architecture they stand for, the model it builds (here a ``WPCAModel``, so the
transformers export works as for the built-in spaces), an analytic parameter count, the widest FFN,
the smallest candidates (for budget checks), its block kinds with names and colours (for the
dashboard's pictures) and its longest sequence.
"""

import argparse
from typing import Any, Mapping

import optuna
from optuna.distributions import CategoricalDistribution

import optuna_wpca
from optuna_wpca import Architecture, SearchSpace, WPCASpace
from optuna_wpca.models import WPCALayerConfig


class UniformSpace(SearchSpace):
    """``num_layers`` BERT blocks at ``hidden_size``, one FFN width and one head count for all."""

    kind = "uniform-bert"
    block_kinds = {"bert": ("BERT block", "#4C72B0")}

    def __init__(self, num_layers: int = 4, hidden_size: int = 128, *, ffn_sizes=(128, 256, 512),
                 heads=(2, 4), count: str = "non_embedding") -> None:
        super().__init__(count=count)
        self.num_layers, self.hidden_size = num_layers, hidden_size
        self.ffn_sizes, self.heads = tuple(ffn_sizes), tuple(heads)
        self.max_position_embeddings = 512

    def config(self) -> dict[str, Any]:
        return {"num_layers": self.num_layers, "hidden_size": self.hidden_size, "ffn_sizes": list(self.ffn_sizes),
                "heads": list(self.heads), "count": self.count}

    def distributions(self) -> dict[str, CategoricalDistribution]:
        return {"ffn_size": CategoricalDistribution(self.ffn_sizes), "heads": CategoricalDistribution(self.heads)}

    def _layers_of(self, heads: int) -> WPCASpace:
        # Each candidate is a W-PCA-family model whose blocks are all BERT blocks with these heads.
        return WPCASpace(self.num_layers, self.hidden_size, blocks=("bert",), ffn_unit=1,
                         ffn_mults=self.ffn_sizes, bert_heads=heads, count=self.count)

    def from_params(self, params: Mapping[str, Any]) -> Architecture:
        self._check_params(params, ["ffn_size", "heads"])
        layer = WPCALayerConfig("bert", params["ffn_size"], params["heads"])
        return Architecture(self.hidden_size, (layer,) * self.num_layers)

    def to_params(self, arch: Architecture) -> dict[str, Any]:
        return {"ffn_size": arch.layers[0].ffn_size, "heads": arch.layers[0].heads}

    def build(self, arch: Architecture, *, seed: int | None = 0, device: Any = "cpu", **kwargs: Any):
        return self._layers_of(arch.layers[0].heads).build(arch, seed=seed, device=device, **kwargs)

    def num_params(self, arch: Architecture, count: str | None = None) -> int:
        return self._layers_of(arch.layers[0].heads).num_params(arch, count)

    def widest_ffn(self) -> int:
        return max(self.ffn_sizes)

    def _smallest_candidates(self) -> list[Architecture]:
        return [self.from_params({"ffn_size": min(self.ffn_sizes), "heads": h}) for h in self.heads]

    def block_kind(self, layer: Any) -> str:
        return "bert"

    def describe(self, arch: Architecture) -> list[str]:
        return [f"bert ffn {layer.ffn_size} heads {layer.heads}" for layer in arch.layers]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-trials", type=int, default=12, help="evaluations (default 12)")
    parser.add_argument("--storage", default=None, help="Optuna storage URL (default: in memory)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    space = optuna_wpca.space_from_dict({"type": "uniform-bert", "num_layers": 4, "hidden_size": 128})
    budget = space.num_params(space.from_params({"ffn_size": 256, "heads": 4}))
    study = optuna.create_study(storage=args.storage, direction="maximize",
                                sampler=optuna_wpca.WPCASampler(space, max_params=budget, population_size=4, seed=0))
    study.optimize(optuna_wpca.ZeroCostObjective(space, batch=optuna_wpca.text_batch(batch_size=8, seq_len=64)),
                   n_trials=args.n_trials)
    record = optuna_wpca.read_search(study)
    best = record.space.from_params(study.best_trial.params)
    print(f"searched {record.space.kind} with a budget of {record.budget.describe()}: best W-PCA "
          f"{study.best_value:.4g}, {record.space.num_params(best):,} parameters, {record.space.summary(best)}")
