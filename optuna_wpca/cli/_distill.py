"""``optuna-wpca distill``: train the top trials of a zero-cost study by KD."""

from __future__ import annotations

import argparse

import math

from optuna_wpca import _attributes as attr
from optuna_wpca.cli._errors import CLIError
from optuna_wpca.cli._study_commands import load_our_study


def check_distill_args(args: argparse.Namespace) -> None:
    """Every number of ``distill`` checked before a study, task or teacher is touched: one line each."""
    whole = {"--k": args.k, "--steps": args.steps, "--batch-size": args.batch_size,
             "--max-seq-len": args.max_seq_len, "--eval-every": args.eval_every}
    for flag, value in whole.items():
        if value < 1:
            raise CLIError(f"{flag} must be >= 1, got {value}")
    if args.train_examples is not None and args.train_examples < 1:
        raise CLIError(f"--train-examples must be >= 1 (or left out for the whole training split), "
                       f"got {args.train_examples}")
    if args.teacher_steps < 0:
        raise CLIError(f"--teacher-steps must be >= 0 (0: use the teacher as it is), got {args.teacher_steps}")
    for flag, value in {"--learning-rate": args.learning_rate, "--gamma": args.gamma}.items():
        if not math.isfinite(value) or value < 0 or (flag == "--learning-rate" and value == 0):
            raise CLIError(f"{flag} must be a finite number {'> 0' if flag == '--learning-rate' else '>= 0'}, "
                           f"got {value}")
    if args.max_seq_len > 512:
        raise CLIError(f"--max-seq-len {args.max_seq_len} exceeds the 512 positions of the students and teacher")
    if args.min_resource is not None and args.min_resource < 1:
        raise CLIError(f"--min-resource must be >= 1 step, got {args.min_resource}")
    if args.max_resource is not None and args.max_resource < 1:
        raise CLIError(f"--max-resource must be >= 1 step, got {args.max_resource}")
    if args.reduction_factor < 2:
        raise CLIError(f"--reduction-factor must be >= 2, got {args.reduction_factor}")
    if args.pruner != "none" and args.eval_every >= args.steps:
        raise CLIError(f"--pruner {args.pruner} stops a student between its evaluations, but --eval-every "
                       f"{args.eval_every} >= --steps {args.steps} gives each student one evaluation; lower "
                       "--eval-every or use --pruner none")


def make_pruner(args: argparse.Namespace):
    """The Optuna pruner ``--pruner`` names, with its resources in training steps (reports come every
    ``--eval-every`` steps): min resource default one evaluation, max resource default ``--steps``."""
    import optuna

    low = args.min_resource if args.min_resource is not None else args.eval_every
    high = args.max_resource if args.max_resource is not None else args.steps
    if args.pruner in ("hyperband", "successive-halving") and low >= high:
        raise CLIError(f"--min-resource {low} must be below --max-resource {high} (steps) for --pruner {args.pruner}")
    if args.pruner == "none":
        return optuna.pruners.NopPruner()
    if args.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=low)
    if args.pruner == "successive-halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=low, reduction_factor=args.reduction_factor)
    return optuna.pruners.HyperbandPruner(min_resource=low, max_resource=high, reduction_factor=args.reduction_factor)


def run_distill(args: argparse.Namespace) -> int:
    """``optuna-wpca distill``: fine-tune the teacher, then train the top trials by KD."""
    import tempfile

    from optuna_wpca.distill import (
        DistillationObjective, TrainConfig, bundled_teacher_path, distill_top_trials, finetune_teacher, load_task,
        load_teacher,
    )

    check_distill_args(args)
    pruner = make_pruner(args)
    task = load_task(args.task)  # an unknown task: one line before the study is opened
    study, space = load_our_study(args)
    if space.family != "encoder":
        raise CLIError(f"study {args.study_name!r} searched a {space.kind!r} space of {space.family}s; distill "
                       "trains sequence classifiers from a BERT teacher and needs an encoder space")
    if args.train_examples:
        task.train = task.train[: args.train_examples]
    teacher_path = args.teacher if args.teacher is not None else bundled_teacher_path()
    load_teacher(teacher_path)  # fails early on a missing or non-BERT teacher
    if args.teacher_steps > 0:
        tuned = tempfile.mkdtemp(prefix="optuna-wpca-teacher-")
        cfg = TrainConfig(steps=args.teacher_steps, batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                          learning_rate=5e-5, eval_every=args.teacher_steps, device=args.device)
        metric = finetune_teacher(teacher_path, task, tuned, cfg, progress=not args.quiet).metric
        print(f"teacher fine-tuned on {task.name}: dev {task.metric} {metric:.4f}")
        teacher_path = tuned
    teacher = load_teacher(teacher_path, num_labels=task.num_labels, device=args.device)
    config = TrainConfig(steps=args.steps, batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                         learning_rate=args.learning_rate, gamma=args.gamma, feature_loss=args.feature_loss,
                         logit_loss=args.logit_loss, eval_every=args.eval_every,
                         checkpoint_every=args.eval_every, device=args.device, seed=args.seed)
    objective = DistillationObjective(space, task, teacher=teacher, config=config, checkpoint_root=args.checkpoint_dir,
                                      save_root=args.save_dir, progress=not args.quiet)
    kd = distill_top_trials(study, objective, k=args.k, pruner=pruner)
    for t in kd.trials:
        value = f"{t.value:.4f}" if t.value is not None else "-"
        print(f"  kd trial {t.number}: {t.state.name:<8} dev {task.metric} {value}  zero-cost trial "
              f"{t.user_attrs.get(attr.SOURCE_TRIAL, '-')}  {t.user_attrs.get(attr.SAVED_TO, '')}")
    return 0
