"""Objectives that combine registered proxies without labels, on a scale fixed before the search.

A combination such as ``"vpca+synaptic_saliency"`` scores a candidate by the mean of its parts'
standardised values. The scale of each part (the mean and standard deviation of its logarithm, or of
the value itself where the part can be zero or negative) comes from a :class:`ReferenceSample`: a
seeded sample of the space scored before the search and recorded in the study. It never comes from
the trials so far, so a value does not change after its trial is told, and a resumed search scores
the same architecture with the same value.

A combination is a proxy like any other (``get_proxy("vpca+synaptic_saliency")``, ``--proxy NAME``):
its ``ProxySpec.parts`` names what it combines, and its function takes the reference as the
``reference`` option.

Example:
    >>> ref = ReferenceSample({"params": (1e6, 2e6, 4e6), "num_layers": (2.0, 4.0, 8.0)}, seed=0)
    >>> spec = get_proxy("params+num_layers")
    >>> round(combine(spec.parts, {"params": 4e6, "num_layers": 8.0}, ref)[0], 6)  # one sd above on both
    1.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from optuna_wpca._errors import InputError
from optuna_wpca.proxies._registry import (
    ProxyResult, ProxySpec, get_proxy, list_base_proxies, register_combination, set_combination_factory,
)
from optuna_wpca.proxies._shared_pass import compute_parts

if TYPE_CHECKING:
    from optuna_wpca._text import TextBatch
    from optuna_wpca.models import CandidateModel

#: How many architectures a search's reference sample holds by default.
DEFAULT_REFERENCE_SIZE = 64
#: Parts' own attributes kept in a combination's trial attributes.
_KEPT_PARTS = ("pca_dims", "num_params")


@dataclass(frozen=True)
class ReferenceSample:
    """Each part's values on a fixed, seeded sample of the space: the scale of a combination.

    Args:
        values: ``{part: values}``, one value per reference architecture.
        seed: The seed the architectures were drawn with.
        architectures: The drawn architectures as parameter dicts (for the record; optional).
    """

    values: Mapping[str, Sequence[float]]
    seed: int
    architectures: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        sizes = {len(v) for v in self.values.values()}
        if not self.values or sizes == {0}:
            raise InputError("the reference sample is empty: a combination needs at least 2 scored architectures")
        if len(sizes) != 1:
            raise InputError("every part of the reference sample must hold one value per architecture")
        if sizes.pop() < 2:
            raise InputError("the reference sample needs at least 2 architectures to set a scale")
        object.__setattr__(self, "values", {k: tuple(float(x) for x in v) for k, v in self.values.items()})

    @property
    def size(self) -> int:
        """The number of reference architectures."""
        return len(next(iter(self.values.values())))

    def scale(self, part: str) -> tuple[bool, float, float]:
        """``(log, mean, sd)`` of ``part``: the log is taken when every reference value is positive."""
        if part not in self.values:
            raise InputError(f"the reference sample has no values of {part!r} (it holds "
                             f"{', '.join(self.values)})")
        v = np.asarray(self.values[part], dtype=float)
        if not np.isfinite(v).all():
            raise InputError(f"the reference sample's values of {part!r} are not all finite")
        log = bool((v > 0).all())
        t = np.log(v) if log else v
        sd = float(t.std(ddof=1))
        if not sd > 0:
            raise InputError(f"{part!r} is constant over the reference sample: it cannot be standardised")
        return log, float(t.mean()), sd

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the study attribute ``optuna_wpca.reference``)."""
        out: dict[str, Any] = {"seed": self.seed, "size": self.size, "values": {k: list(v) for k, v in
                                                                           self.values.items()}}
        if self.architectures:
            out["architectures"] = list(self.architectures)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ReferenceSample:
        """The inverse of :meth:`to_dict`."""
        return cls(raw["values"], int(raw["seed"]), tuple(raw.get("architectures", ())))


def combine(parts: Sequence[str], values: Mapping[str, float], reference: ReferenceSample
            ) -> tuple[float, dict[str, float]]:
    """The combination's value (mean of the parts' standardised values, each oriented so that higher
    is better) and each part's standardised value."""
    scores = {}
    for part in parts:
        log, mean, sd = reference.scale(part)
        v = float(values[part])
        if math.isnan(v):
            return float("nan"), {}
        t = math.log(max(v, 1e-300)) if log else v
        z = (t - mean) / sd
        scores[part] = z if get_proxy(part).direction == "maximize" else -z
    return float(np.mean(list(scores.values()))), scores


def parse_combination(name: str) -> tuple[str, ...]:
    """The parts of a combination name (``"a+b"``); a clear error for an unknown or repeated part."""
    parts = tuple(p.strip() for p in name.split("+"))
    known = list_base_proxies()
    for part in parts:
        if part not in known:
            raise InputError(f"unknown proxy {part!r} in the combination {name!r}; registered proxies: "
                             f"{', '.join(known)}")
    if len(set(parts)) != len(parts) or len(parts) < 2:
        raise InputError(f"a combination names at least two different proxies joined by '+', got {name!r}")
    return parts


def _combination_fn(parts: tuple[str, ...]) -> Callable[..., ProxyResult]:
    def fn(model: CandidateModel, batch: TextBatch, *, reference: ReferenceSample | None = None,
           **options: Any) -> ProxyResult:
        if reference is None:
            raise InputError(f"the combination {'+'.join(parts)!r} needs a reference sample (ReferenceSample): "
                             "ZeroCostObjective draws and records one in the study")
        values, kept = {}, {}
        for part, result in compute_parts(parts, model, batch, **options).items():
            values[part] = result.value
            kept.update({k: v for k, v in result.parts.items() if k in _KEPT_PARTS})
        value, scores = combine(parts, values, reference)
        out = {**kept, **{p: values[p] for p in parts}, **{f"{p}.z": round(z, 4) for p, z in scores.items()}}
        return ProxyResult(value, out)

    return fn


def combination_spec(name: str) -> ProxySpec:
    """The proxy of a combination name (see :func:`parse_combination`)."""
    parts = parse_combination(name)
    return ProxySpec(
        name=name,
        fn=_combination_fn(parts),
        needs_grad=any(get_proxy(p).needs_grad for p in parts),
        description="mean of standardised " + ", ".join(parts) + " (scale from a reference sample)",
        parts=parts,
    )


set_combination_factory(combination_spec)


def draw_reference(
    parts: Sequence[str],
    sample: Callable[[np.random.Generator], Any],
    score: Callable[[Any], Mapping[str, float]],
    *,
    size: int = DEFAULT_REFERENCE_SIZE,
    seed: int = 0,
    fits: Callable[[Any], bool] = lambda arch: True,
    to_params: Callable[[Any], dict[str, Any]] | None = None,
    max_draws: int = 100,
    progress: Callable[[int], Any] | None = None,
) -> ReferenceSample:
    """Draw ``size`` architectures with ``sample(rng)`` (seeded) that ``fits``, and score each.

    Args:
        parts: The proxies to record.
        sample: Draws one architecture from a numpy generator (``space.sample``).
        score: ``{part: value}`` of one architecture.
        size: How many architectures.
        seed: The seed of the draw.
        fits: Whether an architecture is within the search's budget (others are drawn again).
        to_params: How an architecture is recorded (``space.to_params``).
        max_draws: Draws per architecture before giving up on a budget that almost nothing fits.
        progress: Called with 1 after each architecture is scored (a progress bar's ``update``).
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 2:
        raise InputError(f"the reference sample needs at least 2 architectures, got {size!r}")
    rng = np.random.default_rng(seed)
    archs: list[Any] = []
    for _ in range(size * max_draws):
        arch = sample(rng)
        if fits(arch):
            archs.append(arch)
            if len(archs) == size:
                break
    if len(archs) < size:
        raise InputError(f"only {len(archs)} of {size * max_draws} random architectures fit the budget; "
                         "a reference sample of the space cannot be drawn")
    values: dict[str, list[float]] = {p: [] for p in parts}
    for arch in archs:
        scored = score(arch)
        for p in parts:
            values[p].append(float(scored[p]))
        if progress is not None:
            progress(1)
    return ReferenceSample(values, seed, tuple(to_params(a) for a in archs) if to_params else ())


register_combination("vpca_params_saliency", "vpca+params+synaptic_saliency",
                     description="mean of standardised V-PCA, parameter count and synaptic saliency "
                                 "(the default of 0.2; scale from a reference sample)")
register_combination("wpca_saliency", "wpca+synaptic_saliency",
                     description="mean of standardised W-PCA and synaptic saliency (the decoders' default; "
                                 "scale from a reference sample)")

#: The search's default objective per family of spaces (``SearchSpace.family``): what
#: ``benchmarks/objective_rule.py --batch 16x128`` chose by the pick under a budget at the search's own
#: 16 x 128 minibatch, on NAS-Bench-BERT (encoders) and the LTS GPT-2 decoders (docs/benchmarks.md,
#: "The rule, the candidates, the decision").
DEFAULT_OBJECTIVES: dict[str, str] = {"encoder": "wpca", "decoder": "wpca_saliency"}


def default_objective(space: Any) -> str:
    """The search's default objective for ``space``, by its family.

    Example:
        >>> from optuna_wpca.spaces import DecoderSpace, WPCASpace
        >>> default_objective(WPCASpace.small()), default_objective(DecoderSpace.lts_gpt2())
        ('wpca', 'wpca_saliency')
    """
    family = getattr(space, "family", "encoder")
    if family not in DEFAULT_OBJECTIVES:
        raise InputError(f"no default objective for the space family {family!r}; "
                         f"known: {', '.join(DEFAULT_OBJECTIVES)} (pass a proxy by name)")
    return DEFAULT_OBJECTIVES[family]
