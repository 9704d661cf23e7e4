"""What optuna-dashboard shows of a search: an architecture picture per trial and study notes."""

from __future__ import annotations

import os
import tempfile
from html import escape
from typing import TYPE_CHECKING, Any

import optuna

from optuna_wpca.spaces import Architecture, SearchSpace

if TYPE_CHECKING:
    from optuna_wpca._study import SearchRecord

_COLOURS = {"bert": "#4C72B0", "mobilebert": "#DD8452", "SA": "#4C72B0", "LT": "#55A868", "DSC": "#C44E52"}


def _layer_style(layer: Any) -> tuple[str, str, int]:
    """(label, colour, width) of one layer's bar."""
    kind = getattr(layer, "block", None) or getattr(layer, "operation", None) or "decoder"
    label = kind
    if hasattr(layer, "parameter"):
        label = f"{layer.operation}:{layer.parameter} x{layer.num_ffn}"
    if hasattr(layer, "heads") and not hasattr(layer, "block"):
        label += f" {layer.heads}h"
    return label, _COLOURS.get(kind, "#8172B3"), int(layer.ffn_size)


def architecture_svg(space: SearchSpace, arch: Architecture, *, title: str = "") -> str:
    """A layer-by-layer picture: one bar per layer, coloured by block type, as long as its FFN is wide.

    Example:
        >>> from optuna_wpca import WPCASpace
        >>> svg = architecture_svg(WPCASpace.tiny(), WPCASpace.tiny().sample(0))
        >>> svg.startswith("<svg") and svg.count("<rect") == 7
        True
    """
    rows = [_layer_style(layer) for layer in arch.layers]
    widest = max(width for _, _, width in rows)
    bar_h, gap, left, scale = 22, 6, 210, 360 / widest
    height = 40 + len(rows) * (bar_h + gap) + 24
    total_w = left + 360 + 110
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{height}" '
        f'font-family="sans-serif" font-size="13">',
        f'<rect width="{total_w}" height="{height}" fill="white"/>',
        f'<text x="10" y="22" font-weight="bold">{escape(title or f"{arch.num_layers} layers, hidden {arch.hidden_size}, {space.num_params(arch):,} parameters")}</text>',
    ]
    for i, (label, colour, width) in enumerate(rows):
        y = 36 + i * (bar_h + gap)
        parts.append(f'<text x="10" y="{y + 16}">layer {i:>2}  {escape(label)}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{max(2, width * scale):.1f}" height="{bar_h}" fill="{colour}"/>')
        parts.append(f'<text x="{left + width * scale + 6:.1f}" y="{y + 16}">FFN {width}</text>')
    parts.append(f'<text x="10" y="{height - 8}" fill="#555">bar length: FFN width</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def architecture_markdown(space: SearchSpace, arch: Architecture, attrs: dict[str, Any] | None = None) -> str:
    """The trial's dashboard note: one row per layer with its choice and PCA dim."""
    attrs = attrs or {}
    dims = attrs.get("pca_dims") or [None] * arch.num_layers
    lines = [f"**{arch.num_layers} layers, hidden {arch.hidden_size}, {space.num_params(arch):,} parameters "
             f"({space.count})**", "", "| layer | choice | PCA dim |", "|---|---|---|"]
    lines += [f"| {i} | {desc} | {d if d is not None else ''} |" for i, (desc, d) in enumerate(zip(space.describe(arch), dims))]
    return "\n".join(lines)


def upload_architecture(
    trial: optuna.Trial, space: SearchSpace, arch: Architecture, artifact_store: Any, note: bool = True
) -> str:
    """Attach the architecture picture (SVG artifact) and a layer table (dashboard note) to ``trial``."""
    fd, path = tempfile.mkstemp(prefix=f"trial-{trial.number}-architecture-", suffix=".svg")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(architecture_svg(space, arch, title=f"trial {trial.number}: {space.num_params(arch):,} parameters"))
        artifact_id = optuna.artifacts.upload_artifact(
            artifact_store=artifact_store, file_path=path, study_or_trial=trial, mimetype="image/svg+xml"
        )
    finally:
        os.unlink(path)
    trial.set_user_attr("architecture_artifact", artifact_id)
    if note:
        import optuna_dashboard

        optuna_dashboard.save_note(trial, architecture_markdown(space, arch, trial.user_attrs))
    return artifact_id


def save_study_note(study: optuna.Study, record: SearchRecord) -> None:
    """The study's dashboard note: its space, budget, proxies and minibatch."""
    import optuna_dashboard

    space = record.space
    config = ", ".join(f"{k}={v}" for k, v in space.config().items())
    budget = record.budget.describe() + ("" if not record.budget.is_set else f" ({space.count})")
    proxies = ", ".join(f"`{p}`" for p in record.proxies) if record.proxies else "not recorded yet"
    batch = "x".join(map(str, record.batch)) if record.batch else "not recorded yet"
    optuna_dashboard.save_note(
        study,
        f"## optuna-wpca search\n\n- space: `{space.kind}` ({config})\n- budget: {budget}\n"
        f"- proxy: {proxies}\n- minibatch: {batch} (sequences x tokens)\n",
    )
