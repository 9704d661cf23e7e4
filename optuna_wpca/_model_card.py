"""The model card (``README.md``) of an exported architecture: what it is, how it was found, how to load it.

Example:
    >>> import optuna, tempfile
    >>> from optuna_wpca import WPCASpace
    >>> space = WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
    >>> study = optuna.create_study(study_name="demo")
    >>> trial = study.ask()
    >>> arch = space.suggest(trial)
    >>> _ = study.tell(trial, 1.0)
    >>> card = model_card(study, study.trials[0], space, arch, trained=False, seed=0)
    >>> [line for line in card.splitlines() if line.startswith("| objective 0")]
    ['| objective 0 | 1 |']
"""

from __future__ import annotations

import numbers
from typing import Any

import optuna

#: User attributes that the card shows elsewhere or that say nothing about the model.
_NOT_SCORES = {"num_params", "architecture", "cached", "seconds", "pca_dims", "optuna_wpca.feasible"}


def _number(value: float) -> str:
    """Whole or large values with thousands separators (a W-PCA score is a product of counts), others to 4 digits."""
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 1e4 else f"{value:.4g}"


def model_card(study: optuna.Study, trial: optuna.trial.FrozenTrial, space: Any, arch: Any, *, trained: bool,
               seed: int, command: str | None = None) -> str:
    """The text of ``README.md`` for ``trial``'s architecture exported from ``study``."""
    names = study.metric_names or [f"objective {i}" for i in range(len(trial.values or []))]
    scores = [(name, value) for name, value in zip(names, trial.values or [])]
    scores += [(k, v) for k, v in sorted(trial.user_attrs.items())
               if k not in _NOT_SCORES and isinstance(v, numbers.Real) and not isinstance(v, bool)]
    kind = "encoder" if getattr(space, "kind", "") != "decoder" else "decoder"
    if trained:
        state = ("Trained: distilled on a task by `optuna-wpca distill` (knowledge distillation from a BERT "
                 "teacher, W-PCA paper Appendix F); the task head is included.")
        load = ("from transformers import AutoTokenizer, AutoModelForSequenceClassification, pipeline\n"
                "model = AutoModelForSequenceClassification.from_pretrained(path)\n"
                "classify = pipeline(\"text-classification\", model=path)")
    else:
        state = (f"Untrained: weights are the seeded random initialisation (seed {seed}) under which the "
                 "zero-cost proxy scored it. Train it (pretraining, or `optuna-wpca distill`) before use.")
        load = "from transformers import AutoModel\nmodel = AutoModel.from_pretrained(path)"
    lines = [
        "---",
        "library_name: transformers",
        "tags:",
        "- optuna-wpca",
        "- neural-architecture-search",
        "- zero-cost-proxy",
        "---",
        "",
        f"# {study.study_name}, trial {trial.number}",
        "",
        f"A {len(arch.layers)}-layer {kind} found by a training-free architecture search with optuna-wpca "
        "(W-PCA, arXiv 2504.15983).",
        "",
        f"- Parameters: {space.num_params(arch):,} (counted as {space.count!r}, the search space's convention)",
        f"- {state}",
        "",
        "## Architecture",
        "",
        "| layer | block |",
        "|---|---|",
        *[f"| {i} | {line} |" for i, line in enumerate(space.describe(arch))],
        "",
        "## Scores in the study",
        "",
        "| name | value |",
        "|---|---|",
        *[f"| {name} | {_number(value)} |" for name, value in scores],
        "",
        "## How it was made",
        "",
        f"Study `{study.study_name}`, trial {trial.number}; the search space and architecture are in "
        "`architecture.json`.",
        *([f"Exported with `{command}`."] if command else []),
        "",
        "## Loading",
        "",
        "```python",
        "import optuna_wpca  # registers the model types with transformers' Auto classes",
        "path = \"this/directory\"",
        load,
        "```",
        "",
    ]
    return "\n".join(lines)
