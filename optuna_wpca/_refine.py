"""ELM's refinement of a found architecture: fewer heads where heads repeat each other (CKA), FFN
widths moved to what the layer's activations use (PCA), within the study's budget.

ELM (arXiv 2510.27037) makes heads and widths elastic. What could be read of it (the author's code,
``../shared/REFERENCE.md``) is followed where known; the rest is chosen here and made an option:

- Heads: per layer, each head's output on the minibatch (its context vectors, one row per sequence),
  linear CKA between heads; heads are visited in order and one whose CKA with a kept head exceeds
  ``cka_threshold`` (0.9) is dropped; the kept count is rounded down to a head count of the space
  (a divisor of the attention width). Only an :class:`~optuna_wpca.ELMSpace` has head genes.
- Widths (our rule; ELM grows the widths of high-PCA-dim candidates during supernet training): a
  layer whose PCA dim (eta 0.99) fills its FFN (at least ``saturation`` x width) grows one step of
  the grid; any other moves to the narrowest grid width that holds its PCA dim. Changes that would
  leave the budget are undone, the costliest first.

Example:
    >>> import torch
    >>> x = torch.randn(64, 10, generator=torch.Generator().manual_seed(0))
    >>> round(linear_cka(x, x), 6), round(linear_cka(x, 3 * x), 6)
    (1.0, 1.0)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import optuna
import torch

from optuna_wpca._errors import InputError
from optuna_wpca import _attributes as attr
from optuna_wpca._budget import Budget
from optuna_wpca._record import read_search
from optuna_wpca._text import TextBatch
from optuna_wpca.models import WPCALayerConfig
from optuna_wpca.proxies import DEFAULT_ETA, layer_pca_dims
from optuna_wpca.spaces import Architecture, ELMSpace, SearchSpace, WPCASpace

_logger = optuna.logging.get_logger("optuna.optuna_wpca.refine")

#: The user attribute of a refined trial: the number of the trial it was refined from.
#: Trial user attribute of a refined trial: its parent trial (kept under this name for callers of 0.2).
REFINED_FROM_ATTR = attr.REFINED_FROM


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA between two representations of the same examples (rows): HSIC of the double-
    centred Gram matrices, normalised; 1 for representations equal up to rotation and scale."""
    if x.shape[0] != y.shape[0] or x.shape[0] < 2:
        raise InputError(f"CKA needs the same >= 2 examples in both, got {x.shape[0]} and {y.shape[0]}")
    x = x.flatten(1).double()
    y = y.flatten(1).double()
    x = x - x.mean(0)
    y = y - y.mean(0)
    # With centred columns, tr(Kc Lc) = ||y^T x||_F^2 for K = x x^T and L = y y^T.
    hsic = (y.T @ x).square().sum()
    norm = torch.sqrt((x.T @ x).square().sum() * (y.T @ y).square().sum())
    return float(hsic / norm) if norm > 0 else 0.0


def head_cka(model: torch.nn.Module, batch: TextBatch) -> list[torch.Tensor]:
    """Per layer, the heads x heads matrix of linear CKA between the heads' outputs (one row per
    sequence: its tokens' context vectors), from one forward pass without gradients."""
    outputs: list[torch.Tensor] = []
    attentions = [layer.attention for layer in model.layers]
    handles = [a.head_outputs.register_forward_hook(lambda _m, _i, out: outputs.append(out.detach()))
               for a in attentions]
    try:
        with torch.inference_mode():
            model(**batch.to(next(model.parameters()).device).as_kwargs())
    finally:
        for h in handles:
            h.remove()
    matrices = []
    for out in outputs:  # (batch, heads, tokens, head_dim)
        heads = [out[:, i].reshape(out.shape[0], -1) for i in range(out.shape[1])]
        m = torch.eye(len(heads), dtype=torch.float64)
        for i in range(len(heads)):
            for j in range(i + 1, len(heads)):
                m[i, j] = m[j, i] = linear_cka(heads[i], heads[j])
        matrices.append(m)
    return matrices


def kept_heads(cka: torch.Tensor, threshold: float) -> list[int]:
    """Heads kept by the greedy pass: a head is dropped when its CKA with a kept head exceeds ``threshold``."""
    kept: list[int] = []
    for h in range(cka.shape[0]):
        if not kept or max(float(cka[h, k]) for k in kept) <= threshold:
            kept.append(h)
    return kept


@dataclasses.dataclass(frozen=True)
class Refinement:
    """What :func:`refine_architecture` changed, layer by layer."""

    before: Architecture
    architecture: Architecture
    pca_dims: list[int]
    kept_heads: list[int]
    reverted_layers: list[int]

    @property
    def changed(self) -> bool:
        """Whether the refined architecture differs from the source."""
        return self.architecture != self.before


def refine_architecture(
    space: SearchSpace, arch: Architecture, batch: TextBatch, *, budget: Budget | None = None,
    cka_threshold: float = 0.9, heads: bool = True, widths: bool = True, eta: float = DEFAULT_ETA,
    saturation: float = 0.99, seed: int = 0, device: Any = "cpu",
) -> Refinement:
    """Refine ``arch`` (see the module doc); the result is in ``space`` and within ``budget``."""
    if not isinstance(space, WPCASpace):
        raise InputError(f"refine works on the W-PCA and ELM spaces (BERT / MobileBERT blocks), not {space.kind!r}")
    if not 0 < cka_threshold <= 1:
        raise InputError(f"cka_threshold must be in (0, 1], got {cka_threshold}")
    budget = budget or Budget()
    model = space.build(arch, seed=seed, device=device)
    dims = layer_pca_dims(model, batch, eta=eta)
    ckas = head_cka(model, batch) if heads and isinstance(space, ELMSpace) else None
    if heads and ckas is None:
        _logger.info("the %s space has no head genes: only the FFN widths are refined", space.kind)
    layers, kept = list(arch.layers), []
    for i, layer in enumerate(arch.layers):
        n_heads = layer.heads
        if ckas is not None:
            count = len(kept_heads(ckas[i], cka_threshold))
            choices = space._head_choices(layer.block)
            n_heads = max((c for c in choices if c <= count), default=min(choices))
        kept.append(n_heads if n_heads is not None else 0)
        width = layer.ffn_size
        if widths:
            grid = [space.ffn_unit * k for k in space.ffn_mults]
            if dims[i] >= saturation * width:
                wider = [w for w in grid if w > width]
                width = min(wider) if wider else width
            else:
                holding = [w for w in grid if w >= dims[i]]
                width = min(holding) if holding else max(grid)
        layers[i] = WPCALayerConfig(layer.block, width, n_heads)
    reverted = []
    while not budget.contains(space.num_params(Architecture(arch.hidden_size, tuple(layers)))):
        # Undo the width change that moves the count furthest in the wrong direction.
        n = space.num_params(Architecture(arch.hidden_size, tuple(layers)))
        over = budget.max_params is not None and n > budget.max_params
        moved = [i for i in range(len(layers)) if layers[i].ffn_size != arch.layers[i].ffn_size and i not in reverted
                 and (layers[i].ffn_size > arch.layers[i].ffn_size) == over]
        if not moved:
            layers = [dataclasses.replace(new, ffn_size=old.ffn_size) for new, old in zip(layers, arch.layers)]
            break
        cost = {i: abs(space._layer_params(layers[i]) - space._layer_params(
            dataclasses.replace(layers[i], ffn_size=arch.layers[i].ffn_size))) for i in moved}
        i = max(moved, key=cost.__getitem__)
        layers[i] = dataclasses.replace(layers[i], ffn_size=arch.layers[i].ffn_size)
        reverted.append(i)
    return Refinement(arch, Architecture(arch.hidden_size, tuple(layers)), dims, kept, sorted(reverted))


def refine(
    study: optuna.Study, trial_number: int, *, batch: TextBatch | None = None, **options: Any
) -> Refinement:
    """Refine a completed trial of a zero-cost study and enqueue the result as a new trial of the
    same study (user attribute ``refined_from``), so that the study's next trial scores it. The
    budget is the study's; ``batch`` defaults to the study's own minibatch, cut again from its
    recorded corpus (a clear error when that cannot be done), and the initialisation seed and eta
    to the recorded ones. ``options`` go to :func:`refine_architecture`. Nothing is enqueued when
    nothing changed.
    """
    record = read_search(study)
    matches = [t for t in study.get_trials(deepcopy=False) if t.number == trial_number]
    if not matches:
        raise InputError(f"study {study.study_name!r} has no trial {trial_number}")
    source = matches[0]
    if source.state != optuna.trial.TrialState.COMPLETE:
        raise InputError(f"trial {trial_number} is {source.state.name}; only a completed trial can be refined")
    space = record.space
    arch = space.from_params({k: v for k, v in source.params.items() if k in space.distributions()})
    if batch is None:
        batch = record.scoring_batch()
    recorded = {"seed": record.init_seed, "eta": record.eta}
    options = {**{k: v for k, v in recorded.items() if v is not None}, **options}
    result = refine_architecture(space, arch, batch, budget=record.budget, **options)
    if result.changed:
        study.enqueue_trial(space.to_params(result.architecture), user_attrs={REFINED_FROM_ATTR: trial_number},
                            skip_if_exists=False)
    return result
