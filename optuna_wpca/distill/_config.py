"""A training recipe and what a training run returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from optuna_wpca._errors import InputError


@dataclass
class TrainConfig:
    """One training recipe. Defaults: AdamW (0.9, 0.999, weight decay 0.01), linear decay after a
    10% warm-up (the paper's Appendix F); ``gamma`` weighs the soft cross-entropy on logits
    (0 task-agnostic, 1 task stage)."""

    steps: int = 1000
    batch_size: int = 32
    max_seq_len: int = 64
    learning_rate: float = 3e-4
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_ratio: float = 0.1
    #: ``"linear"``: decay to 0 after the warm-up (the paper's); ``"constant"``: hold the rate after the
    #: warm-up, so step s of a long run is the end of a run of s steps (benchmarks measure several
    #: step counts in one run).
    schedule: str = "linear"
    #: Warm-up steps; ``None``: ``warmup_ratio`` x ``steps`` (give a number with ``"constant"`` so the
    #: warm-up does not depend on the run's length).
    warmup_steps: int | None = None
    gamma: float = 1.0
    temperature: float = 1.0
    #: ``"mse"`` (the paper's) or ``"pkd"`` (ELM's channel-standardised MSE) on the features.
    feature_loss: str = "mse"
    #: ``"soft_ce"`` (the paper's) or ``"dist"`` (ELM's relational loss) on the logits.
    logit_loss: str = "soft_ce"
    eval_every: int = 100
    checkpoint_every: int = 100
    eval_limit: int | None = None
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "max_seq_len", "eval_every", "checkpoint_every"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.warmup_ratio < 1:
            raise InputError(f"warmup_ratio must lie in [0, 1), got {self.warmup_ratio}")
        if self.schedule not in ("linear", "constant"):
            raise InputError(f"schedule must be 'linear' or 'constant', got {self.schedule!r}")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise InputError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.learning_rate <= 0:
            raise InputError(f"learning_rate must be > 0, got {self.learning_rate}")
        from optuna_wpca.distill._losses import FEATURE_LOSSES, LOGIT_LOSSES

        if self.feature_loss not in FEATURE_LOSSES:
            raise InputError(f"feature_loss must be one of {FEATURE_LOSSES}, got {self.feature_loss!r}")
        if self.logit_loss not in LOGIT_LOSSES:
            raise InputError(f"logit_loss must be one of {LOGIT_LOSSES}, got {self.logit_loss!r}")


@dataclass
class TrainResult:
    """The final dev metric of a run, its steps and seconds, and the metric at every evaluation."""

    metric: float
    steps: int
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)
    resumed_from: int | None = None
    #: The task loss on dev data at the last evaluation (mean cross-entropy; MSE for regression), a
    #: continuous companion of ``metric``; ``None`` for task-agnostic distillation, whose metric is a loss.
    dev_loss: float | None = None
