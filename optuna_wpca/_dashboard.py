"""What optuna-dashboard shows of a search: an architecture picture per trial and study notes."""

from __future__ import annotations

import os
import tempfile
from html import escape
from typing import TYPE_CHECKING, Any

import optuna

from optuna_wpca import _attributes as attr
from optuna_wpca.spaces import Architecture, SearchSpace
from optuna_wpca._optuna_private import storage_url

if TYPE_CHECKING:
    from optuna_wpca._record import SearchRecord

_OTHER_COLOUR = "#8172B3"


def _look(space: SearchSpace, kind: str) -> tuple[str, str]:
    """``(display name, colour)`` of a block kind, as the space declares it."""
    return space.block_kinds.get(kind, (kind, _OTHER_COLOUR))


def _short(value: float) -> str:
    """3 significant digits with a k/M/G suffix: 15,698,112 -> '15.7M'."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _headline_value(label: str, value: float) -> str:
    """``latency (ms)``, 6.5 -> ``latency 6.5 ms``; a unitless score as ``wpca 2.9G``."""
    if label.endswith(")") and " (" in label:
        name, unit = label[:-1].split(" (", 1)
        return f"{name} {_short(value)} {unit}"
    return f"{label} {_short(value)}"


def format_value(value: float) -> str:
    """A proxy value in full: whole or large ones with thousands separators (a W-PCA score is a product of
    counts), others to 4 significant digits; the dashboard's notes and the model card both write values so."""
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 1e4 else f"{value:.4g}"


def architecture_svg(space: SearchSpace, arch: Architecture, *, title: str = "",
                     values: dict[str, float] | None = None, pca_dims: list[int] | None = None) -> str:
    """A picture of the architecture drawn to be read as optuna-dashboard's 200 x 150 thumbnail too.

    800 x 600: the parameter count and the proxy values in large type at the top, a colour legend of
    the block types, then one bar per layer, coloured by block type and as long as its FFN is wide,
    with the PCA dim of its FFN activations (W-PCA's per-layer count) as a dark inner bar. Every
    picture of a space is drawn on one scale, the space's widest FFN, so two trials' thumbnails
    compare by eye.

    Example:
        >>> from optuna_wpca import WPCASpace
        >>> svg = architecture_svg(WPCASpace.tiny(), WPCASpace.tiny().sample(0), values={"wpca": 2.9e9})
        >>> svg.startswith("<svg") and svg.count('class="layer"') == 6 and "wpca 2.9G" in svg
        True
    """
    width, height, left, right = 800, 600, 120, 150
    n = arch.num_layers
    widest = max([space.widest_ffn(), *(int(layer.ffn_size) for layer in arch.layers)])
    scale = (width - left - right) / widest
    top = 190
    row = (height - top - 10) / n
    bar = max(4.0, row * 0.72)
    font = max(10, min(26, int(row * 0.7)))
    headline = title or f"{_short(space.num_params(arch))} parameters"
    # the proxies' own values (a label carries its unit: "latency (ms) 6.5" reads "latency 6.5 ms")
    value_line = "   ".join(_headline_value(k, v) for k, v in (values or {}).items() if ": " not in k)
    kinds = list(dict.fromkeys(space.block_kind(layer) for layer in arch.layers))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="DejaVu Sans, Arial, sans-serif">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="16" y="66" font-size="60" font-weight="bold">{escape(headline)}</text>',
        f'<text x="16" y="122" font-size="40" fill="#222">{escape(value_line or f"{n} layers, hidden {arch.hidden_size}")}</text>',
    ]
    x = 16
    for kind in kinds:
        label, colour = _look(space, kind)
        parts.append(f'<rect x="{x}" y="142" width="30" height="30" fill="{colour}"/>')
        parts.append(f'<text x="{x + 38}" y="168" font-size="28">{escape(label)}</text>')
        x += 38 + 17 * len(label) + 30
    if pca_dims:  # the swatch is drawn as the bars are: a dark inner bar over a block's colour
        parts.append(f'<rect x="{x}" y="142" width="30" height="30" fill="{_look(space, kinds[0])[1]}"/>')
        parts.append(f'<rect x="{x}" y="149.5" width="30" height="15" fill="#222" opacity="0.55"/>')
        parts.append(f'<text x="{x + 38}" y="168" font-size="28">PCA dim</text>')
    for i, layer in enumerate(arch.layers):
        y = top + i * row
        ffn = int(layer.ffn_size)
        colour = _look(space, space.block_kind(layer))[1]
        dim = pca_dims[i] if pca_dims and i < len(pca_dims) else None
        parts.append(f'<g class="layer"><text x="16" y="{y + bar * 0.8:.1f}" font-size="{font}">L{i}</text>')
        parts.append(f'<rect x="{left}" y="{y:.1f}" width="{max(3.0, ffn * scale):.1f}" height="{bar:.1f}" '
                     f'fill="{colour}"/>')
        if dim is not None:
            parts.append(f'<rect x="{left}" y="{y + bar * 0.25:.1f}" width="{max(2.0, min(dim, ffn) * scale):.1f}" '
                         f'height="{bar * 0.5:.1f}" fill="#222" opacity="0.55"/>')
        text = f"{ffn}" + (f" / {dim}" if dim is not None else "")
        parts.append(f'<text x="{left + ffn * scale + 8:.1f}" y="{y + bar * 0.8:.1f}" font-size="{font}">'
                     f"{text}</text></g>")
    parts.append("</svg>")
    return "\n".join(parts)


def _export_line(trial: optuna.Trial) -> str:
    """The CLI line that exports this trial (the storage URL where it can be read back)."""
    url = storage_url(trial.study) or "URL"
    return f"optuna-wpca export --storage {url} --study-name {trial.study.study_name} --trial {trial.number} --out DIR"


def architecture_markdown(space: SearchSpace, arch: Architecture, attrs: dict[str, Any] | None = None, *,
                          values: dict[str, float] | None = None, export: str | None = None) -> str:
    """The trial's dashboard note: the proxy values, a fixed-width layer table (choice, FFN width,
    PCA dim) that stays aligned in any Markdown renderer, and the export command."""
    attrs = attrs or {}
    dims = list(attrs.get(attr.PCA_DIMS) or [])
    dims += [None] * (arch.num_layers - len(dims))
    lines = [f"**{space.num_params(arch):,} parameters** ({space.count}), {arch.num_layers} layers, "
             f"hidden {arch.hidden_size}", ""]
    if values:
        lines += ["| proxy | value |", "|---|---|"] + [f"| {k} | {format_value(v)} |" for k, v in values.items()] + [""]
    described = space.describe(arch)
    w = max(len(d) for d in described)
    table = [f"{'layer':>5}  {'choice':<{w}}  {'PCA dim':>7}"]
    table += [f"{i:>5}  {d:<{w}}  {'' if dim is None else dim:>7}" for i, (d, dim) in enumerate(zip(described, dims))]
    lines += ["```", *table, "```"]
    if attrs.get(attr.REFINED_FROM) is not None:
        lines += ["", f"Refined from trial {attrs[attr.REFINED_FROM]} by `optuna-wpca refine` (heads by CKA, FFN "
                  "widths by PCA dim, within the budget)."]
    if export:
        lines += ["", "Export it as a transformers directory:", "", "```", export, "```"]
    return "\n".join(lines)


def upload_architecture(
    trial: optuna.Trial, space: SearchSpace, arch: Architecture, artifact_store: Any, note: bool = True,
    values: dict[str, float] | None = None,
) -> str:
    """Attach the architecture picture (an SVG artifact named ``trial-NNNNN-architecture.svg``) and
    the layer note (a dashboard note) to ``trial``; returns the artifact id."""
    dims = trial.user_attrs.get(attr.PCA_DIMS)
    svg = architecture_svg(space, arch, values=values, pca_dims=dims)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"trial-{trial.number:05d}-architecture.svg")
        with open(path, "w") as f:
            f.write(svg)
        artifact_id = optuna.artifacts.upload_artifact(
            artifact_store=artifact_store, file_path=path, study_or_trial=trial, mimetype="image/svg+xml"
        )
    if note:
        import optuna_dashboard

        optuna_dashboard.save_note(trial, architecture_markdown(space, arch, trial.user_attrs, values=values,
                                                                export=_export_line(trial)))
    return artifact_id


def save_study_note(study: optuna.Study, record: SearchRecord) -> None:
    """The study's dashboard note: its space, budget, proxies and minibatch."""
    import optuna_dashboard

    space = record.space
    config = ", ".join(f"{k}={v}" for k, v in space.config().items())
    budget = record.budget.describe() + ("" if not record.budget.is_set else f" ({space.count})")
    proxies = ", ".join(f"`{p}`" for p in record.proxies) if record.proxies else "not recorded yet"
    if record.minibatch is not None:
        batch = record.minibatch.describe()
    else:
        batch = "x".join(map(str, record.batch)) + " (sequences x tokens)" if record.batch else "not recorded yet"
    seeds = ", ".join(f"{what} {value}" for what, value in (("initialisation seed", record.init_seed),
                                                            ("eta", record.eta)) if value is not None)
    optuna_dashboard.save_note(
        study,
        f"## optuna-wpca search\n\n- space: `{space.kind}` ({config})\n- budget: {budget}\n"
        f"- proxy: {proxies}\n- minibatch: {batch}\n" + (f"- {seeds}\n" if seeds else ""),
    )
