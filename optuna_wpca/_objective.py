"""The zero-cost objective: suggest an architecture, build it, score it, record what was seen."""

from __future__ import annotations

import threading
import time
from typing import Any, Sequence

import optuna
import torch

from optuna_wpca._dashboard import upload_architecture
from optuna_wpca._text import TextBatch, text_batch
from optuna_wpca.proxies import check_proxy_options, compute_proxy, get_proxy
from optuna_wpca.sampler._sampler import FEASIBLE_ATTR
from optuna_wpca.spaces import SearchSpace

_logger = optuna.logging.get_logger("optuna.optuna_wpca.objective")


class ZeroCostObjective:
    """A ``study.optimize`` objective that scores untrained candidates with zero-cost proxies.

    One proxy gives a single value; several (``proxies=("wpca", "latency")``) give a tuple for a
    multi-objective study. The trial's user attributes keep the parameter count, the per-layer
    PCA dimensions, each proxy's parts, the layer-by-layer architecture and the seconds taken.
    An architecture scored before by this objective (same seed) is not scored again.

    With ``max_params``, the budget is set as an Optuna constraint (``trial.set_constraint``)
    and mirrored in the ``feasible`` user attribute; an over-budget candidate (possible only with
    a sampler that ignores the budget) is pruned before any model is built. ``min_params`` adds a
    lower bound the same way, for a band such as LiteTransformerSearch's 5M-12M.

    With an ``artifact_store`` (``optuna.artifacts.FileSystemArtifactStore(dir)``), each trial
    gets its architecture picture as an SVG artifact and its layer table as a dashboard note.

    Example:
        >>> import optuna, optuna_wpca
        >>> space = optuna_wpca.WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2)
        >>> objective = optuna_wpca.ZeroCostObjective(space, batch=optuna_wpca.text_batch(batch_size=4, seq_len=16))
        >>> study = optuna.create_study(direction="maximize")
        >>> study.optimize(objective, n_trials=2)
        >>> sorted(study.best_trial.user_attrs)[:3]
        ['architecture', 'cached', 'feasible']
    """

    def __init__(
        self,
        space: SearchSpace,
        proxy: str = "wpca",
        *,
        proxies: Sequence[str] | None = None,
        batch: TextBatch | None = None,
        device: str | torch.device = "cpu",
        seed: int = 0,
        max_params: float | None = None,
        min_params: float | None = None,
        artifact_store: Any = None,
        **proxy_options: Any,
    ) -> None:
        if not isinstance(space, SearchSpace):
            raise TypeError(f"ZeroCostObjective needs an optuna_wpca SearchSpace, got {type(space).__name__}")
        self.space = space
        self.proxies = tuple(proxies) if proxies else (proxy,)
        for name in self.proxies:
            get_proxy(name)  # fails early on an unknown name
        space.check_budget(max_params, min_params)
        check_proxy_options(proxy_options, self.proxies)
        self.device = torch.device(device)
        self.seed = seed
        self.max_params = max_params
        self.min_params = min_params
        self.proxy_options = proxy_options
        self.artifact_store = artifact_store
        self._batch = batch
        self._cache: dict[Any, tuple[list[float], dict[str, Any]]] = {}
        self._lock = threading.Lock()

    @property
    def batch(self) -> TextBatch:
        with self._lock:
            if self._batch is None:
                self._batch = text_batch()
            if self._batch.input_ids.device != self.device:
                self._batch = self._batch.to(self.device)
            return self._batch

    def score(self, arch: Any) -> tuple[list[float], dict[str, Any]]:
        """Proxy values and parts of one architecture (cached)."""
        key = (arch, self.seed)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        start = time.perf_counter()
        model = self.space.build(arch, seed=self.seed, device=self.device)
        values, parts = [], {}
        for name in self.proxies:
            result = compute_proxy(name, model, self.batch, **self.proxy_options)
            values.append(result.value)
            parts[name] = result.parts
        parts["seconds"] = time.perf_counter() - start
        with self._lock:
            self._cache[key] = (values, parts)
        return values, parts

    def __call__(self, trial: optuna.Trial) -> float | list[float]:
        arch = self.space.suggest(trial)
        n = self.space.num_params(arch)
        trial.set_user_attr("num_params", n)
        trial.set_user_attr("architecture", self.space.describe(arch))
        feasible = (self.max_params is None or n <= self.max_params) and (self.min_params is None or n >= self.min_params)
        if self.max_params is not None:
            trial.set_constraint("max_params", float(n - self.max_params))
        if self.min_params is not None:
            trial.set_constraint("min_params", float(self.min_params - n))
        trial.set_user_attr(FEASIBLE_ATTR, feasible)
        if not feasible:
            bound = (f"exceed the budget of {self.max_params:,.0f}" if self.max_params is not None
                     and n > self.max_params else f"fall below the lower bound of {self.min_params:,.0f}")
            raise optuna.TrialPruned(f"{n:,} parameters {bound}")
        cached = (arch, self.seed) in self._cache
        values, parts = self.score(arch)
        trial.set_user_attr("cached", cached)
        trial.set_user_attr("seconds", 0.0 if cached else parts["seconds"])
        for name in self.proxies:
            for key, value in parts[name].items():
                if key == "byproducts":
                    continue
                trial.set_user_attr(f"{name}.{key}" if key != "pca_dims" else "pca_dims", value)
        if self.artifact_store is not None:
            upload_architecture(trial, self.space, arch, self.artifact_store)
        return values[0] if len(values) == 1 else values
