"""``optuna-wpca pick``: train the zero-cost study's shortlist briefly and record the pick."""

from __future__ import annotations

import argparse
import dataclasses

from optuna_wpca.cli._errors import CLIError
from optuna_wpca.cli._study_commands import load_our_study

#: ``pick`` options that set a field of the protocol (``None``: the family's committed value).
PROTOCOL_FLAGS = ("steps", "report_every", "batch_size", "seq_len", "learning_rate", "warmup_steps", "eval_windows",
                  "train_examples", "signal", "pruner", "reduction_factor", "seed")


def add_pick_parser(sub) -> None:
    """The ``pick`` subcommand."""
    from optuna_wpca.pick import DEFAULT_PROTOCOLS
    from optuna_wpca.pick._protocol import PRUNERS, SIGNALS

    enc, dec = DEFAULT_PROTOCOLS["encoder"], DEFAULT_PROTOCOLS["decoder"]

    def default(name: str) -> str:
        a, b = getattr(enc, name), getattr(dec, name)
        return f"default {a}" if a == b else f"default {a} for encoders, {b} for decoders"

    pick = sub.add_parser(
        "pick", help="train the top K of a zero-cost study briefly (a second study, <name>-pick) and record the pick",
        description="The second stage: each of the K best distinct feasible architectures of the zero-cost study "
        "trains from its seeded initialisation as a trial of '<study>-pick' in the same storage (KD pretraining "
        "against the bundled teacher for encoders, next-token loss for decoders, on the bundled WikiText-2), reports "
        "its held-out loss every --report-every steps, and the pruner stops the weak ones. The lowest loss among "
        "the runs trained to the end is the pick, recorded in the zero-cost study: show, export and the model card "
        "use it. A rerun resumes; a finished stage trains nothing.")
    from optuna_wpca.cli._parser import _add_study_options

    _add_study_options(pick, "the zero-cost study")
    pick.add_argument("--shortlist", type=int, default=5, help="architectures to train, K (default 5)")
    pick.add_argument("--pick-study", default=None, help="the second-stage study's name (default <study>-pick)")
    g = pick.add_argument_group("protocol (defaults: the committed one, docs/benchmarks.md 'The pick, trained')")
    g.add_argument("--steps", type=int, default=None, help=f"steps of a run never pruned ({default('steps')})")
    g.add_argument("--report-every", type=int, default=None,
                   help=f"steps between held-out measurements, each one a rung of the pruner ({default('report_every')})")
    g.add_argument("--batch-size", type=int, default=None, help=f"sequences per step ({default('batch_size')})")
    g.add_argument("--seq-len", type=int, default=None, help=f"tokens per sequence ({default('seq_len')})")
    g.add_argument("--learning-rate", type=float, default=None,
                   help=f"AdamW rate after warm-up, held constant ({default('learning_rate')})")
    g.add_argument("--warmup-steps", type=int, default=None, help=f"linear warm-up steps ({default('warmup_steps')})")
    g.add_argument("--eval-windows", type=int, default=None,
                   help=f"held-out sequences per measurement ({default('eval_windows')})")
    g.add_argument("--train-examples", type=int, default=None,
                   help=f"KD: training paragraphs whose teacher targets are computed once ({default('train_examples')})")
    g.add_argument("--signal", choices=SIGNALS, default=None,
                   help="auto: kd for encoders, next_token for decoders; mlm: masked LM (encoders) (default auto)")
    g.add_argument("--pruner", choices=PRUNERS, default=None, help=f"Optuna pruner ({default('pruner')})")
    g.add_argument("--reduction-factor", type=int, default=None,
                   help=f"the halving pruners' reduction factor ({default('reduction_factor')})")
    g.add_argument("--seed", type=int, default=None, help=f"seed of weights, batches and masks ({default('seed')})")
    pick.add_argument("--corpus", default=None, help="text file to train on (default: bundled WikiText-2)")
    pick.add_argument("--teacher", default=None, help="KD: local BERT-family model directory (default: the "
                      "bundled MiniLM-L6-H384)")
    pick.add_argument("--work-dir", default="optuna_wpca_pick", help="checkpoints of each run and the teacher's "
                      "targets (default optuna_wpca_pick)")
    pick.add_argument("--device", default="cpu", help="torch device (default cpu)")
    pick.set_defaults(func=run_pick)


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
