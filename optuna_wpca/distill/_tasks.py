"""GLUE-style tasks from local files, with GLUE's metrics."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr

from optuna_wpca._errors import InputError

#: Tasks bundled with the package (copied with their README and licence).
BUNDLED_TASKS = ("rt-sentiment", "snli")
SNLI_LABELS = ("entailment", "neutral", "contradiction")


def accuracy(pred: Sequence[Any], gold: Sequence[Any]) -> float:
    """Share of predictions equal to the labels."""
    return float(np.mean(np.asarray(pred) == np.asarray(gold)))


def f1(pred: Sequence[int], gold: Sequence[int]) -> float:
    """Binary F1 of the positive class (label 1), as GLUE scores MRPC and QQP."""
    p, g = np.asarray(pred), np.asarray(gold)
    tp = float(((p == 1) & (g == 1)).sum())
    fp = float(((p == 1) & (g != 1)).sum())
    fn = float(((p != 1) & (g == 1)).sum())
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def matthews(pred: Sequence[int], gold: Sequence[int]) -> float:
    """Matthews correlation (CoLA), binary."""
    p, g = np.asarray(pred) == 1, np.asarray(gold) == 1
    tp, tn = float((p & g).sum()), float((~p & ~g).sum())
    fp, fn = float((p & ~g).sum()), float((~p & g).sum())
    denom = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return 0.0 if denom == 0 else (tp * tn - fp * fn) / denom


def pearson_spearman(pred: Sequence[float], gold: Sequence[float]) -> float:
    """Mean of Pearson and Spearman correlations (STS-B)."""
    return float((pearsonr(pred, gold)[0] + spearmanr(pred, gold)[0]) / 2)


METRICS: dict[str, Callable[..., float]] = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews": matthews,
    "pearson_spearman": pearson_spearman,
}


@dataclass
class Task:
    """Examples as (text_a, text_b or None, label); ``num_labels`` 1 means regression."""

    name: str
    train: list[tuple[str, str | None, Any]]
    dev: list[tuple[str, str | None, Any]]
    num_labels: int
    metric: str = "accuracy"
    #: Class names, index = label (``id2label`` of a saved student); None: ``LABEL_i``.
    labels: tuple[str, ...] | None = None

    @property
    def is_regression(self) -> bool:
        """Whether the task has one continuous label (STS-B style)."""
        return self.num_labels == 1

    def score(self, pred: Sequence[Any], gold: Sequence[Any]) -> float:
        """The task's metric of predictions against labels."""
        return METRICS[self.metric](pred, gold)


def _bundled(name: str) -> Path:
    return Path(str(resources.files("optuna_wpca") / "data" / "tasks" / name))


def _split(rows: list, dev_fraction: float, seed: int) -> tuple[list, list]:
    order = np.random.default_rng(seed).permutation(len(rows))
    n_dev = int(round(len(rows) * dev_fraction))
    dev = [rows[i] for i in order[:n_dev]]
    train = [rows[i] for i in order[n_dev:]]
    return train, dev


def load_rt_sentiment(*, dev_fraction: float = 0.1, seed: int = 0, path: str | Path | None = None) -> Task:
    """Rotten Tomatoes sentences binarised as SST-2 is (rating > 0.5 positive, < -0.5 negative)."""
    path = Path(path) if path else _bundled("rt-sentiment") / "movieReviewSnippets_GroundTruth.txt"
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.strip().split("\t")
        if len(parts) != 3:
            continue
        rating = float(parts[1])
        if rating > 0.5:
            rows.append((parts[2], None, 1))
        elif rating < -0.5:
            rows.append((parts[2], None, 0))
    train, dev = _split(rows, dev_fraction, seed)
    return Task("rt-sentiment", train, dev, num_labels=2, labels=("negative", "positive"))


def _read_snli(path: Path) -> list[tuple[str, str, int]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if item["gold_label"] in SNLI_LABELS:
            rows.append((item["sentence1"], item["sentence2"], SNLI_LABELS.index(item["gold_label"])))
    return rows


def load_snli() -> Task:
    """SNLI sentence pairs: train on the bundled dev subset, evaluate on the test subset."""
    folder = _bundled("snli")
    return Task("snli", _read_snli(folder / "snli_1.0_dev_subset.jsonl"),
                _read_snli(folder / "snli_1.0_test_subset.jsonl"), num_labels=3, labels=SNLI_LABELS)


def load_glue_files(
    train_file: str | Path,
    dev_file: str | Path,
    *,
    text_a: str = "sentence1",
    text_b: str | None = None,
    label: str = "label",
    metric: str = "accuracy",
    name: str | None = None,
) -> Task:
    """A GLUE-format task from local tsv / csv / json(l) files through ``datasets.load_dataset``."""
    import datasets

    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}; use one of {sorted(METRICS)}")
    splits = {}
    for split, file in (("train", train_file), ("dev", dev_file)):
        file = Path(file)
        if not file.is_file():
            raise FileNotFoundError(f"task file {str(file)!r} does not exist")
        suffix = file.suffix.lower()
        if suffix in (".tsv", ".csv"):
            ds = datasets.load_dataset("csv", data_files=str(file), split="train",
                                       delimiter="\t" if suffix == ".tsv" else ",")
        elif suffix in (".json", ".jsonl"):
            ds = datasets.load_dataset("json", data_files=str(file), split="train")
        else:
            raise InputError(f"task file {str(file)!r}: use .tsv, .csv, .json or .jsonl")
        needed = [c for c in (text_a, text_b, label) if c]
        missing = [c for c in needed if c not in ds.column_names]
        if missing:
            raise InputError(f"task file {str(file)!r} has no column(s) {missing}; it has {ds.column_names}")
        splits[split] = [(row[text_a], row[text_b] if text_b else None, row[label]) for row in ds]
    regression = metric == "pearson_spearman"
    if regression:
        num_labels = 1
    else:
        labels = sorted({r[2] for r in splits["train"]} | {r[2] for r in splits["dev"]})
        if not all(isinstance(x, (int, np.integer)) for x in labels):
            mapping = {x: i for i, x in enumerate(labels)}
            splits = {k: [(a, b, mapping[y]) for a, b, y in v] for k, v in splits.items()}
        num_labels = max(2, len(labels))
    return Task(name or Path(train_file).stem, splits["train"], splits["dev"], num_labels, metric)


def load_task(name: str, **kwargs: Any) -> Task:
    """A bundled task by name: ``rt-sentiment`` (binary, accuracy) or ``snli`` (3-way pairs)."""
    if name == "rt-sentiment":
        return load_rt_sentiment(**kwargs)
    if name == "snli":
        return load_snli(**kwargs)
    raise InputError(f"unknown task {name!r}; bundled tasks are {BUNDLED_TASKS}, or use load_glue_files()")
