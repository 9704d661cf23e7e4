"""The distillation losses: the W-PCA paper's Appendix F (MSE on features, soft cross-entropy on
logits) and ELM's relational ones (PKD on features, DIST on logits) as options."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from optuna_wpca._errors import InputError


def soft_cross_entropy(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Cross-entropy of the student's softmax against the teacher's, averaged over examples.

    ``-sum_c p_teacher(c) log p_student(c)`` at ``temperature``; equals the KL divergence plus the
    teacher's entropy, so its gradient is the KL's.
    """
    t = temperature
    target = F.softmax(teacher_logits / t, dim=-1)
    return -(target * F.log_softmax(student_logits / t, dim=-1)).sum(-1).mean()


#: Feature losses (embeddings, attention outputs, layer outputs) and logit losses ``kd_loss`` takes.
FEATURE_LOSSES = ("mse", "pkd")
LOGIT_LOSSES = ("soft_ce", "dist")


def pkd_loss(student: torch.Tensor, teacher: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """MSE after standardising every channel over the tokens of each sequence, so that only the
    pattern of a channel across tokens is matched, not its scale or offset (Pearson-correlation
    matching, as ELM's PKD). ``student`` and ``teacher`` are (batch, tokens, width)."""

    def standardise(x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(dim=1, keepdim=True)) / (x.std(dim=1, keepdim=True) + eps)

    return F.mse_loss(standardise(student), standardise(teacher))


def _pearson(a: torch.Tensor, b: torch.Tensor, dim: int, eps: float = 1e-8) -> torch.Tensor:
    a = a - a.mean(dim, keepdim=True)
    b = b - b.mean(dim, keepdim=True)
    return (a * b).sum(dim) / (a.norm(dim=dim) * b.norm(dim=dim) + eps)


def dist_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0,
              beta: float = 1.0, gamma: float = 1.0) -> torch.Tensor:
    """DIST: with p = softmax(z / t), ``t^2 [beta (1 - mean over examples of Pearson(p_s, p_t) across
    classes) + gamma (1 - mean over classes of Pearson across the batch)]``: the inter-class and
    intra-class relations of the predictions rather than their values. (With two classes the
    inter-class term is 0 or 2 by construction: two points always correlate perfectly.)"""
    t = temperature
    p_s = F.softmax(student_logits / t, dim=-1)
    p_t = F.softmax(teacher_logits / t, dim=-1)
    inter = 1 - _pearson(p_s, p_t, dim=1).mean()
    intra = 1 - _pearson(p_s, p_t, dim=0).mean()
    return t * t * (beta * inter + gamma * intra)


class Projections(nn.Module):
    """Learned linear maps from student widths to the teacher's width (W_e, W_a, W_h).

    One map per distinct (kind, student width): a MobileBERT block's 132-wide attention output
    gets its own map, as in the reference code.
    """

    def __init__(self, student_widths: dict[str, set[int]], teacher_width: int) -> None:
        super().__init__()
        self.teacher_width = teacher_width
        self.maps = nn.ModuleDict(
            {f"{kind}_{w}": nn.Linear(w, teacher_width) for kind, widths in student_widths.items() for w in sorted(widths)}
        )

    def forward(self, kind: str, x: torch.Tensor) -> torch.Tensor:
        key = f"{kind}_{x.shape[-1]}"
        if key not in self.maps:
            raise InputError(f"no projection for {kind} outputs of width {x.shape[-1]}")
        return self.maps[key](x)


def kd_loss(
    student: dict[str, list[torch.Tensor] | torch.Tensor],
    teacher: dict[str, list[torch.Tensor] | torch.Tensor],
    projections: Projections,
    mapping: list[int],
    *,
    gamma: float = 0.0,
    temperature: float = 1.0,
    feature_loss: str = "mse",
    logit_loss: str = "soft_ce",
) -> tuple[torch.Tensor, dict[str, float]]:
    """The feature loss on embeddings, attention-block outputs and layer (FFN) outputs through the
    projections, plus ``gamma`` x the logit loss.

    ``feature_loss``: ``"mse"`` (the paper's) or ``"pkd"`` (:func:`pkd_loss`); ``logit_loss``:
    ``"soft_ce"`` (the paper's) or ``"dist"`` (:func:`dist_loss`). ``student`` / ``teacher`` hold
    ``embeddings`` (B, N, W), ``attention`` and ``ffn`` (lists of (B, N, W) per layer) and
    optionally ``logits``; ``mapping[i]`` is the teacher layer of student layer i.
    """
    if feature_loss not in FEATURE_LOSSES:
        raise InputError(f"unknown feature_loss {feature_loss!r}; use one of {FEATURE_LOSSES}")
    if logit_loss not in LOGIT_LOSSES:
        raise InputError(f"unknown logit_loss {logit_loss!r}; use one of {LOGIT_LOSSES}")
    match = F.mse_loss if feature_loss == "mse" else pkd_loss
    emb = match(projections("embeddings", student["embeddings"]), teacher["embeddings"])
    att = sum(
        match(projections("attention", s), teacher["attention"][j]) for s, j in zip(student["attention"], mapping)
    )
    ffn = sum(match(projections("ffn", s), teacher["ffn"][j]) for s, j in zip(student["ffn"], mapping))
    total = emb + att + ffn
    parts = {"embeddings": emb.item(), "attention": att.item(), "ffn": ffn.item()}
    if gamma and "logits" in student and "logits" in teacher:
        if logit_loss == "soft_ce":
            ce = soft_cross_entropy(student["logits"], teacher["logits"], temperature)
        else:
            ce = dist_loss(student["logits"], teacher["logits"], temperature)
        total = total + gamma * ce
        parts["logits"] = ce.item()
    return total, parts
