"""The pick, trained: a second stage that trains only the zero-cost study's shortlist, briefly.

A zero-cost search orders thousands of architectures for the price of a forward pass each; its top
few are close, and a short training tells them apart better than the proxy alone where the proxy is
weakest (see ``docs/benchmarks.md``, "The pick, trained"). The shortlist trains as trials of a second
Optuna study, so any Optuna pruner decides how far each one goes.
"""

from optuna_wpca.pick._protocol import DEFAULT_PROTOCOL, DEFAULT_PROTOCOLS, PickProtocol, default_protocol
from optuna_wpca.pick._stage import (
    PickTopTrials,
    ShortlistObjective,
    pick_lines,
    pick_top_trials,
    read_pick,
    shortlist,
)
from optuna_wpca.pick._training import ShortlistTrainer, TrainingCurve, language_model_corpus

__all__ = [
    "DEFAULT_PROTOCOL",
    "DEFAULT_PROTOCOLS",
    "PickProtocol",
    "PickTopTrials",
    "ShortlistObjective",
    "ShortlistTrainer",
    "TrainingCurve",
    "default_protocol",
    "language_model_corpus",
    "pick_lines",
    "pick_top_trials",
    "read_pick",
    "shortlist",
]
