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
    ['| objective 0 | 1 |  |']
"""

from __future__ import annotations

from typing import Any

import optuna

from optuna_wpca import _attributes as attr
from optuna_wpca._dashboard import format_value


def _scores(study: optuna.Study, trial: optuna.trial.FrozenTrial, record: Any) -> list[tuple[str, str, str]]:
    """``(score, value with unit, what it is)`` rows: the trial's objective values and, for a combined
    objective, its parts; settings, counts and bookkeeping are not scores."""
    from optuna_wpca.proxies import get_proxy

    if record is not None and record.task:  # a distillation trial: its value is the dev metric
        return [(f"dev {trial.user_attrs.get(attr.METRIC, 'score')}", format_value(trial.value),
                 f"on {record.task} after knowledge distillation")]
    proxies = list(record.proxies) if record is not None and record.proxies else []
    rows = []
    for i, value in enumerate(trial.values or []):
        name = proxies[i] if i < len(proxies) else f"objective {i}"
        try:
            spec = get_proxy(name)
        except ValueError:
            rows.append((name, format_value(value), ""))
            continue
        unit = f" {spec.unit}" if spec.unit else ""
        what = spec.description
        shape = trial.user_attrs.get(f"{name}.input")
        if shape:
            what += f"; measured on {shape[0]} x {shape[1]} tokens on {trial.user_attrs.get(f'{name}.device', 'cpu')}"
        rows.append((name, format_value(value) + unit, what))
        for part in spec.parts:
            if f"{name}.{part}" in trial.user_attrs:
                z = trial.user_attrs.get(f"{name}.{part}.z")
                rows.append((f"{name}: {part}", format_value(trial.user_attrs[f"{name}.{part}"]),
                             "part of the combination" + (f", {z:+.2f} sd from the reference sample's mean"
                                                          if isinstance(z, (int, float)) else "")))
    return rows


def _search_lines(study: optuna.Study, record: Any, trial: optuna.trial.FrozenTrial) -> list[str]:
    """How the trial was found: budget, minibatch, corpus, seeds, the reference sample, the GA."""
    if record is None:
        return [f"Study `{study.study_name}`, trial {trial.number}; the study records no optuna-wpca search."]
    if record.task:
        source = trial.user_attrs.get(attr.SOURCE_TRIAL)
        return [f"- Distilled on `{record.task}` as trial {trial.number} of study `{study.study_name}`, from "
                f"trial {source} of the zero-cost study `{record.source_study}`."]
    lines = [f"- Study `{study.study_name}`, trial {trial.number}; objective: "
             f"{', '.join(f'`{p}`' for p in record.proxies or ()) or 'not recorded'}.",
             f"- Parameter budget: {record.budget.describe()}"
             + (f" (counted as {record.space.count!r})" if record.budget.is_set else "") + "."]
    if record.minibatch is not None:
        lines.append(f"- Minibatch: {record.minibatch.describe()}.")
    elif record.batch:
        lines.append(f"- Minibatch: {record.batch[0]} x {record.batch[1]} tokens (sequences x tokens); where it "
                     "came from is not recorded (a batch made by hand, or a study searched before 0.3).")
    seeds = [f"{what} {value}" for what, value in (("initialisation seed", record.init_seed), ("eta", record.eta))
             if value is not None]
    if seeds:
        lines.append(f"- {'; '.join(seeds).capitalize()}.")
    if record.reference:
        lines.append(f"- Reference sample that scales the combined objective: {record.reference['size']} "
                     f"architectures within the budget, drawn with seed {record.reference['seed']}.")
    parent = trial.user_attrs.get(attr.REFINED_FROM)
    if parent is not None:
        lines.append(f"- Refined from trial {parent} by `optuna-wpca refine` (ELM's refinement: heads that repeat "
                     "each other dropped by CKA where the space has head genes, FFN widths moved to the PCA dims of "
                     "their activations, within the budget), then scored as this trial.")
    if record.ga:
        settings = ", ".join(f"{k} {v}" for k, v in record.ga.items())
        generations = _generations(study)
        generation = generations.get(parent if parent is not None else trial.number)
        reached = max(generations.values()) + 1 if generations else 0
        found = (f"trial {parent}, the one refined," if parent is not None else "this trial") + " came from "
        where = (f"generation {generation} of the {reached} generations the study has run" if generation is not None
                 else f"the enqueued trials (the study has run {reached} generations)")
        lines.append(f"- GA (W-PCA paper, Appendix E): {settings}; {found}{where}.")
    return lines


def _generations(study: optuna.Study) -> dict[int, int]:
    """``{trial number: GA generation}`` of the trials the GA sampled."""
    from optuna_wpca.sampler import WPCASampler

    key = WPCASampler._get_generation_key()
    return {t.number: int(t.system_attrs[key]) for t in study.get_trials(deepcopy=False) if key in t.system_attrs}


def _pick_lines(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> list[str]:
    """The second stage's part of the story, when ``optuna-wpca pick`` ran on the study."""
    from optuna_wpca.pick import pick_lines, read_pick

    record = read_pick(study)
    if record is None:
        return []
    verdict = ("It is the second stage's pick" if record["zero_cost_trial"] == trial.number
               else f"The second stage picked trial {record['zero_cost_trial']}, not this one")
    return ["", f"{verdict}: the top {len(record['shortlist'])} of the zero-cost ranking each trained briefly by "
            f"`optuna-wpca pick` ({record['signal']}, {record['protocol']['steps']} steps, pruner "
            f"{record['protocol']['pruner']}), lowest {record['loss_name']} chosen:", "", "```",
            *pick_lines(record), "```"]


def model_card(study: optuna.Study, trial: optuna.trial.FrozenTrial, space: Any, arch: Any, *, trained: bool,
               seed: int, command: str | None = None) -> str:
    """The text of ``README.md`` for ``trial``'s architecture exported from ``study``."""
    from optuna_wpca._record import read_search

    try:
        record = read_search(study)
    except ValueError:
        record = None
    scores = _scores(study, trial, record)
    counts = {c: space.num_params(arch, c) for c in ("all", "non_embedding")}
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
        f"- Parameters: {counts['all']:,} in all; {counts['non_embedding']:,} without the embedding tables. The "
        f"search's budget counts {space.count!r} ({space.num_params(arch):,}).",
        f"- {state}",
        "",
        "## Architecture",
        "",
        "| layer | block |",
        "|---|---|",
        *[f"| {i} | {line} |" for i, line in enumerate(space.describe(arch))],
        "",
        "## Scores",
        "",
        "| score | value | what it is |",
        "|---|---|---|",
        *[f"| {name} | {value} | {what} |" for name, value, what in scores],
        "",
        "## How it was found",
        "",
        *_search_lines(study, record, trial),
        *_pick_lines(study, trial),
        "",
        "The search space and the architecture are in `architecture.json`."
        + (f" Exported with `{command}`." if command else ""),
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
