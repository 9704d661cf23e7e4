"""Proxies against trained benchmarks: loading them, scoring every entry, correlations, the table.

Example:
    >>> from optuna_wpca.ranking import load_benchmark, rank_proxies
    >>> bench = load_benchmark("nas-bench-bert")
    >>> results = rank_proxies(bench, ["params"], limit=5)  # doctest: +SKIP
"""

from optuna_wpca.ranking._benchmark import (
    BUNDLED_BENCHMARKS,
    Benchmark,
    BENCHMARK_FORMATS,
    LTS_REFERENCES,
    PAPER_TABLE1,
    BenchmarkFormat,
    benchmark_path,
    load_benchmark,
    register_benchmark_format,
)
from optuna_wpca.ranking._correlation import correlations, seed_noise, within_bucket, within_depth, within_groups
from optuna_wpca.ranking._rank import TRIVIAL_BASELINES, ProxyRanking, rank_proxies
from optuna_wpca.ranking._budget_pick import DEFAULT_PERCENTILES, bootstrap_picks, budget_pick, budget_pick_within, budgets_at
from optuna_wpca.ranking._report import format_budget_table, format_seed_noise, format_table

__all__ = [
    "BUNDLED_BENCHMARKS",
    "BENCHMARK_FORMATS",
    "BenchmarkFormat",
    "DEFAULT_PERCENTILES",
    "LTS_REFERENCES",
    "PAPER_TABLE1",
    "TRIVIAL_BASELINES",
    "Benchmark",
    "ProxyRanking",
    "benchmark_path",
    "bootstrap_picks",
    "budget_pick",
    "budget_pick_within",
    "budgets_at",
    "correlations",
    "format_budget_table",
    "format_seed_noise",
    "format_table",
    "register_benchmark_format",
    "load_benchmark",
    "rank_proxies",
    "seed_noise",
    "within_bucket",
    "within_depth",
    "within_groups",
]
