"""``optuna-wpca calibrate-latency``: per-operation costs of a space's candidates on this machine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from optuna_wpca.cli._errors import CLIError


def run_calibrate_latency(args: argparse.Namespace) -> int:
    """Time a sample of the space, fit the costs, check them on held-out re-timings, write the model."""
    from optuna_wpca._budget import Budget
    from optuna_wpca._presets import preset
    from optuna_wpca.proxies import calibrate_latency_model
    from optuna_wpca.proxies._latency_model import MIN_HOLDOUT_TAU
    from optuna_wpca.spaces import load_space

    if args.n < 4 or args.holdout < 2 or args.repeats < 1:
        raise CLIError(f"--n must be >= 4, --holdout >= 2 and --repeats >= 1 (got {args.n}, {args.holdout}, "
                       f"{args.repeats})")
    out = Path(args.out)
    if out.is_dir():
        raise CLIError(f"--out {str(out)!r} is a directory; name the JSON file to write")
    space, budget = (load_space(args.space), Budget()) if args.space else preset(args.preset)
    model = calibrate_latency_model(space, n=args.n, holdout=args.holdout, seed=args.seed, device=args.device,
                                    repeats=args.repeats, fits=lambda a: budget.contains(space.num_params(a)))
    model.save(out)
    c = model.calibration
    tau = "undefined (the predictions are all equal)" if model.holdout_tau is None else f"{model.holdout_tau:.3f}"
    print(f"latency model for {space.kind} on {model.device}: fitted on {c['fitted_on']} architectures; "
          f"on {c['holdout']} others, Kendall tau {tau} against their timings, median "
          f"relative error {100 * c['holdout_median_relative_error']:.1f}%")
    print(f"wrote {out}; use it with: optuna-wpca search --proxy predicted_latency --latency-model {out}")
    if not model.reliable:
        print(f"optuna-wpca calibrate-latency: warning: a held-out Kendall tau of {tau} is below {MIN_HOLDOUT_TAU}: "
              "this model does not rank the space's latencies; calibrate again on an idle machine with more "
              "architectures (--n, --holdout) and --repeats", file=sys.stderr)
        return 1
    return 0
