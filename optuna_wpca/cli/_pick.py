"""``optuna-wpca pick``: train the zero-cost study's shortlist briefly and record the pick."""

from __future__ import annotations

import argparse
import dataclasses

from optuna_wpca.cli._errors import CLIError
from optuna_wpca.cli._study_commands import load_our_study

#: ``pick`` options that set a field of the protocol (``None``: the family's committed value).
PROTOCOL_FLAGS = ("steps", "report_every", "batch_size", "seq_len", "learning_rate", "warmup_steps", "eval_windows",
                  "train_examples", "signal", "pruner", "reduction_factor", "seed")


def protocol_from_args(args: argparse.Namespace, family: str):
    """The family's committed protocol with the options given on the command line; one line when invalid."""
    from optuna_wpca.pick import default_protocol

    base = default_protocol(family)
    given = {f: getattr(args, f) for f in PROTOCOL_FLAGS if getattr(args, f) is not None}
    try:
        return dataclasses.replace(base, **given)
    except ValueError as err:
        flag = next((f for f in given if f in str(err)), None)
        raise CLIError(f"--{flag.replace('_', '-')}: {err}" if flag else str(err)) from None


def run_pick(args: argparse.Namespace) -> int:
    """``optuna-wpca pick``."""
    from pathlib import Path

    from optuna_wpca.pick import ShortlistTrainer, pick_lines, pick_top_trials, shortlist

    if args.shortlist < 1:
        raise CLIError(f"--shortlist must be >= 1, got {args.shortlist}")
    if args.corpus is not None and not Path(args.corpus).is_file():
        raise CLIError(f"--corpus {args.corpus!r} is not a file")
    study, space = load_our_study(args)
    protocol = protocol_from_args(args, space.family)
    try:
        protocol.signal_for(space.family)
        shortlist(study, args.shortlist)  # one line before anything is written
    except ValueError as err:
        raise CLIError(str(err)) from None
    trainer = ShortlistTrainer(space, protocol, corpus=args.corpus, teacher=args.teacher,
                               work_dir=Path(args.work_dir), device=args.device)
    print(f"second stage of {study.study_name!r}: the top {args.shortlist} trained by {trainer.signal} "
          f"({protocol.steps} steps, held-out loss every {protocol.report_every}, pruner {protocol.pruner})", flush=True)
    record = pick_top_trials(study, k=args.shortlist, trainer=trainer, study_name=args.pick_study,
                             checkpoint_root=Path(args.work_dir) / "checkpoints", space=space)
    print("\n".join(pick_lines(record)))
    print(f"export it: optuna-wpca export --storage {args.storage} --study-name {study.study_name} --out DIR")
    return 0
