"""Predicted latency: a candidate's operation counts times per-operation costs calibrated once.

Measured latency depends on everything else the machine runs: a search on a busy machine records
latencies several times the idle ones, and its Pareto front against latency is noise. Like
HW-GPT-Bench's per-device surrogates, :func:`calibrate_latency_model` times a sample of the space
once, on an idle moment, and fits the milliseconds per unit of each operation family (matrix
products of the linear layers, attention's products, a cost per layer, a constant) by non-negative
least squares; the ``predicted_latency`` proxy then counts a candidate's operations (one forward
pass under ``torch.utils.flop_counter``, which counts and does not time) and predicts, whatever else
runs. The calibration says how well it ranks idle re-timings of architectures it was not fitted on.

Example:
    >>> import optuna_wpca
    >>> space = optuna_wpca.WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2)
    >>> lm = calibrate_latency_model(space, n=6, holdout=4, repeats=2)
    >>> sorted(lm.coefficients)
    ['attention_gflop', 'intercept', 'layers', 'matmul_gflop']
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from optuna_wpca._errors import InputError
from optuna_wpca._text import TextBatch, text_batch
from optuna_wpca.models import CandidateModel
from optuna_wpca.proxies._hardware import measurement_input
from optuna_wpca.proxies._registry import ProxyResult, compute_proxy, register_proxy

FEATURES = ("matmul_gflop", "attention_gflop", "layers", "intercept")
#: Below this Kendall tau against held-out timings, a latency model ranks candidates too poorly to
#: steer a Pareto front: calibration and the search that loads it say so.
MIN_HOLDOUT_TAU = 0.5
_MATMUL = ("addmm", "mm", "linear", "matmul")
_ATTENTION = ("bmm", "baddbmm", "_scaled_dot_product", "scaled_dot_product")


def operation_counts(model: CandidateModel, batch: TextBatch, *, latency_batch_size: int = 1,
                     latency_seq_len: int = 128) -> dict[str, float]:
    """The candidate's operation counts on the latency input (see ``measurement_input``)."""
    from torch.utils.flop_counter import FlopCounterMode

    device = next(model.parameters()).device
    ids = measurement_input(model, batch, latency_batch_size, latency_seq_len).to(device)
    was_training = model.training
    model.eval()
    try:
        with FlopCounterMode(display=False) as counter, torch.inference_mode():
            model(ids)
    finally:
        model.train(was_training)
    matmul = attention = 0.0
    for op, flops in counter.get_flop_counts().get("Global", {}).items():
        name = str(op).split(".")[1] if "." in str(op) else str(op)  # "aten.bmm" -> "bmm"
        if any(name.startswith(a) for a in _ATTENTION):
            attention += flops
        elif any(name == m for m in _MATMUL):
            matmul += flops
        else:  # another counted product (convolutions of DSC layers): a matrix product in cost
            matmul += flops
    return {"matmul_gflop": matmul / 1e9, "attention_gflop": attention / 1e9,
            "layers": float(len(model.layers)), "intercept": 1.0}


@dataclass(frozen=True)
class LatencyModel:
    """Milliseconds per unit of each operation family, fitted on measured latencies of one device.

    Args:
        coefficients: ``{feature: ms per unit}`` for :data:`FEATURES`.
        device: Where the calibration timed (``"cpu"``, ``"cuda:0"``), with the machine's description.
        input: The input shape the latencies are for (batch, tokens).
        calibration: How it was fitted and how well it predicts held-out re-timings.
    """

    coefficients: Mapping[str, float]
    device: str
    input: tuple[int, int] = (1, 128)
    calibration: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [f for f in FEATURES if f not in self.coefficients]
        if missing:
            raise InputError(f"a latency model needs coefficients for {', '.join(missing)}")

    def predict(self, counts: Mapping[str, float]) -> float:
        """Predicted milliseconds for a candidate's :func:`operation_counts`."""
        return float(sum(self.coefficients[f] * counts[f] for f in FEATURES))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the file ``calibrate_latency_model`` writes, and the study record)."""
        return {"coefficients": dict(self.coefficients), "device": self.device, "input": list(self.input),
                "calibration": dict(self.calibration)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> LatencyModel:
        """The inverse of :meth:`to_dict`."""
        return cls(dict(raw["coefficients"]), raw["device"], tuple(raw.get("input", (1, 128))),
                   dict(raw.get("calibration", {})))

    @property
    def holdout_tau(self) -> float | None:
        """Kendall tau of the predictions against held-out timings (``None``: unknown or undefined)."""
        tau = self.calibration.get("holdout_kendall_tau")
        return float(tau) if isinstance(tau, (int, float)) and tau == tau else None

    @property
    def reliable(self) -> bool:
        """Whether the held-out Kendall tau is known and at least :data:`MIN_HOLDOUT_TAU`."""
        return self.holdout_tau is not None and self.holdout_tau >= MIN_HOLDOUT_TAU

    def save(self, path: str | Path) -> None:
        """Write the model as JSON (strict JSON: an undefined statistic is ``null``, never ``NaN``)."""
        Path(path).write_text(json.dumps(_finite(self.to_dict()), indent=2, allow_nan=False) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> LatencyModel:
        """Read a model written by :meth:`save`; a clear error for a missing or malformed file."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"latency model {str(path)!r} does not exist (make one with "
                                    "optuna-wpca calibrate-latency)")
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise InputError(f"latency model {str(path)!r} is not one calibrate-latency wrote: {err}") from None


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by ``None``."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def calibrate_latency_model(
    space: Any,
    *,
    n: int = 32,
    holdout: int = 16,
    seed: int = 0,
    device: str | torch.device = "cpu",
    repeats: int = 10,
    batch: TextBatch | None = None,
    fits: Any = None,
) -> LatencyModel:
    """Time ``n`` random architectures of ``space`` (median of ``repeats`` passes each, after warm-up)
    and fit the per-operation costs; then time ``holdout`` others and report the Kendall tau and the
    median relative error of the prediction against those re-timings. Run it on an idle machine: it is
    the one measurement the searches that use the model depend on.

    Args:
        space: The search space whose candidates are timed.
        n: Architectures to fit on.
        holdout: Architectures to check the prediction on (not fitted).
        seed: Seed of the architectures drawn.
        device: Where to time.
        repeats: Timed passes per architecture (the median is kept).
        batch: Text to take the 1 x 128 input from (default: the bundled text).
        fits: Optional predicate on an architecture (the search's budget).
    """
    from scipy.optimize import nnls
    from scipy.stats import kendalltau

    if n < len(FEATURES) or holdout < 2:
        raise InputError(f"calibration needs n >= {len(FEATURES)} and holdout >= 2, got n {n}, holdout {holdout}")
    batch = batch or text_batch(batch_size=2, seq_len=128)
    rng = np.random.default_rng(seed)
    rows, measured = [], []
    for _ in range(n + holdout):
        arch = space.sample(rng)
        while fits is not None and not fits(arch):
            arch = space.sample(rng)
        model = space.build(arch, seed=0, device=device)
        rows.append([operation_counts(model, batch)[f] for f in FEATURES])
        measured.append(compute_proxy("latency", model, batch, repeats=repeats).value)
    x, y = np.asarray(rows), np.asarray(measured)
    coef, _ = nnls(x[:n], y[:n])
    predicted = x[n:] @ coef
    tau = float(kendalltau(predicted, y[n:])[0])  # NaN when the predictions are all equal
    error = float(np.median(np.abs(predicted - y[n:]) / y[n:]))
    return LatencyModel(
        dict(zip(FEATURES, (float(c) for c in coef))),
        f"{torch.device(device)} ({platform.machine()}, {platform.processor() or platform.system()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads)",
        (1, 128),
        {"fitted_on": n, "holdout": holdout, "seed": seed, "repeats": repeats,
         "holdout_kendall_tau": tau if tau == tau else None, "holdout_median_relative_error": error,
         "space": space.to_dict()},
    )


@register_proxy("predicted_latency", needs_grad=False, direction="minimize", unit="ms", zero_cost=False,
                requires=("latency_model",),
                description="latency in ms predicted from operation counts by a calibrated LatencyModel "
                            "(batch 1, 128 tokens); does not depend on the machine's load")
def predicted_latency(model: CandidateModel, batch: TextBatch, *, latency_model: LatencyModel | None = None,
                      latency_batch_size: int = 1, latency_seq_len: int = 128) -> ProxyResult:
    """The latency ``latency_model`` predicts for this candidate's operation counts."""
    if latency_model is None:
        raise InputError("predicted_latency needs a calibrated latency model (optuna-wpca calibrate-latency, "
                         "then search --latency-model FILE; or latency_model=LatencyModel.load(FILE))")
    counts = operation_counts(model, batch, latency_batch_size=latency_batch_size, latency_seq_len=latency_seq_len)
    value = latency_model.predict(counts)
    return ProxyResult(value, {**{k: v for k, v in counts.items() if k != "intercept"},
                               "input": [latency_batch_size, latency_seq_len], "unit": "ms"})
