"""The rank table as text, with the published figures printed beside ours."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optuna_wpca.ranking._benchmark import Benchmark

if TYPE_CHECKING:
    from optuna_wpca.ranking._rank import ProxyRanking


def format_table(results: dict[str, ProxyRanking], benchmark: Benchmark | None = None) -> str:
    """The rank table, with the published correlations the benchmark carries beside ours."""
    cited = benchmark.cited if benchmark is not None else {}
    paper = bool(cited)
    depth = any(r.by_depth and r.by_depth["mean"] for r in results.values())
    header = f"{'proxy':<22}{'grad':>5}{'s/1000':>10}{'tau':>8}{'rho':>8}"
    size = any(r.by_bucket and r.by_bucket["mean"] for r in results.values())
    header += f"{'depth tau':>11}{'depth rho':>11}" if depth else ""
    header += f"{'size tau':>10}{'size rho':>10}" if size else ""
    header += f"{'paper tau':>11}{'paper rho':>11}" if paper else ""
    lines = [header, "-" * len(header)]
    for r in results.values():
        tau, rho = cited.get(r.name, (float("nan"), float("nan")))
        column = f"{tau:>11.3f}{rho:>11.3f}" if r.name in cited else f"{'-':>11}{'-':>11}"
        within = ""
        if depth:
            mean = (r.by_depth or {}).get("mean") or {"kendall_tau": float("nan"), "spearman_rho": float("nan")}
            within = f"{mean['kendall_tau']:>11.3f}{mean['spearman_rho']:>11.3f}"
        if size:
            mean = (r.by_bucket or {}).get("mean") or {"kendall_tau": float("nan"), "spearman_rho": float("nan")}
            within += f"{mean['kendall_tau']:>10.3f}{mean['spearman_rho']:>10.3f}"
        lines.append(
            f"{r.name:<22}{'yes' if r.needs_grad else 'no':>5}{r.seconds_per_1000:>10.1f}"
            f"{r.kendall_tau:>8.3f}{r.spearman_rho:>8.3f}{within}{column if paper else ''}"
            + (f"  (computed with {r.shared_with})" if r.shared_with else "")
        )
    if benchmark is not None:
        lines.append(benchmark.reading)
    if depth:
        lines.append("depth tau/rho: correlation among architectures of the same depth, averaged over depths "
                     "(weighted by count)")
    if size:
        lines.append("size tau/rho: the same within each parameter-size bucket of the file")
    if paper:
        lines.append(f"paper columns: {benchmark.cited_source}")
    for source, (tau, rho) in (benchmark.published if benchmark is not None else {}).items():
        lines.append(f"published on this set: {source}: |tau| {tau:.3f}, |rho| {rho:.3f}")
    return "\n".join(lines)


def format_seed_noise(noise: dict[str, Any], metric: str) -> str:
    """One line saying how well one training seed ranks like another (see ``seed_noise``)."""
    line = (f"seed noise ({metric}, seed {noise['seeds'][0]} against seed {noise['seeds'][1]}, {noise['n']} "
            f"architectures): tau {noise['kendall_tau']:.3f}, rho {noise['spearman_rho']:.3f}")
    mean = noise.get("within_depth", {}).get("mean")
    if mean:
        line += f"; within depth tau {mean['kendall_tau']:.3f}, rho {mean['spearman_rho']:.3f}"
    mean = noise.get("within_bucket", {}).get("mean")
    if mean:
        line += f"; within size bucket tau {mean['kendall_tau']:.3f}, rho {mean['spearman_rho']:.3f}"
    return line + " (proxies are correlated with the mean over seeds; differences below this noise say little)"


def format_budget_table(results: dict[str, ProxyRanking], benchmark: Benchmark | None = None) -> str:
    """The pick under a budget: for budgets at fixed percentiles of the parameter count, the
    percentile of each objective's best feasible architecture among the feasible ones (1.0: the best
    that fits), mean and worst over budgets, the mean regret in the benchmark's unit, the best of the
    objective's top k, a bootstrap interval of the mean, and of the difference to the parameter count."""
    first = next((r.budget for r in results.values() if r.budget), None)
    if first is None:
        return ""
    depth = any(r.budget and r.budget.get("within_depth", {}).get("mean") for r in results.values())
    unit = benchmark.metric if benchmark is not None else "score"
    header = (f"{'objective':<30}{'mean':>7}{'worst':>7}{'regret':>9}{'top' + str(first['top']):>7}"
              f"{'mean 95% CI':>15}{'vs params':>10}{'95% CI':>17}")
    header += f"{'depth mean':>12}{'depth worst':>12}" if depth else ""
    lines = ["pick under a budget (percentile of the pick among the architectures that fit; 1.0 = the best)",
             header, "-" * len(header)]
    for r in results.values():
        b = r.budget or {}
        boot = b.get("bootstrap", {})
        ci = boot.get("mean_interval")
        d_ci = boot.get("difference_interval")
        row = (f"{r.name:<30}{b['mean']:>7.3f}{b['worst']:>7.3f}{b['mean_regret']:>9.3f}"
               f"{b['mean_best_of_top']:>7.3f}")
        row += f"{f'{ci[0]:.3f}..{ci[1]:.3f}':>15}" if ci else f"{'-':>15}"
        row += (f"{boot['difference']:>+10.3f}{f'{d_ci[0]:+.3f}..{d_ci[1]:+.3f}':>17}"
                if d_ci and r.name != boot.get("baseline") else f"{'-':>10}{'-':>17}")
        if depth:
            m = b.get("within_depth", {}).get("mean") or {}
            row += f"{m.get('mean', float('nan')):>12.3f}{m.get('worst', float('nan')):>12.3f}"
        lines.append(row)
    budgets = ", ".join(f"{row['percentile']:g}" for row in first["budgets"])
    lines.append(f"budgets at the {budgets}th percentiles of the parameter count; ties in an objective averaged; "
                 f"regret in {unit} (mean over budgets)")
    boot = first.get("bootstrap")
    if boot:
        lines.append(f"intervals: {boot['resamples']} bootstrap resamples of the architectures (seed {boot['seed']}), "
                     "budgets recomputed on each; 'vs params': difference of the mean pick to the parameter count's")
    if depth:
        lines.append("depth mean/worst: the same within each depth (budgets at that depth's percentiles), "
                     "weighted by count")
    return "\n".join(lines)
