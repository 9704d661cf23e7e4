"""Trained benchmarks: architectures with a ground-truth score each, by bundled name or file.

A file format is one loader registered with :func:`register_benchmark_format` (a test of the parsed
JSON, and a function that turns it into a :class:`Benchmark`): NAS-Bench-BERT's
``BERT_benchmark.json``, LiteTransformerSearch's trained GPT-2 decoders (``models.json``: ``id``,
``config``, ``valid_ppl``, ``params``) and optuna-wpca's own (``benchmarks/own_bench.py``). A loader
attaches whatever published figures exist for its file (``Benchmark.cited``, ``Benchmark.notes``),
so the report prints them without knowing benchmark names. Both public sets ship with the package
and are found by name.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import torch

from optuna_wpca._errors import InputError
from optuna_wpca._registry import Registry
from optuna_wpca.spaces import Architecture, DecoderSpace, FlexiBERTSpace, SearchSpace, space_from_dict

#: Benchmarks bundled with the package, by name (``rank --benchmark NAME``).
BUNDLED_BENCHMARKS = {
    "nas-bench-bert": ("nas-bench-bert", "BERT_benchmark.json"),
    "lts-gpt2-wt103": ("lts-gpt2-wt103", "models.json"),
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
    #: Per entry, its size bucket where the file has them (ours: equal slices of a parameter band).
    buckets: list[Any] = field(default_factory=list)
    #: Published correlations per proxy on this very set (``{proxy: (tau, rho)}``), printed beside ours,
    #: and where they come from.
    cited: dict[str, tuple[float, float]] = field(default_factory=dict)
    cited_source: str = ""
    #: Other published figures on this set, as ``{source: (|tau|, |rho|)}`` lines under the table.
    published: dict[str, tuple[float, float]] = field(default_factory=dict)

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
        """The space of entry ``i``."""
        return self.spaces[i] if self.spaces else self.space  # type: ignore[return-value]

    def build(self, i: int, *, seed: int, device: str | torch.device = "cpu"):
        """Entry ``i`` as a seeded, untrained model."""
        return self.space_of(i).build(self.archs[i], seed=seed, device=device)


@dataclass(frozen=True)
class BenchmarkFormat:
    """A benchmark file format: ``detect(raw)`` says whether parsed JSON is one, ``load(raw, path,
    metric=, space=, count=)`` reads it."""

    name: str
    detect: Callable[[Any], bool]
    load: Callable[..., Benchmark]


#: Registered formats by name; the latest registered is tried first (see :func:`register_benchmark_format`).
BENCHMARK_FORMATS: Registry[BenchmarkFormat] = Registry("benchmark format")


def register_benchmark_format(name: str, detect: Callable[[Any], bool], load: Callable[..., Benchmark]) -> None:
    """Teach :func:`load_benchmark` a new file format (tried before the ones registered earlier, the
    built-in ones among them); ``BENCHMARK_FORMATS.unregister(name)`` forgets it."""
    BENCHMARK_FORMATS.register(name, BenchmarkFormat(name, detect, load))


def _formats_in_trial_order() -> list[BenchmarkFormat]:
    return BENCHMARK_FORMATS.values()[::-1]


def load_benchmark(
    path: str | Path,
    *,
    metric: str | None = None,
    space: SearchSpace | None = None,
    count: str | None = None,
) -> Benchmark:
    """Read a trained benchmark, by bundled name or path, with the loader of its format.

    Formats: NAS-Bench-BERT's ``BERT_benchmark.json`` (a list of entries, scored by ``glue`` by
    default); LiteTransformerSearch's ``models.json`` (``{"models": [{"id", "config", "valid_ppl",
    "params"}]}``, scored by ``valid_ppl``, lower is better); optuna-wpca's own format
    (``{"entries": [{"id", "space", "params", "scores"}], "default_metric": ...}``, as
    ``benchmarks/own_bench.py`` writes it); any registered with :func:`register_benchmark_format`.
    ``count`` sets the parameter-count convention of the public benchmarks' spaces (default: the
    space's own, ``"all"`` for NAS-Bench-BERT and ``"non_embedding"`` for the decoders).

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
        raise InputError(f"benchmark file {str(path)!r} is not valid JSON: {err}") from None
    for fmt in _formats_in_trial_order():
        if fmt.detect(raw):
            return fmt.load(raw, path, metric=metric, space=space, count=count)
    raise InputError(f"benchmark file {str(path)!r} is in no known format "
                     f"({', '.join(f.name for f in _formats_in_trial_order())}): "
                     "expected a list of entries, or an object with 'models' or 'entries'")


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

#: Published figures on the bundled LTS set (|Kendall tau|, |Spearman rho| against perplexity).
LTS_REFERENCES = {
    "LPZero (arXiv 2410.04808, published score file)": (0.886, 0.980),
}


def _load_nas_bench_bert(raw: list, path: Path, *, metric: str | None, space: SearchSpace | None,
                         count: str | None) -> Benchmark:
    if space is None or not isinstance(space, FlexiBERTSpace):
        space = FlexiBERTSpace(**({"count": count} if count else {}))
    metric = metric or "glue"
    if not raw:
        raise InputError(f"benchmark file {str(path)!r} holds no entries")
    archs, scores, ids = [], [], []
    for entry in raw:
        own = entry.get("scores") if isinstance(entry, dict) else None
        name = entry.get("id", "?") if isinstance(entry, dict) else entry
        if not isinstance(own, dict) or metric not in own:
            raise InputError(f"benchmark entry {name!r} has no scores[{metric!r}]")
        value = own[metric]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(f"benchmark entry {name!r} has scores[{metric!r}] = {value!r}, not a finite number")
        archs.append(space.from_benchmark_entry(entry))
        scores.append(float(value))
        ids.append(entry.get("id", len(ids)))
    return Benchmark(archs, scores, ids, space, str(path), metric, cited=dict(PAPER_TABLE1), cited_source=PAPER_SOURCE)


def _load_lts_benchmark(raw: dict[str, Any], path: Path, *, metric: str | None, space: SearchSpace | None,
                        count: str | None) -> Benchmark:
    if not isinstance(space, DecoderSpace):
        space = DecoderSpace.lts_gpt2(**({"count": count} if count else {}))
    metric = metric or "valid_ppl"
    if metric not in LTS_METRICS:
        raise InputError(f"a LiteTransformerSearch benchmark is scored by {' or '.join(LTS_METRICS)}, not {metric!r}")
    models = raw["models"]
    if not isinstance(models, list) or len(models) < 2:
        raise InputError(f"benchmark file {str(path)!r}: 'models' must be a list of at least 2 trained models")
    archs, scores, ids = [], [], []
    for i, entry in enumerate(models):
        name = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
            raise InputError(f"benchmark entry {name!r} has no 'config' object")
        score = entry.get(metric)
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) or score <= 0:
            raise InputError(f"benchmark entry {name!r} has no positive finite {metric!r} (got {score!r})")
        try:
            archs.append(space.from_lts_config(entry["config"]))
        except ValueError as err:
            raise InputError(f"benchmark entry {name!r} does not build: {err}") from None
        scores.append(float(score))
        ids.append(name)
    bundled = path.resolve() == benchmark_path("lts-gpt2-wt103").resolve()
    return Benchmark(archs, scores, ids, space, str(path), metric, lower_is_better=True,
                     published=dict(LTS_REFERENCES) if bundled else {})


def _load_own_benchmark(raw: dict[str, Any], path: Path, *, metric: str | None, space: SearchSpace | None = None,
                        count: str | None = None) -> Benchmark:
    metric = metric or raw.get("default_metric")
    if not isinstance(raw["entries"], list):
        raise InputError(f"benchmark file {str(path)!r}: 'entries' must be a list")
    entries = [e for e in raw["entries"] if isinstance(e, dict) and isinstance(e.get("scores"), dict)
               and metric in e["scores"]]
    if not metric or len(entries) < 2:
        raise InputError(f"benchmark file {str(path)!r} has fewer than 2 entries with scores[{metric!r}]")
    cache: dict[str, SearchSpace] = {}
    archs, scores, ids, spaces, runs, buckets = [], [], [], [], [], []
    for i, entry in enumerate(entries):
        name = entry.get("id", f"#{i}")
        missing = [k for k in ("space", "params") if not isinstance(entry.get(k), dict)]
        if missing:
            absent = " and no ".join(repr(k) for k in missing)
            raise InputError(f"benchmark file {str(path)!r}: entry {name!r} has no {absent} object (an optuna-wpca "
                             "benchmark entry holds space, params and scores)")
        key = json.dumps(entry["space"], sort_keys=True)
        if key not in cache:  # one space object per distinct description, built once
            cache[key] = space_from_dict(entry["space"])
        space = cache[key]
        try:
            archs.append(space.from_params(entry["params"]))
        except (KeyError, ValueError) as err:
            raise InputError(f"benchmark file {str(path)!r}: entry {name!r}'s params are not an architecture of its "
                             f"space ({err})") from None
        scores.append(float(entry["scores"][metric]))
        ids.append(entry.get("id", len(ids)))
        spaces.append(space)
        runs.append({str(k): float(v) for k, v in entry.get("runs", {}).get(metric, {}).items()})
        buckets.append(entry.get("bucket"))
    only = spaces[0] if len(cache) == 1 else None
    return Benchmark(archs, scores, ids, only, str(path), metric, spaces=[] if only else spaces,
                     seed_runs=runs if any(runs) else [],
                     buckets=buckets if all(b is not None for b in buckets) else [])


# The built-in formats; a later registration is tried first, so the most specific test comes last.
register_benchmark_format("NAS-Bench-BERT", lambda raw: isinstance(raw, list), _load_nas_bench_bert)
register_benchmark_format("LiteTransformerSearch", lambda raw: isinstance(raw, dict) and "models" in raw,
                          _load_lts_benchmark)
register_benchmark_format("optuna-wpca", lambda raw: isinstance(raw, dict) and "entries" in raw, _load_own_benchmark)
