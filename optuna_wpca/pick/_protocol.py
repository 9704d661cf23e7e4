"""The second stage's recipe: how long each shortlisted architecture trains, on what, and who stops it.

One frozen value, recorded in the second-stage study and compared on resume, so a study never mixes
two recipes. :data:`DEFAULT_PROTOCOL` was fixed before the first measured pick on a trained
benchmark (``benchmarks/pick.py``) and is what ``optuna-wpca pick`` uses unless told otherwise.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import optuna

from optuna_wpca._errors import InputError

#: The training signal per model family when ``signal="auto"``: encoders by KD pretraining against the
#: bundled teacher (masked LM alone sat on the unigram plateau for 300 steps in the pilot of
#: ``docs/benchmarks.md``, where KD separated architectures at 100 steps); decoders by next-token
#: loss (the bundled teacher is a bidirectional encoder, no target for a causal student).
AUTO_SIGNALS = {"encoder": "kd", "decoder": "next_token"}
SIGNALS = ("auto", "kd", "mlm", "next_token")
PRUNERS = ("successive-halving", "hyperband", "median", "none")


@dataclass(frozen=True)
class PickProtocol:
    """How the second stage trains each shortlisted architecture.

    Attributes:
        steps: Training steps of a run that is never pruned (the largest resource).
        report_every: Steps between held-out measurements; each is a ``trial.report`` the pruner reads.
        batch_size: Sequences per training step.
        seq_len: Tokens per sequence.
        learning_rate: AdamW's rate after the warm-up (held constant: a run stopped at step ``s``
            is the run of ``s`` steps).
        warmup_steps: Linear warm-up steps.
        eval_windows: Held-out sequences scored at each measurement.
        train_examples: KD only: training paragraphs (the teacher's targets are computed once for
            these and read by every candidate).
        signal: ``"auto"`` (KD for encoders, next-token for decoders), ``"kd"``, ``"mlm"`` (masked LM,
            encoders) or ``"next_token"`` (decoders).
        pruner: ``"successive-halving"``, ``"hyperband"``, ``"median"`` or ``"none"``.
        reduction_factor: The halving pruners' reduction factor.
        seed: Seed of the weights' draw, the batches and the held-out masks.

    Example:
        >>> p = PickProtocol(steps=40, report_every=10)
        >>> p.rungs(), type(p.make_pruner()).__name__
        ([10, 20, 30, 40], 'SuccessiveHalvingPruner')
    """

    steps: int = 100
    report_every: int = 25
    batch_size: int = 32
    seq_len: int = 64
    learning_rate: float = 1e-3
    warmup_steps: int = 40
    eval_windows: int = 128
    train_examples: int = 512
    signal: str = "auto"
    pruner: str = "successive-halving"
    reduction_factor: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "report_every", "batch_size", "eval_windows", "train_examples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{name} must be an integer >= 1, got {value!r}")
        if self.report_every > self.steps:
            raise InputError(f"report_every ({self.report_every}) must be at most steps ({self.steps})")
        if self.seq_len < 4 or self.seq_len > 512:
            raise InputError(f"seq_len must lie in 4..512, got {self.seq_len}")
        if not (isinstance(self.learning_rate, (int, float)) and math.isfinite(self.learning_rate)
                and self.learning_rate > 0):
            raise InputError(f"learning_rate must be a finite number > 0, got {self.learning_rate!r}")
        if self.warmup_steps < 0:
            raise InputError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.signal not in SIGNALS:
            raise InputError(f"signal must be one of {', '.join(SIGNALS)}, got {self.signal!r}")
        if self.pruner not in PRUNERS:
            raise InputError(f"pruner must be one of {', '.join(PRUNERS)}, got {self.pruner!r}")
        if self.reduction_factor < 2:
            raise InputError(f"reduction_factor must be >= 2, got {self.reduction_factor}")
        if self.pruner != "none" and self.report_every >= self.steps:
            raise InputError(f"pruner {self.pruner!r} stops runs between measurements, but report_every "
                             f"({self.report_every}) >= steps ({self.steps}) gives each run one; lower "
                             "report_every or use pruner 'none'")

    def rungs(self) -> list[int]:
        """The steps at which a run is measured (and may be stopped)."""
        return sorted({*range(self.report_every, self.steps + 1, self.report_every), self.steps})

    def signal_for(self, family: str) -> str:
        """The signal this protocol trains a model of ``family`` (``"encoder"``/``"decoder"``) with."""
        signal = AUTO_SIGNALS.get(family, "next_token") if self.signal == "auto" else self.signal
        if family == "decoder" and signal != "next_token":
            raise InputError(f"a decoder trains by next-token loss in the second stage, not {signal!r}")
        if family != "decoder" and signal == "next_token":
            raise InputError("an encoder trains by 'kd' or 'mlm' in the second stage, not 'next_token'")
        return signal

    def make_pruner(self) -> optuna.pruners.BasePruner:
        """The Optuna pruner the protocol names, its resources in training steps."""
        if self.pruner == "none":
            return optuna.pruners.NopPruner()
        if self.pruner == "median":
            return optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=self.report_every - 1)
        if self.pruner == "successive-halving":
            return optuna.pruners.SuccessiveHalvingPruner(min_resource=self.report_every,
                                                          reduction_factor=self.reduction_factor)
        return optuna.pruners.HyperbandPruner(min_resource=self.report_every, max_resource=self.steps,
                                              reduction_factor=self.reduction_factor)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (what the study records)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "PickProtocol":
        """The protocol :meth:`to_dict` wrote; an unknown field is named."""
        unknown = set(raw) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise InputError(f"unknown second-stage protocol fields: {', '.join(sorted(unknown))}")
        return cls(**raw)


#: The recipe fixed before the first measured pick (see ``docs/benchmarks.md``, "The pick, trained"):
#: encoders by KD at batch 32 (the setting whose 100-step loss separated architectures in the KD
#: pretraining pilot); decoders by next-token loss at batch 16, because the 30,522-token head makes a
#: decoder step about 7x an encoder's on the CPU (pilot: 165-185 s per LTS decoder at batch 32).
DEFAULT_PROTOCOLS = {"encoder": PickProtocol(), "decoder": PickProtocol(batch_size=16)}
DEFAULT_PROTOCOL = DEFAULT_PROTOCOLS["encoder"]


def default_protocol(family: str) -> PickProtocol:
    """The committed protocol for a space of ``family`` (``"encoder"`` or ``"decoder"``)."""
    return DEFAULT_PROTOCOLS.get(family, DEFAULT_PROTOCOL)
