"""Ranking correlation of zero-cost proxies against a trained benchmark.

Three file formats: NAS-Bench-BERT's ``BERT_benchmark.json``, LiteTransformerSearch's trained GPT-2
decoders (``models.json``: ``id``, ``config``, ``valid_ppl``, ``params``) and optuna-wpca's own
(``benchmarks/own_bench.py``). Both public ones ship with the package and are found by name.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from scipy.stats import ConstantInputWarning, kendalltau, spearmanr

from optuna_wpca._text import TextBatch, text_batch
from optuna_wpca.proxies import check_proxy_options, compute_proxy, get_proxy
from optuna_wpca.spaces import Architecture, DecoderSpace, FlexiBERTSpace, SearchSpace, space_from_dict

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

#: Benchmarks bundled with the package, by name (``rank --benchmark NAME``).
BUNDLED_BENCHMARKS = {
    "nas-bench-bert": ("nas-bench-bert", "BERT_benchmark.json"),
    "lts-gpt2-wt103": ("lts-gpt2-wt103", "models.json"),
}

#: Published figures on the LTS set, printed beside ours (|Kendall tau|, |Spearman rho| against perplexity).
LTS_REFERENCES = {
    "LPZero (arXiv 2410.04808, published score file)": (0.886, 0.980),
}

#: LiteTransformerSearch files: scores where a lower value is better.
LTS_METRICS = ("valid_ppl", "test_ppl")


def benchmark_path(name_or_path: str | Path) -> Path:
    """The file of a bundled benchmark (``"nas-bench-bert"``, ``"lts-gpt2-wt103"``) or the path itself."""
    if str(name_or_path) in BUNDLED_BENCHMARKS:
        folder, filename = BUNDLED_BENCHMARKS[str(name_or_path)]
        return Path(str(resources.files("optuna_wpca") / "data" / folder / filename))
    return Path(name_or_path)


@dataclass
class Benchmark:
    """Architectures with a ground-truth score each.

    ``space`` is the one space of every entry (NAS-Bench-BERT); a benchmark of our own format may
    mix spaces (one per depth, say), and then ``spaces`` holds each entry's.
    """

    archs: list[Architecture]
    scores: list[float]
    ids: list[Any]
    space: SearchSpace | None
    path: str = ""
    metric: str = "glue"
    spaces: list[SearchSpace] = field(default_factory=list)
    #: Per entry, the score of each training seed (``{seed: score}``), where the file has them.
    seed_runs: list[dict[str, float]] = field(default_factory=list)
    #: True for perplexities: correlations are then taken against the negated score, so a proxy
    #: that ranks the better models higher always has a positive tau.
    lower_is_better: bool = False

    @property
    def truth(self) -> list[float]:
        """The scores oriented so that higher is better."""
        return [-s for s in self.scores] if self.lower_is_better else list(self.scores)

    @property
    def reading(self) -> str:
        """How the correlations are read, for tables."""
        if self.lower_is_better:
            return f"tau / rho against -{self.metric} (lower {self.metric} is better)"
        return f"tau / rho against {self.metric} (higher is better)"

    def space_of(self, i: int) -> SearchSpace:
        return self.spaces[i] if self.spaces else self.space  # type: ignore[return-value]

    def build(self, i: int, *, seed: int, device: str | torch.device = "cpu"):
        return self.space_of(i).build(self.archs[i], seed=seed, device=device)


def load_benchmark(
    path: str | Path,
    *,
    metric: str | None = None,
    space: SearchSpace | None = None,
    count: str | None = None,
) -> Benchmark:
    """Read a trained benchmark, by bundled name or path.

    Formats: NAS-Bench-BERT's ``BERT_benchmark.json`` (a list of entries, scored by ``glue`` by
    default); LiteTransformerSearch's ``models.json`` (``{"models": [{"id", "config", "valid_ppl",
    "params"}]}``, scored by ``valid_ppl``, lower is better); optuna-wpca's own format
    (``{"entries": [{"id", "space", "params", "scores"}], "default_metric": ...}``, as
    ``benchmarks/own_bench.py`` writes it). ``count`` sets the parameter-count convention of the
    public benchmarks' spaces (default: the space's own, ``"all"`` for NAS-Bench-BERT and
    ``"non_embedding"`` for the decoders).

    Example:
        >>> bench = load_benchmark("lts-gpt2-wt103")
        >>> len(bench.archs), bench.metric, bench.lower_is_better
        (200, 'valid_ppl', True)
    """
    path = benchmark_path(path)
    if not path.is_file():
        names = ", ".join(BUNDLED_BENCHMARKS)
        raise FileNotFoundError(f"benchmark file {str(path)!r} does not exist (bundled benchmarks: {names})")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"benchmark file {str(path)!r} is not valid JSON: {err}") from None
    if isinstance(raw, dict) and "entries" in raw:
        return _load_own_benchmark(raw, path, metric)
    if isinstance(raw, dict) and "models" in raw:
        decoder = space if isinstance(space, DecoderSpace) else DecoderSpace.lts_gpt2(
            **({"count": count} if count else {}))
        return _load_lts_benchmark(raw, path, metric, decoder)
    if space is None or not isinstance(space, FlexiBERTSpace):
        space = FlexiBERTSpace(**({"count": count} if count else {}))
    metric = metric or "glue"
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"benchmark file {str(path)!r} holds no list of entries (nor a 'models' or 'entries' key)")
    archs, scores, ids = [], [], []
    for entry in raw:
        if not isinstance(entry, dict) or metric not in entry.get("scores", {}):
            raise ValueError(f"benchmark entry {entry.get('id', '?') if isinstance(entry, dict) else entry!r} "
                             f"has no scores[{metric!r}]")
        archs.append(space.from_benchmark_entry(entry))
        scores.append(float(entry["scores"][metric]))
        ids.append(entry.get("id", len(ids)))
    return Benchmark(archs, scores, ids, space, str(path), metric)


def _load_lts_benchmark(raw: dict[str, Any], path: Path, metric: str | None, space: DecoderSpace) -> Benchmark:
    metric = metric or "valid_ppl"
    if metric not in LTS_METRICS:
        raise ValueError(f"a LiteTransformerSearch benchmark is scored by {' or '.join(LTS_METRICS)}, not {metric!r}")
    models = raw["models"]
    if not isinstance(models, list) or len(models) < 2:
        raise ValueError(f"benchmark file {str(path)!r}: 'models' must be a list of at least 2 trained models")
    archs, scores, ids = [], [], []
    for i, entry in enumerate(models):
        name = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
            raise ValueError(f"benchmark entry {name!r} has no 'config' object")
        score = entry.get(metric)
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) or score <= 0:
            raise ValueError(f"benchmark entry {name!r} has no positive finite {metric!r} (got {score!r})")
        try:
            archs.append(space.from_lts_config(entry["config"]))
        except ValueError as err:
            raise ValueError(f"benchmark entry {name!r} does not build: {err}") from None
        scores.append(float(score))
        ids.append(name)
    return Benchmark(archs, scores, ids, space, str(path), metric, lower_is_better=True)


def _load_own_benchmark(raw: dict[str, Any], path: Path, metric: str | None) -> Benchmark:
    metric = metric or raw.get("default_metric")
    entries = [e for e in raw["entries"] if isinstance(e, dict) and metric in e.get("scores", {})]
    if not metric or len(entries) < 2:
        raise ValueError(f"benchmark file {str(path)!r} has fewer than 2 entries with scores[{metric!r}]")
    cache: dict[str, SearchSpace] = {}
    archs, scores, ids, spaces, runs = [], [], [], [], []
    for entry in entries:
        key = json.dumps(entry["space"], sort_keys=True)
        if key not in cache:  # one space object per distinct description, built once
            cache[key] = space_from_dict(entry["space"])
        space = cache[key]
        archs.append(space.from_params(entry["params"]))
        scores.append(float(entry["scores"][metric]))
        ids.append(entry.get("id", len(ids)))
        spaces.append(space)
        runs.append({str(k): float(v) for k, v in entry.get("runs", {}).get(metric, {}).items()})
    only = spaces[0] if len(cache) == 1 else None
    return Benchmark(archs, scores, ids, only, str(path), metric, spaces=[] if only else spaces,
                     seed_runs=runs if any(runs) else [])


def seed_noise(benchmark: Benchmark) -> dict[str, Any] | None:
    """How well one training seed ranks the architectures like another: Kendall tau and Spearman rho
    between the scores of two seeds, overall and within each depth. A proxy's correlation with the
    benchmark cannot be read finer than this. ``None`` when the file has no per-seed scores."""
    if not benchmark.seed_runs:
        return None
    seeds = sorted(set.intersection(*(set(r) for r in benchmark.seed_runs)), key=lambda s: (len(s), s))
    if len(seeds) < 2:
        return None
    a, b = seeds[:2]
    first = [r[a] for r in benchmark.seed_runs]
    second = [r[b] for r in benchmark.seed_runs]
    tau, rho = _correlations(first, second)
    out: dict[str, Any] = {"seeds": [a, b], "n": len(first), "kendall_tau": tau, "spearman_rho": rho}
    depths = [arch.num_layers for arch in benchmark.archs]
    if len(set(depths)) > 1:
        out["within_depth"] = _within_depth(first, second, depths)
    return out


def format_seed_noise(noise: dict[str, Any], metric: str) -> str:
    line = (f"seed noise ({metric}, seed {noise['seeds'][0]} against seed {noise['seeds'][1]}, {noise['n']} "
            f"architectures): tau {noise['kendall_tau']:.3f}, rho {noise['spearman_rho']:.3f}")
    mean = noise.get("within_depth", {}).get("mean")
    if mean:
        line += f"; within depth tau {mean['kendall_tau']:.3f}, rho {mean['spearman_rho']:.3f}"
    return line + " (proxies are correlated with the mean over seeds; differences below this noise say little)"


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
    #: Correlations within each depth, when the benchmark has several (see ``_within_depth``).
    by_depth: dict[str, Any] | None = None

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
        if self.by_depth:
            out["within_depth"] = self.by_depth
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
    shard: tuple[int, int] | None = None,
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
            raise ValueError("shard needs a checkpoint file that the shards share")
        if not (m >= 1 and 0 <= k < m):
            raise ValueError(f"shard must be (k, m) with 0 <= k < m, got {shard}")
    names = list(dict.fromkeys([*proxies, *TRIVIAL_BASELINES]))
    check_proxy_options(options or {})
    results = {name: ProxyRanking(name, get_proxy(name).needs_grad) for name in names}
    batch = (batch or text_batch()).to(device)
    n = len(benchmark.archs) if limit is None else min(limit, len(benchmark.archs))
    if n < 2:
        raise ValueError("ranking needs at least 2 architectures")
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    # One untimed pass per proxy, so lazy initialisation (kernels, LAPACK) is not charged to entry 0.
    warm = benchmark.build(0, seed=seed, device=device)
    for name in names:
        compute_proxy(name, warm, batch, **(options or {}))
    del warm
    # The metric is not part of the settings: proxy values do not depend on it, so one checkpoint
    # serves every metric of a file, and a file that has grown (more entries scored) reuses it.
    settings = {"benchmark": Path(benchmark.path).name, "proxies": names,
                "batch": list(batch.shape), "seed": seed, "options": options or {}, "share": share,
                "space": benchmark.space.to_dict() if benchmark.space else "per entry"}
    keys = [_entry_key(benchmark, i) for i in range(n)]
    done = _read_checkpoint(checkpoint, settings, keys, benchmark.metric) if checkpoint else {}
    log = None
    if checkpoint:
        log = open(checkpoint, "a")
        if not done and Path(checkpoint).stat().st_size == 0:
            log.write(json.dumps({"settings": settings}) + "\n")
    try:
        for i in range(n):
            if shard is not None and keys[i] not in done and i % shard[1] != shard[0]:
                continue
            entry = done.get(keys[i]) or _score_entry(benchmark, i, names, batch, seed, device, options, share, sync)
            for name in names:
                value, seconds, source = entry[name]
                results[name].values.append(value)
                results[name].seconds += seconds
                if source != name:
                    results[name].shared_with = source
            if log and keys[i] not in done:
                log.write(json.dumps({"key": keys[i], "id": benchmark.ids[i], "scores": entry}) + "\n")
                log.flush()
            if progress:
                progress(1)
    finally:
        if log:
            log.close()
    if shard is not None:
        everything = _read_checkpoint(checkpoint, settings, keys, benchmark.metric)
        if any(key not in everything for key in keys):
            return None
        return rank_proxies(benchmark, proxies, batch=batch, limit=limit, seed=seed, device=device,
                            options=options, share=share, checkpoint=checkpoint)
    truth = benchmark.truth[:n]
    depths = [arch.num_layers for arch in benchmark.archs[:n]]
    for r in results.values():
        r.kendall_tau, r.spearman_rho = _correlations(r.values, truth)
        if len(set(depths)) > 1:
            r.by_depth = _within_depth(r.values, truth, depths)
    return results


def _correlations(values: list[float], truth: list[float]) -> tuple[float, float]:
    """Kendall tau and Spearman rho; NaN (no warning) where either side is constant."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantInputWarning)
        return float(kendalltau(values, truth)[0]), float(spearmanr(values, truth)[0])


def _within_depth(values: list[float], truth: list[float], depths: list[int]) -> dict[str, Any]:
    """Tau and rho among architectures of one depth, per depth and averaged (weighted by count), so
    depth itself cannot carry the score. A proxy constant within a depth (depth itself) counts 0 there."""
    groups: dict[str, Any] = {}
    for d in sorted(set(depths)):
        idx = [i for i, x in enumerate(depths) if x == d]
        if len(idx) < 3:
            continue
        tau, rho = _correlations([values[i] for i in idx], [truth[i] for i in idx])
        groups[str(d)] = {"n": len(idx), "kendall_tau": tau, "spearman_rho": rho}
    weight = sum(g["n"] for g in groups.values())
    mean = {key: sum(g["n"] * (0.0 if np.isnan(g[key]) else g[key]) for g in groups.values()) / weight
            for key in ("kendall_tau", "spearman_rho")} if weight else {}
    return {"depths": groups, "mean": mean}


def _score_entry(benchmark, i, names, batch, seed, device, options, share, sync) -> dict[str, tuple]:
    """``{proxy: (value, seconds, computed_by)}`` for architecture ``i``."""
    model = benchmark.build(i, seed=seed, device=device)
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


def _entry_key(benchmark: Benchmark, i: int) -> str:
    """What a checkpoint line is found by: the entry's id and its architecture, so entries keep their
    scores when the file gains or reorders entries, and an id that now names another architecture is
    scored again."""
    params = benchmark.space_of(i).to_params(benchmark.archs[i])
    return json.dumps([benchmark.ids[i], params], sort_keys=True, default=str)


def _read_checkpoint(path: str | Path, settings: dict[str, Any], keys: list[str],
                     metric: str) -> dict[str, dict[str, tuple]]:
    """Entries already scored, by ``_entry_key``. Files of optuna-wpca 0.x before entry keys (a
    ``metric`` in the settings line, entries by index) are read when the metric is the same one."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return {}
    lines = path.read_text().splitlines()
    try:
        header = json.loads(lines[0])["settings"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f"checkpoint {str(path)!r} does not start with a ranking settings line") from None
    expected = json.loads(json.dumps(settings))  # as it reads back: tuples become lists
    by_index = "metric" in header  # the older layout: indices into the entries scored by that metric
    if by_index:
        expected = {**expected, "metric": metric}
    if header != expected:
        changed = sorted(k for k in expected if header.get(k) != expected[k])
        raise ValueError(f"checkpoint {str(path)!r} was written with other settings ({', '.join(changed)}); "
                         "use another file or the same settings")
    done: dict[str, dict[str, tuple]] = {}
    for line in lines[1:]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a kill: that entry is scored again
            continue
        if "settings" in record:  # shards that started on an empty file both wrote the header
            if record["settings"] != header:
                raise ValueError(f"checkpoint {str(path)!r} mixes rankings with different settings")
            continue
        if "key" in record:
            key = record["key"]
        elif by_index and int(record["index"]) < len(keys):
            key = keys[int(record["index"])]
        else:
            continue
        done[key] = {k: tuple(v) for k, v in record["scores"].items()}
    return done


def is_nas_bench_bert(benchmark: Benchmark) -> bool:
    return Path(benchmark.path).name == "BERT_benchmark.json"


def is_lts_bundled(benchmark: Benchmark) -> bool:
    return Path(benchmark.path).resolve() == benchmark_path("lts-gpt2-wt103").resolve()


def format_table(results: dict[str, ProxyRanking], benchmark: Benchmark | None = None) -> str:
    """The rank table; the W-PCA paper's Table 1 columns appear for NAS-Bench-BERT only."""
    paper = benchmark is None or is_nas_bench_bert(benchmark)
    depth = any(r.by_depth and r.by_depth["mean"] for r in results.values())
    header = f"{'proxy':<22}{'grad':>5}{'s/1000':>10}{'tau':>8}{'rho':>8}"
    header += f"{'depth tau':>11}{'depth rho':>11}" if depth else ""
    header += f"{'paper tau':>11}{'paper rho':>11}" if paper else ""
    lines = [header, "-" * len(header)]
    for r in results.values():
        tau, rho = PAPER_TABLE1.get(r.name, (float("nan"), float("nan")))
        cited = f"{tau:>11.3f}{rho:>11.3f}" if r.name in PAPER_TABLE1 else f"{'-':>11}{'-':>11}"
        within = ""
        if depth:
            mean = (r.by_depth or {}).get("mean") or {"kendall_tau": float("nan"), "spearman_rho": float("nan")}
            within = f"{mean['kendall_tau']:>11.3f}{mean['spearman_rho']:>11.3f}"
        lines.append(
            f"{r.name:<22}{'yes' if r.needs_grad else 'no':>5}{r.seconds_per_1000:>10.1f}"
            f"{r.kendall_tau:>8.3f}{r.spearman_rho:>8.3f}{within}{cited if paper else ''}"
            + (f"  (computed with {r.shared_with})" if r.shared_with else "")
        )
    if benchmark is not None:
        lines.append(benchmark.reading)
    if depth:
        lines.append("depth tau/rho: correlation among architectures of the same depth, averaged over depths "
                     "(weighted by count)")
    if paper:
        lines.append(f"paper columns: {PAPER_SOURCE} (NAS-Bench-BERT)")
    elif benchmark is not None and is_lts_bundled(benchmark):
        for source, (tau, rho) in LTS_REFERENCES.items():
            lines.append(f"published on these 200 models: {source}: |tau| {tau:.3f}, |rho| {rho:.3f}")
    return "\n".join(lines)
