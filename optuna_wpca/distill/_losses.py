"""The distillation losses of the W-PCA paper's Appendix F."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def soft_cross_entropy(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Cross-entropy of the student's softmax against the teacher's, averaged over examples.

    ``-sum_c p_teacher(c) log p_student(c)`` at ``temperature``; equals the KL divergence plus the
    teacher's entropy, so its gradient is the KL's.
    """
    t = temperature
    target = F.softmax(teacher_logits / t, dim=-1)
    return -(target * F.log_softmax(student_logits / t, dim=-1)).sum(-1).mean()


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
            raise ValueError(f"no projection for {kind} outputs of width {x.shape[-1]}")
        return self.maps[key](x)


def kd_loss(
    student: dict[str, list[torch.Tensor] | torch.Tensor],
    teacher: dict[str, list[torch.Tensor] | torch.Tensor],
    projections: Projections,
    mapping: list[int],
    *,
    gamma: float = 0.0,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """MSE on embeddings, attention-block outputs and layer (FFN) outputs through the projections,
    plus ``gamma`` x soft cross-entropy on logits.

    ``student`` / ``teacher`` hold ``embeddings`` (B, N, W), ``attention`` and ``ffn`` (lists of
    (B, N, W) per layer) and optionally ``logits``; ``mapping[i]`` is the teacher layer of
    student layer i.
    """
    emb = F.mse_loss(projections("embeddings", student["embeddings"]), teacher["embeddings"])
    att = sum(
        F.mse_loss(projections("attention", s), teacher["attention"][j]) for s, j in zip(student["attention"], mapping)
    )
    ffn = sum(F.mse_loss(projections("ffn", s), teacher["ffn"][j]) for s, j in zip(student["ffn"], mapping))
    total = emb + att + ffn
    parts = {"embeddings": emb.item(), "attention": att.item(), "ffn": ffn.item()}
    if gamma and "logits" in student and "logits" in teacher:
        ce = soft_cross_entropy(student["logits"], teacher["logits"], temperature)
        total = total + gamma * ce
        parts["logits"] = ce.item()
    return total, parts
