"""Text for training: a raw-text corpus for task-agnostic KD, and the encoding of any split."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from optuna_wpca._errors import InputError

if TYPE_CHECKING:
    from optuna_wpca.distill._tasks import Task


@dataclass
class TextCorpus:
    """Raw text for task-agnostic distillation (gamma 0): no labels; the score is the dev KD loss."""

    name: str
    train: list[str]
    dev: list[str]
    metric: str = "kd_loss"


def load_text_corpus(path: str | os.PathLike | None = None, *, dev_fraction: float = 0.05, seed: int = 0) -> TextCorpus:
    """Paragraphs of a text file (default: the bundled WikiText-2 test split), split train/dev."""
    from optuna_wpca._text import _read_corpus, bundled_text_path

    lines = _read_corpus(path or bundled_text_path("test"))
    if not lines:
        raise InputError(f"text corpus {str(path)!r} is empty")
    order = np.random.default_rng(seed).permutation(len(lines))
    n_dev = max(1, int(len(lines) * dev_fraction))
    return TextCorpus(Path(str(path or "wikitext-2")).stem, [lines[i] for i in order[n_dev:]],
                      [lines[i] for i in order[:n_dev]])


def encode_text(lines: list[str], tokenizer: Any, max_len: int) -> dict[str, torch.Tensor]:
    """Cut the token stream of ``lines`` into unpadded ``[CLS] ... [SEP]`` windows."""
    ids = tokenizer(lines, add_special_tokens=False)["input_ids"]
    stream = torch.tensor([t for seq in ids for t in seq], dtype=torch.long)
    body = max_len - 2
    n = stream.numel() // body
    if n < 1:
        raise InputError(f"text corpus has {stream.numel()} tokens; one {max_len}-token window needs {body}")
    windows = stream[: n * body].view(n, body)
    cls = torch.full((n, 1), tokenizer.cls_token_id)
    sep = torch.full((n, 1), tokenizer.sep_token_id)
    input_ids = torch.cat([cls, windows, sep], dim=1)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
            "token_type_ids": torch.zeros_like(input_ids), "labels": torch.zeros(n, dtype=torch.long)}


def encode_rows(task_rows: list, tokenizer: Any, max_len: int) -> dict[str, torch.Tensor]:
    """Labelled ``(text_a, text_b or None, label)`` rows as padded tensors of ``max_len`` tokens."""
    a = [r[0] for r in task_rows]
    b = [r[1] for r in task_rows] if task_rows and task_rows[0][1] is not None else None
    enc = tokenizer(a, b, truncation=True, max_length=max_len, padding="max_length", return_tensors="pt")
    labels = torch.tensor([r[2] for r in task_rows])
    out = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "labels": labels}
    out["token_type_ids"] = enc.get("token_type_ids", torch.zeros_like(enc["input_ids"]))
    return out


def encode_split(task: "Task | TextCorpus", split: str, tokenizer: Any, max_len: int) -> dict[str, torch.Tensor]:
    """The ``train`` or ``dev`` split of a task or a corpus, encoded."""
    rows = getattr(task, split)
    if isinstance(task, TextCorpus):
        return encode_text(rows, tokenizer, max_len)
    return encode_rows(rows, tokenizer, max_len)
