"""Ranking correlation of zero-cost proxies against a trained benchmark (NAS-Bench-BERT format)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from scipy.stats import kendalltau, spearmanr

from optuna_wpca._text import TextBatch, text_batch
from optuna_wpca.proxies import check_proxy_options, compute_proxy, get_proxy
from optuna_wpca.spaces import Architecture, FlexiBERTSpace

#: Table 1 of the W-PCA paper (Kendall tau, Spearman rho on NAS-Bench-BERT), printed beside ours.
PAPER_TABLE1: dict[str, tuple[float, float]] = {
    "wpca": (0.526, 0.698),
    "vpca": (0.466, 0.677),
    "head_confidence": (0.306, 0.364),
    "synaptic_saliency": (0.130, 0.185),
    "jacobian_cosine": (0.116, 0.149),
    "activation_distance": (0.081, 0.123),
    "head_importance": (0.048, 0.170),
    "synaptic_diversity": (0.021, 0.174),
}
PAPER_SOURCE = "W-PCA, arXiv 2504.15983, Table 1"

#: Always reported next to the proxies asked for: a proxy is only useful where it beats them.
TRIVIAL_BASELINES = ("num_layers", "params")


@dataclass
class Benchmark:
    """Architectures with a ground-truth score each."""

    archs: list[Architecture]
    scores: list[float]
    ids: list[Any]
    space: FlexiBERTSpace
    path: str = ""
    metric: str = "glue"


def load_benchmark(path: str | Path, *, metric: str = "glue", space: FlexiBERTSpace | None = None) -> Benchmark:
    """Read a NAS-Bench-BERT ``BERT_benchmark.json``-style file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"benchmark file {str(path)!r} does not exist")
    try:
        entries = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"benchmark file {str(path)!r} is not valid JSON: {err}") from None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"benchmark file {str(path)!r} holds no list of entries")
    space = space or FlexiBERTSpace()
    archs, scores, ids = [], [], []
    for entry in entries:
        if not isinstance(entry, dict) or metric not in entry.get("scores", {}):
            raise ValueError(f"benchmark entry {entry.get('id', '?') if isinstance(entry, dict) else entry!r} "
                             f"has no scores[{metric!r}]")
        archs.append(space.from_benchmark_entry(entry))
        scores.append(float(entry["scores"][metric]))
        ids.append(entry.get("id", len(ids)))
    return Benchmark(archs, scores, ids, space, str(path), metric)


@dataclass
class ProxyRanking:
    name: str
    needs_grad: bool
    values: list[float] = field(default_factory=list)
    seconds: float = 0.0
    kendall_tau: float = float("nan")
    spearman_rho: float = float("nan")
    #: Name of the proxy whose computation also produced this one's values (see ``rank_proxies``).
    shared_with: str | None = None

    @property
    def seconds_per_1000(self) -> float:
        return 1000.0 * self.seconds / max(1, len(self.values))

    def to_dict(self) -> dict[str, Any]:
        out = {
            "kendall_tau": self.kendall_tau,
            "spearman_rho": self.spearman_rho,
            "seconds_per_1000": self.seconds_per_1000,
            "n": len(self.values),
            "needs_grad": self.needs_grad,
        }
        if self.shared_with:
            out["shared_with"] = self.shared_with
        if self.name in PAPER_TABLE1:
            tau, rho = PAPER_TABLE1[self.name]
            out["paper"] = {"kendall_tau": tau, "spearman_rho": rho, "source": PAPER_SOURCE}
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
) -> dict[str, ProxyRanking]:
    """Score every architecture with every proxy and correlate with the benchmark's scores.

    Each candidate is built once (seeded), then each proxy is timed on its own; the building time
    is not charged to any proxy. The same batch and seed serve all proxies.

    With ``share=True``, a proxy whose value another one already produced as a by-product on the
    same candidate with the same options (``ProxyResult.parts["byproducts"]``: W-PCA yields V-PCA)
    is taken from it instead of recomputed; its ``shared_with`` names the
    source and its time is the source's, since that is what computing it costs.

    With ``checkpoint`` (a JSON-lines file), every scored architecture is appended as soon as it is
    done, and a later call with the same settings skips the entries already there, so a ranking
    of hundreds of candidates with slow proxies can be stopped and resumed. Seconds are the ones
    measured when each entry was scored.
    """
    names = list(dict.fromkeys([*proxies, *TRIVIAL_BASELINES]))
    check_proxy_options(options or {})
    results = {name: ProxyRanking(name, get_proxy(name).needs_grad) for name in names}
    batch = (batch or text_batch()).to(device)
    n = len(benchmark.archs) if limit is None else min(limit, len(benchmark.archs))
    if n < 2:
        raise ValueError("ranking needs at least 2 architectures")
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    # One untimed pass per proxy, so lazy initialisation (kernels, LAPACK) is not charged to entry 0.
    warm = benchmark.space.build(benchmark.archs[0], seed=seed, device=device)
    for name in names:
        compute_proxy(name, warm, batch, **(options or {}))
    del warm
    settings = {"benchmark": Path(benchmark.path).name, "metric": benchmark.metric, "proxies": names,
                "batch": list(batch.shape), "seed": seed, "options": options or {}, "share": share,
                "space": benchmark.space.to_dict()}
    done = _read_checkpoint(checkpoint, settings) if checkpoint else {}
    log = None
    if checkpoint:
        log = open(checkpoint, "a")
        if not done and Path(checkpoint).stat().st_size == 0:
            log.write(json.dumps({"settings": settings}) + "\n")
    try:
        for i in range(n):
            entry = done.get(i) or _score_entry(benchmark, i, names, batch, seed, device, options, share, sync)
            for name in names:
                value, seconds, source = entry[name]
                results[name].values.append(value)
                results[name].seconds += seconds
                if source != name:
                    results[name].shared_with = source
            if log and i not in done:
                log.write(json.dumps({"index": i, "id": benchmark.ids[i], "scores": entry}) + "\n")
                log.flush()
            if progress:
                progress(1)
    finally:
        if log:
            log.close()
    truth = benchmark.scores[:n]
    for r in results.values():
        r.kendall_tau = float(kendalltau(r.values, truth)[0])
        r.spearman_rho = float(spearmanr(r.values, truth)[0])
    return results


def _score_entry(benchmark, i, names, batch, seed, device, options, share, sync) -> dict[str, tuple]:
    """``{proxy: (value, seconds, computed_by)}`` for architecture ``i``."""
    model = benchmark.space.build(benchmark.archs[i], seed=seed, device=device)
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


def _read_checkpoint(path: str | Path, settings: dict[str, Any]) -> dict[int, dict[str, tuple]]:
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return {}
    lines = path.read_text().splitlines()
    try:
        header = json.loads(lines[0])["settings"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f"checkpoint {str(path)!r} does not start with a ranking settings line") from None
    if header != json.loads(json.dumps(settings)):
        changed = sorted(k for k in settings if header.get(k) != json.loads(json.dumps(settings[k])))
        raise ValueError(f"checkpoint {str(path)!r} was written with other settings ({', '.join(changed)}); "
                         "use another file or the same settings")
    done: dict[int, dict[str, tuple]] = {}
    for line in lines[1:]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a kill: that entry is scored again
            continue
        done[int(record["index"])] = {k: tuple(v) for k, v in record["scores"].items()}
    return done


def format_table(results: dict[str, ProxyRanking]) -> str:
    header = f"{'proxy':<22}{'grad':>5}{'s/1000':>10}{'tau':>8}{'rho':>8}{'paper tau':>11}{'paper rho':>11}"
    lines = [header, "-" * len(header)]
    for r in results.values():
        tau, rho = PAPER_TABLE1.get(r.name, (float("nan"), float("nan")))
        paper = f"{tau:>11.3f}{rho:>11.3f}" if r.name in PAPER_TABLE1 else f"{'-':>11}{'-':>11}"
        lines.append(
            f"{r.name:<22}{'yes' if r.needs_grad else 'no':>5}{r.seconds_per_1000:>10.1f}"
            f"{r.kendall_tau:>8.3f}{r.spearman_rho:>8.3f}{paper}"
            + (f"  (computed with {r.shared_with})" if r.shared_with else "")
        )
    lines.append(f"paper columns: {PAPER_SOURCE}")
    return "\n".join(lines)
