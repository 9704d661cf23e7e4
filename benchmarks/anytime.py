"""Anytime curves: the best objective value a search has found after n evaluations, per sampler and seed.

    python benchmarks/anytime.py run --preset lts-gpt2 --samplers paper ordinal tpe random --seeds 0 1 2 \
        --n 500 --batch 8x64
    python benchmarks/anytime.py run --preset lts-gpt2 --samplers paper --seeds 0 1 2 3 4 --n 500 --batch 16x128 \
        --journal benchmarks/results/anytime_16x128.journal      # the search's own minibatch
    python benchmarks/anytime.py run --preset wpca-small --samplers tpe paper random nsga2 cmaes --seeds 0 1 2 \
        --n 300 --batch 16x128 --journal benchmarks/results/anytime_wpca_small.journal
    python benchmarks/anytime.py summary [--plot docs/anytime.png]
    python benchmarks/anytime.py rescore     # each run's pick scored again at the search's 16 x 128
    python benchmarks/anytime.py export      # every trial's value and genes, gzipped CSV (committed)
    python benchmarks/anytime.py picks       # the 2,000-evaluation searches' picks on the curves' scale
    python benchmarks/anytime.py seeds       # the best architectures and the runs' picks under other init seeds

Each (preset, objective, batch, sampler, seed) is one Optuna study in a journal file
(``benchmarks/results/anytime.journal``), so a killed run resumes where it stopped and adds to the
studies it finds (``--n`` is the total each study should reach). Every study of a preset shares one
reference sample (the objective's own draw, recorded in each study before its first trial), so a value
means the same in all of them. Samplers: ``paper``, ``ordinal`` and ``boundary`` are :class:`~optuna_wpca.WPCASampler`
with those operators (the search's GA settings otherwise); ``tpe`` is Optuna's
``TPESampler(multivariate=True)``; ``nsga2`` is ``NSGAIISampler``; ``cmaes`` is ``CmaEsSampler`` (on the
integer genes; the categorical ones drawn at random); ``random`` is ``RandomSampler``.
Optuna's samplers see the budget through the trials' constraints; a candidate over the budget is
pruned before any model is built and is not counted as an evaluation. The evaluations are counted in
completed trials, a repeated architecture included (it costs a cache look-up, as in a search). ``export``
writes every trial's study, number, value, parameter count and genes to a gzipped CSV (committed), keeping the
rows of studies no journal holds any more. The first journals (tens of MB each) were not committed and are
gone: ``summary`` reads their runs from those CSVs, and a journal's study of the same name replaces its CSV
rows. Later journals are committed gzipped (``gzip -k``: ``<journal>.gz``) and unpacked when missing, so that
a run resumes on another machine.

``summary`` writes ``benchmarks/results/anytime.json``: per study the best value after n = 25, 50, 100,
..., and per sampler the median and range over seeds, against the best value any run found.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import optuna

import optuna_wpca
from optuna_wpca import _attributes as attr
from optuna_wpca.proxies import default_objective

RESULTS = Path(__file__).parent / "results"
JOURNAL = RESULTS / "anytime.journal"
JOURNAL_16X128 = RESULTS / "anytime_16x128.journal"  # the runs at the search's own minibatch
# W-PCA-Small's runs with Optuna's samplers (apart, so that they do not replay lts-gpt2's ~90 MB journal)
JOURNAL_WPCA_SMALL = RESULTS / "anytime_wpca_small.journal"
# Seeds added after those journals were gone (this machine keeps no journal between sessions): the earlier
# runs are read from their exported CSVs.
JOURNAL_16X128_MORE = RESULTS / "anytime_16x128_more.journal"
JOURNAL_WPCA_SMALL_MORE = RESULTS / "anytime_wpca_small_more.journal"
JOURNALS = [str(JOURNAL), str(JOURNAL_16X128), str(JOURNAL_WPCA_SMALL), str(JOURNAL_16X128_MORE),
            str(JOURNAL_WPCA_SMALL_MORE)]
CSVS = [str(RESULTS / "anytime_trials.csv.gz"), str(RESULTS / "anytime_wpca_small_trials.csv.gz")]
CHECKPOINTS = (25, 50, 100, 150, 200, 300, 400, 500, 750, 1000, 1500, 2000)


def _storage(path: Path):
    """The journal at ``path``; where only its committed, gzipped copy (``path.gz``) is here, that copy
    unpacked first, so that a run resumes on a new machine."""
    from optuna.storages.journal import JournalFileBackend

    packed = Path(str(path) + ".gz")
    if not path.exists() and packed.exists():
        import gzip
        import shutil

        with gzip.open(packed, "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)

    return optuna.storages.JournalStorage(JournalFileBackend(str(path)))


def _sampler(name: str, space, budget, seed: int, population: int):
    if name in ("paper", "ordinal", "boundary"):
        return optuna_wpca.WPCASampler(space, budget=budget, population_size=population, seed=seed, operators=name)
    # Optuna's samplers read the budget from the constraints the objective sets (trial.set_constraint).
    if name == "tpe":
        return optuna.samplers.TPESampler(multivariate=True, seed=seed)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(population_size=population, seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":  # the integer genes; the categorical ones (width, heads) drawn at random
        try:
            import cmaes  # noqa: F401  (Optuna's CmaEsSampler imports it at its first relative sample)
        except ImportError:
            raise SystemExit("the cmaes sampler needs the cmaes package: pip install cmaes") from None
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    raise SystemExit(f"unknown sampler {name!r}")


def _recorded_reference(storage, prefix: str):
    """The reference sample a study of these settings already holds (a resumed run does not score it again)."""
    from optuna_wpca._objective import ReferenceSample

    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        if s.study_name.startswith(prefix) and s.user_attrs.get(attr.REFERENCE) is not None:
            return ReferenceSample.from_dict(s.user_attrs[attr.REFERENCE])
    return None


def run(args: argparse.Namespace) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space, budget = optuna_wpca.preset(args.preset)
    proxy = args.objective or default_objective(space)
    b, n = (int(x) for x in args.batch.split("x"))
    batch = optuna_wpca.text_batch(batch_size=b, seq_len=n)
    objective = optuna_wpca.ZeroCostObjective(space, proxy, batch=batch, budget=budget,
                                              reference_size=args.reference_size)
    storage = _storage(Path(args.journal))
    reference = None
    if objective.needs_reference:
        reference = _recorded_reference(storage, f"{args.preset}:{proxy}:{args.batch}:")
        if reference is None:
            reference = objective.reference()
    for seed in args.seeds:
        for sampler_name in args.samplers:
            name = f"{args.preset}:{proxy}:{args.batch}:{sampler_name}:{seed}"
            sampler = _sampler(sampler_name, space, budget, seed, args.population_size)
            study = optuna.create_study(study_name=name, storage=storage, sampler=sampler, direction="maximize",
                                        load_if_exists=True)
            if reference is not None and attr.REFERENCE not in study.user_attrs:
                study.set_user_attr(attr.REFERENCE, reference.to_dict())
            done = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
            while done < args.n:
                study.optimize(objective, n_trials=args.n - done)
                done = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
            print(f"{name}: {done} evaluations, best {study.best_value:.6g}", flush=True)


def _rule(group: dict) -> dict | None:
    """The committed decision rule (docs/benchmarks.md): over the seeds where both ``paper`` and ``boundary``
    reached 500, the medians at 100, 200, 300 and 500, and whether ``boundary`` wins."""
    samplers = group["samplers"]
    if "paper" not in samplers or "boundary" not in samplers:
        return None
    paper, boundary = samplers["paper"]["per_seed"], samplers["boundary"]["per_seed"]
    seeds = sorted(s for s in paper if s in boundary and "500" in paper[s] and "500" in boundary[s])
    if len(seeds) < 3:
        return {"seeds": seeds, "decided": False}
    medians = {name: {n: statistics.median(runs[s][n] for s in seeds) for n in ("100", "200", "300", "500")}
               for name, runs in (("paper", paper), ("boundary", boundary))}
    wins = (medians["boundary"]["500"] - medians["paper"]["500"] >= 0.01
            and all(medians["boundary"][n] >= medians["paper"][n] for n in ("100", "200", "300")))
    return {"seeds": seeds, "decided": True, "medians": medians, "boundary_becomes_default": wins}


def _all_studies(journals: list[str]):
    """(storage, study summary) of every study in ``journals``."""
    for path in journals:
        if not Path(path).exists() and not Path(path + ".gz").exists():  # a run not started on this machine
            continue
        storage = _storage(Path(path))
        for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
            yield storage, s


def _csv_trials(paths: list[str], skip: set[str]) -> dict[str, list[dict]]:
    """Every exported trial of the studies in ``paths`` (gzipped CSVs from ``export``) but those named in
    ``skip``: runs whose journals are gone (they are not committed) still count, and a journal that holds a
    study of the same name (a run resumed or redone) takes its place."""
    import csv
    import gzip

    studies: dict[str, list[dict]] = {}
    for path in paths:
        if not Path(path).exists():
            continue
        with gzip.open(path, "rt", newline="") as f:
            for row in csv.DictReader(f):
                if row["study"] not in skip:
                    studies.setdefault(row["study"], []).append(row)
    for rows in studies.values():
        rows.sort(key=lambda r: int(r["number"]))
    return studies


def _best_after(values: list[float], n: int) -> float | None:
    return max(values[:n]) if len(values) >= n else None


def _study_values(journals: list[str], csvs: list[str]):
    """(study name, completed values in trial order) of every study in the journals, then of those only
    in the exported CSVs."""
    seen = set()
    for storage, s in _all_studies(journals):
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        seen.add(s.study_name)
        yield s.study_name, [t.value for t in sorted(study.get_trials(deepcopy=False,
                                                                      states=(optuna.trial.TrialState.COMPLETE,)),
                                                     key=lambda t: t.number)]
    for name, rows in _csv_trials(csvs, seen).items():
        yield name, [float(r["value"]) for r in rows]


def summary(args: argparse.Namespace) -> None:
    curves: dict[str, dict] = {}
    for name, values in _study_values(args.journal, args.csv):
        preset, proxy, batch, sampler, seed = name.split(":")
        group = curves.setdefault(f"{preset}:{proxy}:{batch}", {"samplers": {}})
        group["samplers"].setdefault(sampler, {})[seed] = {
            str(n): _best_after(values, n) for n in CHECKPOINTS if len(values) >= n}
        group["best_ever"] = max([group.get("best_ever", float("-inf")), *values])
    for group in curves.values():
        for sampler, seeds in list(group["samplers"].items()):
            table = {}
            for n in CHECKPOINTS:
                at = [c[str(n)] for c in seeds.values() if str(n) in c]
                if at:  # over the seeds that reached n
                    table[str(n)] = {"median": statistics.median(at), "min": min(at), "max": max(at), "seeds": len(at),
                                     "median_share_of_best": statistics.median(at) / group["best_ever"]}
            group["samplers"][sampler] = {"per_seed": seeds, "over_seeds": table}
    for group in curves.values():
        group["rule"] = _rule(group)
    out = {"command": "python benchmarks/anytime.py summary --journal " + " ".join(args.journal)
               + " --csv " + " ".join(args.csv), "curves": curves}
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    for key, group in curves.items():
        print(f"{key} (best any run found: {group['best_ever']:.6g})")
        for sampler, data in group["samplers"].items():
            row = "  ".join(f"{n}: {v['median_share_of_best']:.4f}" for n, v in data["over_seeds"].items())
            print(f"  {sampler:<8} {len(data['per_seed'])} seeds  {row}")
    if args.plot:
        _plot(curves, args.plot)


def _plot(curves: dict, path: str) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(6 * len(curves), 4), squeeze=False)
    colours = {name: f"C{i}" for i, name in enumerate(("paper", "boundary", "ordinal", "tpe", "nsga2", "random", "cmaes"))}
    for ax, (key, group) in zip(axes[0], curves.items()):
        reached = 0
        for sampler, data in group["samplers"].items():
            ns = [int(n) for n in data["over_seeds"]]
            reached = max([reached, *ns])
            med = [data["over_seeds"][str(n)]["median_share_of_best"] for n in ns]
            lo = [data["over_seeds"][str(n)]["min"] / group["best_ever"] for n in ns]
            hi = [data["over_seeds"][str(n)]["max"] / group["best_ever"] for n in ns]
            ax.plot(ns, med, marker="o", label=sampler, color=colours.get(sampler))
            ax.fill_between(ns, lo, hi, alpha=0.15, color=colours.get(sampler))
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xticks([n for n in CHECKPOINTS if n <= reached])
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_xlabel("evaluations")
        ax.set_ylabel("best value / best any run found")
        ax.set_title(key)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def rescore(args: argparse.Namespace) -> None:
    """Each study's best architecture scored again at the search's own minibatch (16 x 128, its own
    reference sample): whether the cheaper minibatch of the curves ranks the runs' picks the same."""
    from scipy.stats import kendalltau

    storage = _storage(Path(args.journal))
    cache: dict[str, tuple] = {}
    rows = []
    for s in optuna.get_all_study_summaries(storage):
        preset, proxy, batch, sampler, seed = s.study_name.split(":")
        if preset not in cache:
            space, budget = optuna_wpca.preset(preset)
            objective = optuna_wpca.ZeroCostObjective(space, proxy, batch=optuna_wpca.text_batch(batch_size=16, seq_len=128),
                                                      budget=budget, reference_size=args.reference_size)
            cache[preset] = (space, objective, objective.reference() if objective.needs_reference else None)
        space, objective, reference = cache[preset]
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        best = study.best_trial
        values, _ = objective.score(space.from_params(best.params), reference)
        rows.append({"study": s.study_name, "trials": len(study.trials), "best_at_curve_batch": best.value,
                     "best_at_16x128": values[0]})
        print(f"{s.study_name}: {best.value:.6g} -> {values[0]:.6g}", flush=True)
    out = {"command": "python benchmarks/anytime.py rescore", "rows": rows}
    for preset in cache:
        mine = [r for r in rows if r["study"].startswith(preset + ":")]
        if len(mine) > 2:
            tau = kendalltau([r["best_at_curve_batch"] for r in mine], [r["best_at_16x128"] for r in mine]).statistic
            out[f"{preset}:kendall_tau"] = float(tau)
            print(f"{preset}: Kendall tau of the runs' picks, curve minibatch vs 16 x 128: {tau:.3f}")
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


def _decoder_params(architecture: str) -> dict:
    """The genes of a decoder from its recorded layer line ("width 256 heads 2 ffn 1143 | ...")."""
    import re

    layers = re.findall(r"width (\d+) heads (\d+) ffn (\d+)", architecture)
    params = {"num_layers": len(layers), "hidden_size": int(layers[0][0])}  # from_params reads the used layers only
    for i, (_, heads, ffn) in enumerate(layers):
        params[f"layer_{i:02d}_heads"], params[f"layer_{i:02d}_ffn_size"] = int(heads), int(ffn)
    return params


def picks(args: argparse.Namespace) -> None:
    """The 2,000-evaluation searches' picks on lts-gpt2 (``default_search.json``) scored with the curves'
    objective and their recorded reference sample: the picks and the curves' values on one scale."""
    space, budget = optuna_wpca.preset("lts-gpt2")
    reference = _recorded_reference(_storage(Path(args.journal)), "lts-gpt2:wpca_saliency:16x128:")
    if reference is None:
        raise SystemExit(f"{args.journal} holds no lts-gpt2 16x128 study with a recorded reference sample")
    objective = optuna_wpca.ZeroCostObjective(space, "wpca_saliency", budget=budget, reference_size=reference.size,
                                              batch=optuna_wpca.text_batch(batch_size=16, seq_len=128))
    searches = json.loads((RESULTS / "default_search.json").read_text())
    rows = []
    for key, search in searches.items():
        if not key.startswith("lts-gpt2-") or "best" not in search:
            continue
        best = search["best"]
        arch = space.from_params(_decoder_params(best["architecture"]))
        if space.num_params(arch) != best["num_params"]:
            raise SystemExit(f"{key}: the recorded layers do not give the recorded parameter count")
        values, _ = objective.score(arch, reference)
        rows.append({"search": key, "trial": best["trial"], "own_objective_value": best["value"],
                     "wpca_saliency_at_16x128": values[0]})
        print(f"{key}: pick (trial {best['trial']}) {values[0]:.6g} under wpca_saliency", flush=True)
    out = {"command": "python benchmarks/anytime.py picks", "rows": rows}
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


def _pick_at(rows: list[dict], n: int) -> dict:
    """The row of the best value among a run's first ``n`` completed trials."""
    return max(rows[:n], key=lambda r: float(r["value"]))


def seeds(args: argparse.Namespace) -> None:
    """How much of a decoder's ``wpca_saliency`` value is its initialisation: the best distinct architectures
    of the lts-gpt2 16 x 128 runs, each run's pick after ``--at`` evaluations and the 2,000-evaluation
    searches' picks, each scored with the model initialised from seeds 0 (the search's) to ``--seeds - 1``,
    on the same minibatch and recorded reference sample. Seed 0 repeats the recorded value (a check)."""
    import numpy as np
    from scipy.stats import spearmanr

    space, budget = optuna_wpca.preset("lts-gpt2")
    reference = _recorded_reference(_storage(Path(args.journal)), "lts-gpt2:wpca_saliency:16x128:")
    if reference is None:
        raise SystemExit(f"{args.journal} holds no lts-gpt2 16x128 study with a recorded reference sample")
    batch = optuna_wpca.text_batch(batch_size=16, seq_len=128)
    objectives = [optuna_wpca.ZeroCostObjective(space, "wpca_saliency", budget=budget, reference_size=reference.size,
                                                batch=batch, seed=s) for s in range(args.seeds)]
    runs = {k: v for k, v in _csv_trials([str(RESULTS / "anytime_trials.csv.gz")], set()).items()
            if k.startswith("lts-gpt2:wpca_saliency:16x128:")}
    chosen: dict[object, dict] = {}  # architecture -> what it is and why it is here

    def add(arch, value: float, why: str) -> None:
        entry = chosen.setdefault(arch, {"recorded": value, "why": []})
        entry["why"].append(why)

    for name, rows in runs.items():
        if len(rows) >= args.at:
            row = _pick_at(rows, args.at)
            add(space.from_params(json.loads(row["params"])), float(row["value"]), f"{name.split(':', 3)[3]}@{args.at}")
    distinct: dict[object, float] = {}
    for rows in runs.values():
        for r in rows:
            arch = space.from_params(json.loads(r["params"]))
            distinct[arch] = max(distinct.get(arch, float("-inf")), float(r["value"]))
    for rank, (arch, value) in enumerate(sorted(distinct.items(), key=lambda kv: -kv[1])[: args.top]):
        add(arch, value, f"top {rank + 1}")
    picked = {r["search"]: r["wpca_saliency_at_16x128"]
              for r in json.loads((RESULTS / "anytime_picks.json").read_text())["rows"]}
    for key, search in json.loads((RESULTS / "default_search.json").read_text()).items():
        if key in picked:
            add(space.from_params(_decoder_params(search["best"]["architecture"])), picked[key], f"2,000: {key}")
    rows_out = []
    for arch, entry in chosen.items():
        values = [objective.score(arch, reference)[0][0] for objective in objectives]
        rows_out.append({"architecture": " | ".join(space.describe(arch)), "num_params": space.num_params(arch),
                         "why": entry["why"], "recorded": entry["recorded"], "by_seed": values,
                         "mean_other_seeds": float(np.mean(values[1:]))})
        print(f"{entry['recorded']:.4f} -> {' '.join(f'{v:.4f}' for v in values)}  {', '.join(entry['why'])}",
              flush=True)
    by_seed = np.array([r["by_seed"] for r in rows_out])
    others = by_seed[:, 1:]
    best = int(np.argmax(by_seed[:, 0]))
    out = {
        "command": f"python benchmarks/anytime.py seeds --top {args.top} --at {args.at} --seeds {args.seeds}",
        "architectures": len(rows_out),
        "seed0_equals_recorded_within": float(np.max(np.abs(by_seed[:, 0] - [r["recorded"] for r in rows_out]))),
        # the spread a seed alone makes, pooled over the architectures, against the spread of the architectures
        "within_architecture_sd": float(np.sqrt(np.mean(np.var(others, axis=1, ddof=1)))),
        "between_architectures_sd_of_seed0": float(np.std(by_seed[:, 0], ddof=1)),
        "between_architectures_sd_of_mean_other_seeds": float(np.std(others.mean(axis=1), ddof=1)),
        "spearman_seed0_vs_mean_other_seeds": float(spearmanr(by_seed[:, 0], others.mean(axis=1)).statistic),
        "highest_seed0": {"architecture": rows_out[best]["architecture"], "by_seed": rows_out[best]["by_seed"],
                          "rank_by_mean_other_seeds": int(1 + np.sum(others.mean(axis=1) > others[best].mean()))},
        "rows": sorted(rows_out, key=lambda r: -r["mean_other_seeds"]),
    }
    for key in ("within_architecture_sd", "between_architectures_sd_of_seed0",
                "between_architectures_sd_of_mean_other_seeds", "spearman_seed0_vs_mean_other_seeds"):
        print(f"{key}: {out[key]:.4f}")
    print(f"highest under seed 0 ranks {out['highest_seed0']['rank_by_mean_other_seeds']} of {len(rows_out)} "
          f"by its mean over seeds 1-{args.seeds - 1}")
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


def export(args: argparse.Namespace) -> None:
    import csv
    import gzip

    rows = 0
    studies = list(_all_studies(args.journal))  # each journal replayed once
    in_journals = {s.study_name for _, s in studies}
    kept = _csv_trials([args.csv], in_journals)  # studies exported before whose journals are gone
    with gzip.open(args.csv, "wt", newline="") as f:
        out = csv.writer(f)
        out.writerow(["study", "number", "value", "num_params", "params"])
        for name, old in kept.items():
            for r in old:
                out.writerow([r["study"], r["number"], r["value"], r["num_params"], r["params"]])
                rows += 1
        spaces: dict[str, object] = {}
        for storage, s in studies:
            preset = s.study_name.split(":")[0]
            space = spaces.setdefault(preset, optuna_wpca.preset(preset)[0])
            study = optuna.load_study(study_name=s.study_name, storage=storage)
            for t in sorted(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)),
                            key=lambda t: t.number):
                out.writerow([s.study_name, t.number, repr(t.value), space.num_params(space.from_params(t.params)),
                              json.dumps(t.params, sort_keys=True)])
                rows += 1
    print(f"wrote {rows} trials to {args.csv} ({len(kept)} studies kept from it, {len(in_journals)} from journals)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--preset", default="lts-gpt2")
    r.add_argument("--objective", default=None, help="default: the preset family's default objective")
    r.add_argument("--samplers", nargs="+", default=["paper", "ordinal", "tpe", "random"])
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    r.add_argument("--n", type=int, default=500, help="evaluations each study should reach")
    r.add_argument("--batch", default="8x64", help="minibatch, sequences x tokens (the search's is 16x128)")
    r.add_argument("--population-size", type=int, default=50)
    r.add_argument("--reference-size", type=int, default=64)
    r.add_argument("--journal", default=str(JOURNAL))
    s = sub.add_parser("summary")
    s.add_argument("--journal", nargs="+", default=JOURNALS)
    s.add_argument("--csv", nargs="*", default=CSVS,
                   help="exported trials (export's gzipped CSVs) of studies no journal holds")
    s.add_argument("--json", default=str(RESULTS / "anytime.json"))
    s.add_argument("--plot", default=None)
    c = sub.add_parser("rescore")
    c.add_argument("--journal", default=str(JOURNAL))
    c.add_argument("--reference-size", type=int, default=64)
    c.add_argument("--json", default=str(RESULTS / "anytime_rescored.json"))
    p = sub.add_parser("picks")
    p.add_argument("--journal", default=str(JOURNAL_16X128_MORE))
    p.add_argument("--json", default=str(RESULTS / "anytime_picks.json"))
    d = sub.add_parser("seeds")
    d.add_argument("--journal", default=str(JOURNAL_16X128_MORE))
    d.add_argument("--top", type=int, default=24, help="the best distinct architectures of all runs")
    d.add_argument("--at", type=int, default=500, help="each run's pick after this many evaluations")
    d.add_argument("--seeds", type=int, default=5, help="initialisation seeds 0 .. N-1")
    d.add_argument("--json", default=str(RESULTS / "anytime_seeds.json"))
    e = sub.add_parser("export")
    e.add_argument("--journal", nargs="+", default=JOURNALS)
    e.add_argument("--csv", default=str(RESULTS / "anytime_trials.csv.gz"))
    args = parser.parse_args()
    {"run": run, "summary": summary, "rescore": rescore, "picks": picks, "seeds": seeds,
     "export": export}[args.command](args)


if __name__ == "__main__":
    main()
