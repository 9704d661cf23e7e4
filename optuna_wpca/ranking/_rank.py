"""Score every architecture of a benchmark with every proxy, resumably, and correlate."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from optuna_wpca._errors import InputError
from optuna_wpca._text import TextBatch, text_batch
from optuna_wpca.proxies import DEFAULT_REFERENCE_SIZE, ReferenceSample, check_proxy_options, combine, compute_proxy, get_proxy
from optuna_wpca.ranking._benchmark import Benchmark
from optuna_wpca.ranking._budget_pick import DEFAULT_PERCENTILES, bootstrap_picks, budget_pick, budget_pick_within
from optuna_wpca.ranking._checkpoint import entry_key, read_checkpoint
from optuna_wpca.ranking._correlation import correlations, within_bucket, within_depth

#: Always reported next to the proxies asked for: a proxy is only useful where it beats them.
TRIVIAL_BASELINES = ("num_layers", "params")


@dataclass
class ProxyRanking:
    """One proxy's values on a benchmark, their seconds, and their correlations with the truth."""

    name: str
    needs_grad: bool
    values: list[float] = field(default_factory=list)
    seconds: float = 0.0
    kendall_tau: float = float("nan")
    spearman_rho: float = float("nan")
    #: Name of the proxy whose computation also produced this one's values (see ``rank_proxies``).
    shared_with: str | None = None
    #: Correlations within each depth, when the benchmark has several (see ``within_depth``).
    by_depth: dict[str, Any] | None = None
    #: Correlations within each size bucket, when the benchmark file has buckets (``within_bucket``).
    by_bucket: dict[str, Any] | None = None
    #: The pick under a budget (``budget_pick``), with ``within_depth`` and ``bootstrap`` where computed.
    budget: dict[str, Any] | None = None
    #: The published (tau, rho) of this proxy on the benchmark, and their source, where there are some.
    cited: tuple[float, float] | None = None
    cited_source: str = ""

    @property
    def seconds_per_1000(self) -> float:
        """Seconds per 1,000 evaluations (building the model excluded)."""
        return 1000.0 * self.seconds / max(1, len(self.values))

    def to_dict(self) -> dict[str, Any]:
        """The figures as a JSON-ready dict (the ``rank --json`` format)."""
        out = {
            "kendall_tau": self.kendall_tau,
            "spearman_rho": self.spearman_rho,
            "seconds_per_1000": self.seconds_per_1000,
            "n": len(self.values),
            "needs_grad": self.needs_grad,
        }
        if self.shared_with:
            out["shared_with"] = self.shared_with
        if self.by_depth:
            out["within_depth"] = self.by_depth
        if self.by_bucket:
            out["within_bucket"] = self.by_bucket
        if self.budget:
            out["budget_pick"] = self.budget
        if self.cited is not None:
            tau, rho = self.cited
            out["paper"] = {"kendall_tau": tau, "spearman_rho": rho, "source": self.cited_source}
        return out


def rank_proxies(
    benchmark: Benchmark,
    proxies: Sequence[str],
    *,
    batch: TextBatch | None = None,
    limit: int | None = None,
    seed: int = 42,
    device: str | torch.device = "cpu",
    options: dict[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
    share: bool = True,
    checkpoint: str | Path | None = None,
    shard: tuple[int, int] | None = None,
    reference_size: int = DEFAULT_REFERENCE_SIZE,
    reference_seed: int = 0,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    resamples: int = 1000,
) -> dict[str, ProxyRanking] | None:
    """Score every architecture with every proxy and correlate with the benchmark's scores.

    Each candidate is built once (seeded), then each proxy is timed on its own; the building time
    is not charged to any proxy. The same batch and seed serve all proxies.

    With ``share=True``, a proxy whose value another one already produced as a by-product on the
    same candidate with the same options (``ProxyResult.parts["byproducts"]``: W-PCA yields V-PCA)
    is taken from it instead of recomputed; its ``shared_with`` names the
    source and its time is the source's, since that is what computing it costs.

    With ``checkpoint`` (a JSON-lines file), every scored architecture is appended as soon as it is
    done, and a later call with the same settings skips the entries already there, so a ranking
    of hundreds of candidates with slow proxies can be stopped and resumed. Entries are found by id
    and architecture, and the settings do not include the metric, so one checkpoint also serves the
    file's other metrics and a later version of the file with more entries scored. Seconds are the
    ones measured when each entry was scored.

    With ``shard=(k, m)`` (needs ``checkpoint``), only entries whose index is ``k`` modulo ``m``
    are scored, so ``m`` processes can share one checkpoint file (each line is appended with one
    write). The call then returns ``None`` unless the checkpoint holds every entry; a call without
    ``shard`` on the same file computes the correlations.
    """
    if shard is not None:
        k, m = shard
        if not checkpoint:
            raise InputError("shard needs a checkpoint file that the shards share")
        if not (m >= 1 and 0 <= k < m):
            raise InputError(f"shard must be (k, m) with 0 <= k < m, got {shard}")
    requested = list(dict.fromkeys([*proxies, *TRIVIAL_BASELINES]))
    # What is scored: combinations are made of their parts' values.
    names = list(dict.fromkeys(p for name in requested for p in (get_proxy(name).parts or (name,))))
    check_proxy_options(options or {})
    batch = (batch or text_batch(batch_size=128, seq_len=128)).to(device)  # the published tables' minibatch
    n = len(benchmark.archs) if limit is None else min(limit, len(benchmark.archs))
    if n < 2:
        raise InputError("ranking needs at least 2 architectures")
    how = _Scoring(benchmark, names, batch, seed, device, options or {}, share)
    entries = _scored_entries(how, n, checkpoint, shard, progress)
    if entries is None:
        return None
    results = {name: ProxyRanking(name, get_proxy(name).needs_grad, cited=benchmark.cited.get(name),
                                  cited_source=benchmark.cited_source) for name in names}
    for entry in entries:
        for name in names:
            value, seconds, source = entry[name]
            results[name].values.append(value)
            results[name].seconds += seconds
            if source != name:
                results[name].shared_with = source
    results = _with_combinations(results, requested, reference_size, reference_seed)
    _compare_with_truth(results, benchmark, n, percentiles, resamples)
    return results


def _scored_entries(how: _Scoring, n: int, checkpoint: str | Path | None, shard: tuple[int, int] | None,
                    progress: Callable[[int], None] | None) -> list[dict[str, tuple]] | None:
    """Every entry's ``{proxy: (value, seconds, computed_by)}``, in the file's order: read from the
    checkpoint where it holds them, scored (and appended to it) otherwise; ``None`` when a shard's
    part is done but the checkpoint does not hold every entry yet."""
    benchmark = how.benchmark
    # One untimed pass per proxy, so lazy initialisation (kernels, LAPACK) is not charged to entry 0.
    warm = benchmark.build(0, seed=how.seed, device=how.device)
    for name in how.names:
        compute_proxy(name, warm, how.batch, **how.options)
    del warm
    # The metric is not part of the settings: proxy values do not depend on it, so one checkpoint
    # serves every metric of a file, and a file that has grown (more entries scored) reuses it.
    settings = {"benchmark": Path(benchmark.path).name, "proxies": how.names,
                "batch": list(how.batch.shape), "seed": how.seed, "options": how.options, "share": how.share,
                "space": benchmark.space.to_dict() if benchmark.space else "per entry"}
    keys = [entry_key(benchmark, i) for i in range(n)]
    done = read_checkpoint(checkpoint, settings, keys, benchmark.metric) if checkpoint else {}
    log = None
    if checkpoint:
        log = open(checkpoint, "a")
        if not done and Path(checkpoint).stat().st_size == 0:
            log.write(json.dumps({"settings": settings}) + "\n")
    entries: list[dict[str, Any]] = []
    try:
        for i in range(n):
            if shard is not None and keys[i] not in done and i % shard[1] != shard[0]:
                continue  # another shard's entry
            entry = done.get(keys[i]) or _score_entry(how, i)
            entries.append(entry)
            if log and keys[i] not in done:
                log.write(json.dumps({"key": keys[i], "id": benchmark.ids[i], "scores": entry}) + "\n")
                log.flush()
            if progress:
                progress(1)
    finally:
        if log:
            log.close()
    if shard is None:
        return entries
    everything = read_checkpoint(checkpoint, settings, keys, benchmark.metric)  # every shard's, in order
    if any(key not in everything for key in keys):
        return None
    return [everything[key] for key in keys]


def _compare_with_truth(results: dict[str, ProxyRanking], benchmark: Benchmark, n: int,
                        percentiles: Sequence[float], resamples: int) -> None:
    """Each ranking's correlations with the trained scores (overall, within depth, within bucket) and
    its picks under parameter budgets."""
    truth = benchmark.truth[:n]
    depths = [arch.num_layers for arch in benchmark.archs[:n]]
    counts = [benchmark.space_of(i).num_params(benchmark.archs[i]) for i in range(n)]
    _budget_picks(results, truth, counts, depths, percentiles, resamples)
    buckets = benchmark.buckets[:n]
    for r in results.values():
        r.kendall_tau, r.spearman_rho = correlations(r.values, truth)
        if len(set(depths)) > 1:
            r.by_depth = within_depth(r.values, truth, depths)
        if len(set(buckets)) > 1:
            r.by_bucket = within_bucket(r.values, truth, buckets)


def _with_combinations(scored: dict[str, ProxyRanking], requested: list[str], size: int, seed: int
                       ) -> dict[str, ProxyRanking]:
    """The requested rankings, combinations computed from their parts on a seeded reference sample."""
    out = {}
    for name in requested:
        spec = get_proxy(name)
        if not spec.parts:
            out[name] = scored[name]
            continue
        n = len(scored[spec.parts[0]].values)
        rng = np.random.default_rng(seed)
        chosen = rng.choice(n, size=min(size, n), replace=False)
        reference = ReferenceSample({p: [scored[p].values[i] for i in chosen] for p in spec.parts}, seed)
        r = ProxyRanking(name, spec.needs_grad)  # (no published figures for a combination of ours)
        r.values = [combine(spec.parts, {p: scored[p].values[i] for p in spec.parts}, reference)[0]
                    for i in range(n)]
        r.seconds = sum(scored[p].seconds for p in spec.parts)
        out[name] = r
    return out


def _budget_picks(results: dict[str, ProxyRanking], truth: list[float], counts: list[int], depths: list[int],
                  percentiles: Sequence[float], resamples: int) -> None:
    """Each ranking's pick under a budget, within depth where there are several, and the bootstrap."""
    maximize = {name: get_proxy(name).direction == "maximize" for name in results}
    for name, r in results.items():
        r.budget = budget_pick(r.values, truth, counts, maximize=maximize[name], percentiles=percentiles)
        if len(set(depths)) > 1:
            r.budget["within_depth"] = budget_pick_within(r.values, truth, counts, depths,
                                                          maximize=maximize[name], percentiles=percentiles)
    if resamples > 0:
        boot = bootstrap_picks({name: (r.values, maximize[name]) for name, r in results.items()}, truth, counts,
                               baseline="params", resamples=resamples, percentiles=percentiles)
        for name, r in results.items():
            r.budget["bootstrap"] = boot[name]


@dataclass(frozen=True)
class _Scoring:
    """What every entry of one ranking is scored with."""

    benchmark: Benchmark
    names: list[str]
    batch: TextBatch
    seed: int
    device: str | torch.device
    options: dict[str, Any]
    share: bool

    def sync(self) -> None:
        if torch.device(self.device).type == "cuda":
            torch.cuda.synchronize()


def _score_entry(how: _Scoring, i: int) -> dict[str, tuple]:
    """``{proxy: (value, seconds, computed_by)}`` for architecture ``i``."""
    benchmark, names, batch, options, share, sync = how.benchmark, how.names, how.batch, how.options, how.share, how.sync
    model = benchmark.build(i, seed=how.seed, device=how.device)
    byproducts: dict[str, tuple[float, float, str]] = {}
    entry: dict[str, tuple] = {}
    for name in names:
        if share and name in byproducts:
            entry[name] = byproducts[name]
            continue
        sync()
        start = time.perf_counter()
        result = compute_proxy(name, model, batch, **(options or {}))
        sync()
        seconds = time.perf_counter() - start
        entry[name] = (float(result.value), seconds, name)
        for other, v in result.parts.get("byproducts", {}).items():
            byproducts.setdefault(other, (float(v), seconds, name))
    return entry
