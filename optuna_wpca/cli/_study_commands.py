"""``optuna-wpca search``, ``show`` and ``export``: the commands on a zero-cost study."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import threading
from pathlib import Path

from optuna_wpca import _attributes as attr
from optuna_wpca.cli._errors import CLIError
from optuna_wpca.cli._storage import check_storage, open_storage


def _search_from_args(args: argparse.Namespace):
    """The space and the budget given on the command line (a preset's, or a space file's)."""
    from optuna_wpca._budget import Budget
    from optuna_wpca._presets import preset
    from optuna_wpca.spaces import load_space, space_from_dict

    if args.space:
        space, budget = load_space(args.space), Budget()
    else:
        space, budget = preset(args.preset)
    if getattr(args, "categorical_genes", False):
        space = space_from_dict({**space.to_dict(), "integer_genes": False})
    return space, Budget(
        args.max_params if args.max_params is not None else budget.max_params,
        args.min_params if args.min_params is not None else budget.min_params,
    ).check(space)


def run_search(args: argparse.Namespace) -> int:
    """``optuna-wpca search``: the zero-cost GA search into the named study (resumed if it exists).

    ``--n-trials`` is the number of finished (complete or pruned) trials the study should reach, so
    a rerun after a stop finishes the search instead of adding to it. On an RDB storage, trials send
    heartbeats; one whose worker died is failed once its heartbeat is stale and retried (same
    architecture), also when it died before its objective began (see
    :func:`optuna_wpca._storage.fail_stale_trials`). The first Ctrl-C stops at the next safe point:
    before the study is written, between two architectures of the reference sample, or after the
    running trials (whose results, and every finished trial, are kept); a second one aborts.
    """
    with _StopOnInterrupt() as stop:
        try:
            return _search(args, stop)
        except _Stopped as stopped:
            print(f"optuna-wpca search: stopped {stopped}; run the same command again to go on", file=sys.stderr)
            return 130


def _search(args: argparse.Namespace, stop: "_StopOnInterrupt") -> int:
    import optuna
    from optuna.trial import TrialState

    from optuna_wpca.sampler import WPCASampler

    _check_search_args(args)
    space, budget = _search_from_args(args)
    _warn_loose_budget(space, budget)
    proxies, options = _proxy_settings(args, space)  # refusals here write nothing and build nothing
    check_storage(args.storage)  # a bad URL is said before the minibatch is cut, and creates nothing
    sampler_seed = args.sampler_seed if args.sampler_seed is not None else secrets.randbelow(2**31)
    sampler = WPCASampler(
        space, budget=budget, population_size=args.population_size,
        n_generations=args.generations, parent_pool=args.parent_pool, mutation_prob=args.mutation_prob,
        operators=args.operators, seed=sampler_seed,
    )
    objective = _objective_from_args(args, space, proxies, options)
    stop.check("before the study was opened; nothing was written")
    storage = open_storage(args.storage, heartbeat=True, checked=True)
    study = optuna.create_study(storage=storage, study_name=args.study_name,
                                sampler=sampler, directions=objective.directions, load_if_exists=True)
    objective.record(study, budget, ga=sampler.settings)  # another search's study: one line, nothing written
    folder = str(Path(args.artifact_dir).resolve()) if args.artifact_dir else None
    if folder and study.user_attrs.get(attr.ARTIFACT_DIR) != folder:
        study.set_user_attr(attr.ARTIFACT_DIR, folder)
    if not args.verbose:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
    if objective.needs_reference and study.user_attrs.get(attr.REFERENCE) is None:
        _score_reference(study, objective, budget, args, stop)
    stop.check("before the first trial")
    target = args.n_trials if args.n_trials is not None else sampler.n_trials
    _optimize(study, objective, target, args, stop)
    _print_best(study, space, args.top)
    if stop.requested:
        done = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
        print(f"stopped at {done} of {target} finished trials; run the same command again to finish",
              file=sys.stderr)
        return 130
    return 0


def _score_reference(study, objective, budget, args: argparse.Namespace, stop: "_StopOnInterrupt") -> None:
    """Once per study, before the first trial: the sample that scales the combined objective, on a
    progress line of its own; a worker that finds another one scoring it shows that one's progress.
    A Ctrl-C stops between two architectures (the sample is recorded only whole)."""
    from tqdm import tqdm

    with tqdm(total=args.reference_size, desc="reference sample", unit="arch", disable=args.quiet,
              leave=True) as bar:
        def scored(n: int = 1) -> None:
            bar.update(n)
            stop.check(f"while scoring the reference sample ({bar.n} of {args.reference_size}; it is recorded "
                       "only whole, so the next run scores it again)")

        def waiting(done: int, _total: int) -> None:
            bar.set_description("reference sample (scored by another worker)", refresh=False)
            bar.n = done
            bar.refresh()
            stop.check("while waiting for another worker's reference sample")

        objective.reference(study, budget, progress=scored, waiting=waiting)


def _check_search_args(args: argparse.Namespace) -> None:
    if args.n_trials is not None and args.n_trials < 1:
        raise CLIError(f"--n-trials must be >= 1 (the finished trials the study should reach), got {args.n_trials}")
    if args.n_jobs < 1:
        raise CLIError(f"--n-jobs must be >= 1, got {args.n_jobs}")
    if args.top < 1:
        raise CLIError(f"--top must be >= 1 (the best trials printed at the end), got {args.top}")
    if args.write_every < 1:
        raise CLIError(f"--write-every must be >= 1 (finished trials per write), got {args.write_every}")


#: Options a proxy may require that ``search`` can give, and the flag that gives each.
_SEARCH_GIVES = {"latency_model": "--latency-model FILE (made by optuna-wpca calibrate-latency)"}


def _warn_loose_budget(space, budget) -> None:
    """A budget above the space's largest candidate constrains nothing: say so (it is not an error)."""
    if budget.max_params is None:
        return
    largest = space.max_params()
    if budget.max_params > largest:
        print(f"optuna-wpca search: warning: --max-params {budget.max_params:.4g} is above the space's largest "
              f"candidate ({largest:,} parameters, counted as {space.count!r}): the budget constrains nothing",
              file=sys.stderr)


def _proxy_settings(args: argparse.Namespace, space) -> tuple[list[str], dict]:
    """The proxies and their options from the command line, every refusal before anything is opened."""
    from optuna_wpca.proxies import LatencyModel, check_proxy_options, default_objective, get_proxy, missing_options

    proxies = list(dict.fromkeys(args.proxy or [default_objective(space)]))
    for name in proxies:
        get_proxy(name)  # an unknown proxy, or a combination naming one: one line, nothing written
    options: dict = {} if args.eta is None else {"eta": args.eta}
    for item in args.proxy_option or ():
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise CLIError(f"--proxy-option {item!r}: expected NAME=VALUE, e.g. reduce=mean")
        if name.strip() in ("eta", "latency_model"):
            raise CLIError(f"--proxy-option {name.strip()}: use --{name.strip().replace('_', '-')}")
        try:
            options[name.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            options[name.strip()] = raw
    if args.latency_model:
        options["latency_model"] = LatencyModel.load(args.latency_model)
        _check_latency_model(options["latency_model"], args.latency_model, space)
    try:
        check_proxy_options(options, proxies)
    except ValueError as err:
        raise CLIError(str(err)) from None
    for name in proxies:
        for option in missing_options(name, options):
            if option in _SEARCH_GIVES:
                raise CLIError(f"--proxy {name} needs {_SEARCH_GIVES[option]}")
            raise CLIError(f"--proxy {name} needs {option}=..., which search cannot give; score it with "
                           f"optuna-wpca rank --proxy {name} --{option.replace('_', '-')} ..., or in Python "
                           f"(ZeroCostObjective(space, proxies=[{name!r}], {option}=...))")
    return proxies, options


def _check_latency_model(model, path: str, space) -> None:
    """A latency model from another space predicts nothing about this one; a poor one is said."""
    from optuna_wpca.proxies._latency_model import MIN_HOLDOUT_TAU

    calibrated_on = model.calibration.get("space")
    if calibrated_on is None:
        print(f"optuna-wpca search: warning: latency model {path!r} does not record the space it was calibrated "
              "on (made before 0.3); its predictions are trusted as they are", file=sys.stderr)
    elif calibrated_on != space.to_dict():
        raise CLIError(f"latency model {path!r} was calibrated on another space ({calibrated_on.get('type')}, "
                       f"{_space_line(calibrated_on)}), not this search's ({space.kind}, "
                       f"{_space_line(space.to_dict())}); calibrate one with the same --preset or --space")
    if not model.reliable:
        tau = "undefined" if model.holdout_tau is None else f"{model.holdout_tau:.2f}"
        print(f"optuna-wpca search: warning: latency model {path!r} ranks held-out timings with Kendall tau "
              f"{tau}, below {MIN_HOLDOUT_TAU}: its Pareto front need not follow real latency", file=sys.stderr)


def _space_line(raw: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in raw.items() if k != "type" and not isinstance(v, (list, dict)))


def _artifact_store(folder: str | None):
    """The dashboard's artifact store in ``folder`` (made if missing; ``None`` for no folder)."""
    import optuna

    if not folder:
        return None
    if Path(folder).exists() and not Path(folder).is_dir():
        raise CLIError(f"--artifact-dir {folder!r} is a file, not a directory")
    Path(folder).mkdir(parents=True, exist_ok=True)
    return optuna.artifacts.FileSystemArtifactStore(folder)


def _objective_from_args(args: argparse.Namespace, space, proxies: list[str], options: dict):
    """The search's ``ZeroCostObjective``: proxies, minibatch, seed, options, artifact store."""
    from optuna_wpca._objective import ZeroCostObjective
    from optuna_wpca._text import text_batch

    store = _artifact_store(args.artifact_dir)
    batch = text_batch(args.corpus, tokenizer=args.tokenizer, batch_size=args.batch_size, seq_len=args.seq_len,
                       seed=args.batch_seed)
    return ZeroCostObjective(space, proxies=proxies, batch=batch, device=args.device, seed=args.seed,
                             artifact_store=store, reference_size=args.reference_size,
                             reference_seed=args.reference_seed, **options)


def _optimize(study, objective, target: int, args: argparse.Namespace, stop: "_StopOnInterrupt") -> None:
    """Run trials until the study holds ``target`` finished ones: in batches on an in-memory copy
    (``--write-every N``), or one by one with heartbeats on the storage.

    With several workers on one study, each stops once the study holds ``target`` finished trials
    (Optuna's ``MaxTrialsCallback``), but a trial another worker is running then still finishes: the
    study can end with up to (workers - 1) x ``--n-jobs`` trials more than ``target``."""
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    from optuna_wpca._batched import BatchedWrites
    from optuna_wpca._storage import fail_stale_trials, trial_heartbeat
    from optuna_wpca.cli._storage import GRACE_PERIOD, HEARTBEAT_INTERVAL

    finished = (TrialState.COMPLETE, TrialState.PRUNED)
    remaining = target - len(study.get_trials(deepcopy=False, states=finished))
    fail_stale_trials(study, GRACE_PERIOD)
    if remaining <= 0:
        print(f"study {study.study_name!r} already has {target - remaining} finished trials (--n-trials {target})")
        return
    until_target = MaxTrialsCallback(target, states=finished)
    if args.write_every > 1:
        # Trials run on an in-memory copy (no heartbeats needed there) and reach the storage in batches,
        # and, however the run ends, once more on the way out.
        batched = BatchedWrites(study, args.write_every, max_seconds=BATCH_SECONDS)
        with batched as working:
            working.optimize(objective, n_trials=remaining, n_jobs=args.n_jobs, show_progress_bar=not args.quiet,
                             callbacks=[batched.callback, until_target, stop])
            if stop.requested:
                print(f"optuna-wpca search: writing the last {len(batched.unwritten())} finished trials",
                      file=sys.stderr)
        return

    def run(trial):
        # Dead workers' trials are retried by the living ones too, not only by the next run.
        fail_stale_trials(study, GRACE_PERIOD)
        with trial_heartbeat(trial, HEARTBEAT_INTERVAL):
            return objective(trial)

    study.optimize(run, n_trials=remaining, n_jobs=args.n_jobs, show_progress_bar=not args.quiet,
                   callbacks=[until_target, stop])


#: With ``--write-every N``, finished trials are also written once this many seconds have passed since
#: the last write, so that what a Ctrl-C has to write on the way out stays small whatever N is.
BATCH_SECONDS = 5.0


class _Stopped(Exception):
    """A Ctrl-C honoured at a safe point before the trials; the message says where."""


class _StopOnInterrupt:
    """SIGINT for a whole search: the first one is honoured at the next safe point (``check``
    between stages, or the ``study.optimize`` callback after the running trials), never by an
    exception raised in the middle of a storage write; a second one aborts at once."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = None

    def __enter__(self) -> "_StopOnInterrupt":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _handle(self, _signum: int, _frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        # os.write, not print: the handler may run while the main thread is inside a write to stderr
        # (the progress bar's), where a buffered write would fail as a reentrant call.
        os.write(2, b"\noptuna-wpca search: stopping at the next safe point (finished trials are kept); "
                    b"Ctrl-C again to abort\n")

    def check(self, where: str) -> None:
        """Stop here (``where`` says what that means) if a Ctrl-C came."""
        if self.requested:
            raise _Stopped(where)

    def __call__(self, study, _trial) -> None:
        if self.requested:
            study.stop()


def _print_best(study, space, top: int) -> None:
    """The best trials (single objective) or the feasible Pareto front (several), then the first one's layers."""
    from optuna_wpca._selection import is_feasible, top_trials

    names = study.metric_names or [f"value{i}" for i in range(len(study.directions))]
    if len(study.directions) == 1:
        best = top_trials(study, top)
        heading = f"best {len(best)} distinct architecture{'s' if len(best) != 1 else ''}"
    else:
        front = [t for t in study.best_trials if is_feasible(t)]
        best = sorted(front, key=lambda t: t.values[0], reverse=study.directions[0].name == "MAXIMIZE")[:top]
        heading = f"{len(front)} feasible trials on the Pareto front ({', '.join(names)}), {len(best)} shown"
    if not best:
        raise CLIError(f"study {study.study_name!r} has no completed feasible trial yet")
    print(f"study {study.study_name!r}: {len(study.trials)} trials; {heading}:")
    for t in best:
        values = "  ".join(f"{n} {v:.6g}" for n, v in zip(names, t.values))
        print(f"  trial {t.number:>5}  {values}  params {t.user_attrs.get(attr.NUM_PARAMS, 0):,}"
              f"  pca_dims {t.user_attrs.get(attr.PCA_DIMS)}")
    print(f"{'best' if len(study.directions) == 1 else 'first'} architecture (trial {best[0].number}):")
    for i, line in enumerate(space.describe(space.from_params(best[0].params))):
        print(f"  layer {i:>2}: {line}")


def _check_storage_exists(url: str) -> None:
    """Reading commands never create a storage: a missing SQLite or journal file is an error."""
    for prefix in ("sqlite:///", "journal://"):
        path = url[len(prefix):] if url.startswith(prefix) else None
        if path and path != ":memory:" and not Path(path).exists():
            raise CLIError(f"storage file {path!r} does not exist (is --storage right?)")


def load_our_study(args: argparse.Namespace):
    """The study named by ``--storage`` / ``--study-name`` and its recorded space."""
    import optuna

    from optuna_wpca._record import read_search

    _check_storage_exists(args.storage)
    storage = open_storage(args.storage)
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    if args.study_name not in names:
        raise CLIError(f"no study named {args.study_name!r} in {args.storage} (studies: {', '.join(names) or 'none'})")
    study = optuna.load_study(study_name=args.study_name, storage=storage)
    return study, read_search(study).space


def run_show(args: argparse.Namespace) -> int:
    """``optuna-wpca show``: the best trials of a study and the best one's layers."""
    if args.top < 1:
        raise CLIError(f"--top must be >= 1, got {args.top}")
    study, space = load_our_study(args)
    _print_best(study, space, args.top)
    from optuna_wpca.pick import pick_lines, read_pick

    record = read_pick(study)
    if record is not None:
        print("\n".join(pick_lines(record)))
        print(f"picked architecture (trial {record['zero_cost_trial']}; export takes it):")
        picked = next(t for t in study.get_trials(deepcopy=False) if t.number == record["zero_cost_trial"])
        for i, line in enumerate(space.describe(space.from_params(picked.params))):
            print(f"  layer {i:>2}: {line}")
    return 0


def run_export(args: argparse.Namespace) -> int:
    """``optuna-wpca export``: a trial as a ``from_pretrained`` directory with ``architecture.json``."""
    import optuna

    from optuna_wpca._model_card import model_card
    from optuna_wpca._selection import top_trials

    study, space = load_our_study(args)
    from optuna_wpca.pick import read_pick

    picked = read_pick(study)
    if args.trial is None and picked is not None:  # the second stage decided: its pick, not the proxy's best
        args.trial = picked["zero_cost_trial"]
        print(f"exporting trial {args.trial}, the second stage's pick ({picked['stage_study']}); --trial N exports "
              "another")
    if args.trial is None:
        if len(study.directions) > 1:
            front = sorted(t.number for t in study.best_trials)
            raise CLIError(f"study {args.study_name!r} has several objectives and no single best trial; pass "
                           f"--trial N (Pareto front: {', '.join(map(str, front[:20]))}{' ...' if len(front) > 20 else ''})")
        best = top_trials(study, 1)
        if not best:
            raise CLIError(f"study {args.study_name!r} has no completed feasible trial to export")
        trial = best[0]
    else:
        matches = [t for t in study.get_trials(deepcopy=False) if t.number == args.trial]
        if not matches:
            raise CLIError(f"study {args.study_name!r} has no trial {args.trial}")
        trial = matches[0]
        if trial.state != optuna.trial.TrialState.COMPLETE:
            raise CLIError(f"trial {trial.number} is {trial.state.name}; only a completed trial can be exported")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {str(out)!r} is a file, not a directory")
    if out.is_dir() and any(out.iterdir()) and not args.overwrite:
        raise CLIError(f"{str(out)!r} exists and is not an empty directory; pass --overwrite to replace its files")
    arch = space.from_params({k: v for k, v in trial.params.items() if k in space.distributions()})
    if args.seed is None:  # the weights the proxy scored
        from optuna_wpca._record import read_search

        recorded = read_search(study).init_seed
        args.seed = recorded if recorded is not None else 0
    trained = trial.user_attrs.get(attr.SAVED_TO)
    if trained and not Path(trained).is_dir():
        raise CLIError(f"trial {trial.number} was saved to {trained!r}, which no longer exists")
    tokenizer = _export_tokenizer(args.tokenizer)
    if trained:  # a trial of a "<study>-kd" study: the distilled student, weights and task head
        import shutil

        shutil.copytree(trained, out, dirs_exist_ok=True)
    else:
        space.build(arch, seed=args.seed).save_pretrained(out)
    if args.tokenizer or not (out / "tokenizer_config.json").is_file():
        tokenizer.save_pretrained(str(out))
    command = (f"optuna-wpca export --storage {args.storage} --study-name {study.study_name} "
               f"--trial {trial.number} --seed {args.seed} --out {args.out}")
    (out / "README.md").write_text(model_card(study, trial, space, arch, trained=bool(trained), seed=args.seed,
                                              command=command))
    (out / "architecture.json").write_text(json.dumps({
        "study": study.study_name, "trial": trial.number, "space": space.to_dict(), "params": trial.params,
        "architecture": arch.to_dict(), "num_params": space.num_params(arch), "seed": args.seed,
        "trained": bool(trained),
    }, indent=2) + "\n")
    what = "distilled student" if trained else f"untrained, seed {args.seed}"
    loader = "AutoModelForSequenceClassification" if trained else "AutoModel"
    print(f"exported trial {trial.number} ({space.num_params(arch):,} parameters, {what}) to {out}; "
          f"after `import optuna_wpca`, transformers' {loader}.from_pretrained({str(out)!r}) loads it")
    return 0


def _export_tokenizer(path: str | None):
    """The tokenizer written beside an export: ``--tokenizer`` or the default one, read before anything is written."""
    from optuna_wpca._text import load_tokenizer

    try:
        return load_tokenizer(path)
    except (OSError, ValueError) as err:
        raise CLIError(f"--tokenizer {path!r}: {str(err).splitlines()[0]}") from None


def run_refine(args: argparse.Namespace) -> int:
    """``optuna-wpca refine``: refine a trial, enqueue it in the same study and score it there."""
    import optuna

    from optuna_wpca._objective import ZeroCostObjective
    from optuna_wpca._refine import refine
    from optuna_wpca._record import read_search
    from optuna_wpca._selection import top_trials

    study, space = load_our_study(args)
    record = read_search(study)
    number = args.trial
    if number is None:
        if len(study.directions) > 1:
            raise CLIError(f"study {args.study_name!r} has several objectives; pass --trial N")
        best = top_trials(study, 1)
        if not best:
            raise CLIError(f"study {args.study_name!r} has no completed feasible trial to refine")
        number = best[0].number
    try:
        batch = record.scoring_batch()  # the study's own minibatch: a refined trial compares with its parent
    except ValueError as err:
        raise CLIError(f"study {args.study_name!r}: {err}") from None
    try:
        result = refine(study, number, batch=batch, cka_threshold=args.cka_threshold, heads=not args.no_heads,
                        widths=not args.no_widths, device=args.device)
    except ValueError as err:
        raise CLIError(str(err)) from None
    print(f"trial {number}: {space.summary(result.before)}  ({space.num_params(result.before):,} parameters)")
    print(f"refined:  {space.summary(result.architecture)}  ({space.num_params(result.architecture):,} parameters)")
    print(f"  PCA dims {result.pca_dims}; heads kept by CKA {result.kept_heads}"
          + (f"; width changes undone for the budget in layers {result.reverted_layers}" if result.reverted_layers else ""))
    if not result.changed:
        print("nothing to change: no trial enqueued")
        return 0
    # The refined trial gets its picture and note where the search drew its trials'.
    store = _artifact_store(args.artifact_dir or study.user_attrs.get(attr.ARTIFACT_DIR))
    objective = ZeroCostObjective(space, batch=batch, device=args.device, artifact_store=store,
                                  **record.objective_settings())
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.sampler = optuna.samplers.RandomSampler()  # the enqueued parameters are fixed; nothing is sampled
    study.optimize(objective, n_trials=1)
    trial = study.trials[-1]
    names = study.metric_names or ["value"]
    values = ", ".join(f"{n} {v:.6g}" for n, v in zip(names, trial.values or []))
    print(f"scored as trial {trial.number} ({trial.state.name}{': ' + values if values else ''})")
    return 0
