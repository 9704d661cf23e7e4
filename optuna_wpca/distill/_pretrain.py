"""Masked-language-model pretraining from scratch, scored by the masked-LM loss on held-out text.

This is the paper's pretraining stage without a teacher (the loss its KD pretraining replaces) and
the ground truth of ``benchmarks/own_bench.py --task mlm``: a continuous loss averaged over every
masked position of a held-out text, so two architectures are told apart by far more than the
~1,000 sentences of a classification dev set.

The recipe is fixed and deliberately simple:

- text: WikiText-2 split by article (every ``held_out_every``-th article of the test split held
  out; the validation split and the other test articles are the training text), one WordPiece
  stream each;
- training batches: ``batch_size`` windows of ``seq_len - 2`` tokens between ``[CLS]`` and
  ``[SEP]``, starts drawn from ``(seed, step)`` so a batch depends on nothing else;
- masking: ``mask_rate`` of the non-special positions (at least one per window) replaced by
  ``[MASK]`` (all of them; no BERT 80/10/10 split, which only matters for fine-tuning);
- head: dense to the word-embedding width, GELU, LayerNorm, then the word embeddings transposed
  (tied, as BERT) plus a bias;
- AdamW (0.9, 0.999, weight decay 0.01 off biases and norms), linear warm-up for
  ``warmup_steps``, then a **constant** learning rate, gradient clipping at 1.0. Constant, so the
  model at step ``s`` of a long run is the model a run of ``s`` steps ends with: one run is scored
  at several step counts (``checkpoints``) for the price of the longest.
- held-out loss: the held-out stream cut into consecutive windows, masks drawn once from
  ``eval_seed``, the mean cross-entropy over every masked position, in eval mode.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from optuna_wpca._errors import InputError
from optuna_wpca._text import _detokenise, bundled_text_path, load_tokenizer
from optuna_wpca.distill._trainer import take_step


@dataclass(frozen=True)
class MLMCorpus:
    """Training and held-out WordPiece streams and the special token ids they are framed with."""

    train: np.ndarray
    held_out: np.ndarray
    cls_id: int
    sep_id: int
    mask_id: int
    vocab_size: int
    description: str = ""

    def __post_init__(self) -> None:
        if len(self.train) < 2 or len(self.held_out) < 2:
            raise InputError(f"empty corpus: {len(self.train)} training and {len(self.held_out)} held-out tokens")


def _articles(path: str) -> list[list[str]]:
    """WikiText lines grouped by article (a top-level ``= Title =`` heading starts one)."""
    articles: list[list[str]] = []
    for raw in open(path, encoding="utf-8").read().splitlines():
        line = raw.strip()
        if re.fullmatch(r"= [^=].*[^=] =", line):
            articles.append([])
            continue
        if not line or re.fullmatch(r"=.*=", line):
            continue  # blank lines and section headings carry no prose
        if not articles:
            articles.append([])
        articles[-1].append(_detokenise(line))
    return [a for a in articles if a]


def wikitext_mlm_corpus(held_out_every: int = 5, tokenizer: str | None = None) -> MLMCorpus:
    """The bundled WikiText-2 as an :class:`MLMCorpus` (see the module docstring for the split).

    Example:
        >>> corpus = wikitext_mlm_corpus()
        >>> len(corpus.train) > 4 * len(corpus.held_out) > 0
        True
    """
    if held_out_every < 2:
        raise InputError(f"held_out_every must be >= 2, got {held_out_every}")
    tok = load_tokenizer(tokenizer)
    test = _articles(str(bundled_text_path("test")))
    held = [a for i, a in enumerate(test) if i % held_out_every == held_out_every - 1]
    train = _articles(str(bundled_text_path("valid"))) + [a for i, a in enumerate(test)
                                                          if i % held_out_every != held_out_every - 1]

    def stream(articles: list[list[str]]) -> np.ndarray:
        lines = [line for a in articles for line in a]
        ids = tok(lines, add_special_tokens=False)["input_ids"] if lines else []
        return np.fromiter((t for seq in ids for t in seq), dtype=np.int64)

    return MLMCorpus(stream(train), stream(held), tok.cls_token_id, tok.sep_token_id, tok.mask_token_id,
                     len(tok), f"WikiText-2: {len(train)} training articles, {len(held)} held out "
                               f"(every {held_out_every}th test article)")


@dataclass(frozen=True)
class MLMConfig:
    """One masked-LM pretraining recipe (see the module docstring)."""

    steps: int = 1000
    #: Extra step counts at which the held-out loss is also measured (all <= ``steps``).
    checkpoints: tuple[int, ...] = ()
    batch_size: int = 32
    seq_len: int = 64
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    mask_rate: float = 0.15
    seed: int = 0
    eval_seed: int = 0
    eval_batch_size: int = 64
    #: Held-out windows scored at each measurement (``None``: all of them); the first ones, so every
    #: measurement of every model reads the same text.
    eval_windows: int | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_batch_size"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.seq_len < 3:
            raise InputError(f"seq_len must be >= 3 ([CLS], a token, [SEP]), got {self.seq_len}")
        if not 0 < self.mask_rate < 1:
            raise InputError(f"mask_rate must lie in (0, 1), got {self.mask_rate}")
        if self.learning_rate <= 0 or self.warmup_steps < 0:
            raise InputError("learning_rate must be > 0 and warmup_steps >= 0")
        if self.eval_windows is not None and self.eval_windows < 1:
            raise InputError(f"eval_windows must be >= 1 or None, got {self.eval_windows}")
        bad = [s for s in self.checkpoints if not 1 <= s <= self.steps]
        if bad:
            raise InputError(f"checkpoints {bad} are outside 1..steps={self.steps}")


@dataclass
class MLMResult:
    """Held-out masked-LM loss (mean cross-entropy per masked token) at each measured step."""

    losses: dict[int, float] = field(default_factory=dict)
    #: Seconds of training (evaluation excluded) up to each measured step.
    train_seconds: dict[int, float] = field(default_factory=dict)
    seconds: float = 0.0
    eval_seconds: float = 0.0
    predicted_tokens: int = 0
    #: The step a resumed run started from (``None``: a fresh run).
    resumed_from: int | None = None

    @property
    def loss(self) -> float:
        """The loss after the last step."""
        return self.losses[max(self.losses)]


class MLMHead(nn.Module):
    """Dense to the word-embedding width, GELU, LayerNorm, then the tied word embeddings and a bias."""

    def __init__(self, hidden_size: int, word_embeddings: nn.Embedding, seed: int = 0) -> None:
        super().__init__()
        width = word_embeddings.embedding_dim
        self.dense = nn.Linear(hidden_size, width)
        self.norm = nn.LayerNorm(width)
        self.word = word_embeddings
        self.bias = nn.Parameter(torch.zeros(word_embeddings.num_embeddings))
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.dense.weight.copy_(torch.randn(self.dense.weight.shape, generator=g) * 0.02)
            self.dense.bias.zero_()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits of hidden states (..., hidden) -> (..., vocab)."""
        return self.norm(F.gelu(self.dense(hidden))) @ self.word.weight.T + self.bias


def _word_embeddings(model: nn.Module) -> nn.Embedding:
    emb = getattr(model, "embeddings", None)
    for name in ("word", "word_embeddings", "token"):
        table = getattr(emb, name, None)
        if isinstance(table, nn.Embedding):
            return table
    raise InputError(f"{type(model).__name__} has no word-embedding table to tie a masked-LM head to")


def _frame(windows: np.ndarray, corpus: MLMCorpus) -> torch.Tensor:
    n = windows.shape[0]
    return torch.from_numpy(np.concatenate([np.full((n, 1), corpus.cls_id), windows,
                                            np.full((n, 1), corpus.sep_id)], axis=1))


def _mask(ids: torch.Tensor, rate: float, generator: torch.Generator, mask_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    masked = torch.rand(ids.shape, generator=generator) < rate
    masked[:, 0] = masked[:, -1] = False
    none = ~masked.any(dim=1)
    masked[none, 1] = True  # at least one predicted position per window
    return ids.masked_fill(masked, mask_id), masked


def _train_batch(corpus: MLMCorpus, config: MLMConfig, step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = config.seq_len - 2
    rng = np.random.default_rng([config.seed, step])
    starts = rng.integers(0, len(corpus.train) - width, size=config.batch_size)
    ids = _frame(np.stack([corpus.train[s : s + width] for s in starts]), corpus)
    g = torch.Generator().manual_seed(int(rng.integers(2**62)))
    inputs, masked = _mask(ids, config.mask_rate, g, corpus.mask_id)
    return inputs, masked, ids


def _held_out_windows(corpus: MLMCorpus, width: int, config: MLMConfig) -> int:
    """How many consecutive held-out windows of ``width`` tokens are scored (at most ``eval_windows``)."""
    n = len(corpus.held_out) // width
    if n < 1:
        raise InputError(f"the held-out text has {len(corpus.held_out)} tokens, fewer than one window of {width}")
    return min(n, config.eval_windows or n)


def held_out_batches(corpus: MLMCorpus, config: MLMConfig) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The held-out stream as consecutive framed windows with fixed masks, in evaluation batches."""
    width = config.seq_len - 2
    n = _held_out_windows(corpus, width, config)
    ids = _frame(corpus.held_out[: n * width].reshape(n, width), corpus)
    inputs, masked = _mask(ids, config.mask_rate, torch.Generator().manual_seed(config.eval_seed), corpus.mask_id)
    step = config.eval_batch_size
    return [(inputs[i : i + step], masked[i : i + step], ids[i : i + step]) for i in range(0, n, step)]


def _loss(model: nn.Module, head: MLMHead, inputs, masked, ids, device, reduction: str = "mean") -> torch.Tensor:
    hidden = model(inputs.to(device))
    m = masked.to(device)
    return F.cross_entropy(head(hidden[m]), ids.to(device)[m], reduction=reduction)


def held_out_loss(model: nn.Module, head: MLMHead, batches, device: Any = "cpu") -> tuple[float, int]:
    """Mean cross-entropy over every masked held-out position, and how many positions that is."""
    was = model.training, head.training
    model.eval(), head.eval()
    total, count = 0.0, 0
    try:
        with torch.inference_mode():
            for inputs, masked, ids in batches:
                total += float(_loss(model, head, inputs, masked, ids, device, reduction="sum"))
                count += int(masked.sum())
    finally:
        model.train(was[0]), head.train(was[1])
    return total / count, count


def pretrain_mlm(
    model: nn.Module,
    corpus: MLMCorpus,
    config: MLMConfig,
    *,
    on_checkpoint: Callable[[int, float], None] | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
) -> MLMResult:
    """Train ``model`` (a candidate encoder) from its current weights by masked-LM and measure it.

    Args:
        model: a candidate encoder (``space.build(...)``); trained in place.
        corpus: training and held-out token streams (:func:`wikitext_mlm_corpus`).
        config: the recipe.
        on_checkpoint: called as ``on_checkpoint(step, loss)`` after each measurement, e.g. to
            ``trial.report`` it (it may raise ``optuna.TrialPruned``).
        checkpoint_dir: where the run saves its state at each measurement; a run started again
            with the same folder resumes after the last measurement instead of from step 0.

    Returns:
        The held-out loss at every step of ``config.checkpoints`` and at ``config.steps``.

    Example:
        >>> from optuna_wpca import WPCASpace
        >>> space = WPCASpace(num_layers=1, hidden_size=64, bert_heads=2, mobilebert_heads=2)
        >>> model = space.build(space.sample(0), seed=0)
        >>> result = pretrain_mlm(model, wikitext_mlm_corpus(), MLMConfig(steps=2, batch_size=2, seq_len=16))
        >>> sorted(result.losses), result.loss > 0
        ([2], True)
    """
    head = MLMHead(_hidden_size(model), _word_embeddings(model), seed=config.seed)

    def train_loss(step: int) -> torch.Tensor:
        inputs, masked, ids = _train_batch(corpus, config, step)
        return _loss(model, head, inputs, masked, ids, device)

    def measure() -> tuple[float, int]:
        return held_out_loss(model, head, evaluation, device)

    device = torch.device(config.device)
    evaluation = held_out_batches(corpus, config)
    return _pretrain(model, head, config, train_loss, measure, "masked-LM loss", on_checkpoint, checkpoint_dir)


def pretrain_next_token(
    model: nn.Module,
    corpus: MLMCorpus,
    config: MLMConfig,
    *,
    on_checkpoint: Callable[[int, float], None] | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
) -> MLMResult:
    """Train a causal candidate (a decoder with ``logits(hidden)``) by next-token prediction and measure it.

    The decoders' counterpart of :func:`pretrain_mlm`, with the same recipe and arguments
    (``mask_rate`` unused): training windows of ``seq_len`` tokens from the training stream, the
    loss the mean cross-entropy of every next token through the model's tied embedding; the
    held-out loss the same over consecutive held-out windows.

    Example:
        >>> from optuna_wpca import DecoderSpace
        >>> space = DecoderSpace(num_layers_choices=(1,), hidden_sizes=(32,), heads=(2,), ffn_sizes=(64,))
        >>> model = space.build(space.sample(0), seed=0)
        >>> result = pretrain_next_token(model, wikitext_mlm_corpus(), MLMConfig(steps=2, batch_size=2, seq_len=16))
        >>> sorted(result.losses), result.loss > 0
        ([2], True)
    """
    if not getattr(model, "is_causal", False) or not hasattr(model, "logits"):
        raise InputError(f"{type(model).__name__} is not a causal model with next-token logits; "
                         "pretrain an encoder with pretrain_mlm")
    device = torch.device(config.device)
    width = config.seq_len
    n = _held_out_windows(corpus, width, config)
    held = torch.from_numpy(corpus.held_out[: n * width].reshape(n, width))

    def loss_of(ids: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        ids = ids.to(device)
        logits = model.logits(model(ids[:, :-1]))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction=reduction)

    def train_loss(step: int) -> torch.Tensor:
        rng = np.random.default_rng([config.seed, step])
        starts = rng.integers(0, len(corpus.train) - width, size=config.batch_size)
        return loss_of(torch.from_numpy(np.stack([corpus.train[s : s + width] for s in starts])))

    def measure() -> tuple[float, int]:
        was = model.training
        model.eval()
        total = 0.0
        try:
            with torch.inference_mode():
                for i in range(0, n, config.eval_batch_size):
                    total += float(loss_of(held[i : i + config.eval_batch_size], reduction="sum"))
        finally:
            model.train(was)
        count = n * (width - 1)
        return total / count, count

    return _pretrain(model, None, config, train_loss, measure, "next-token loss", on_checkpoint, checkpoint_dir)


_PRETRAIN_CHECKPOINT = "pretrain-checkpoint.pt"


def _pretrain(model: nn.Module, head: nn.Module | None, config: MLMConfig, train_loss: Callable[[int], torch.Tensor],
              measure: Callable[[], tuple[float, int]], what: str, on_checkpoint: Callable[[int, float], None] | None,
              checkpoint_dir: str | os.PathLike | None) -> MLMResult:
    """The loop both objectives share: AdamW, warm-up then a constant rate, measurements, checkpoints."""
    device = torch.device(config.device)
    torch.manual_seed(config.seed)  # dropout
    model.to(device).train()
    modules = [model] if head is None else [model, head.to(device).train()]
    params = list({id(p): p for m in modules for p in m.parameters()}.values())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.learning_rate)
    warmup = config.warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0)
    measured = sorted({*config.checkpoints, config.steps})
    result, first = MLMResult(), 0
    ckpt = Path(checkpoint_dir) / _PRETRAIN_CHECKPOINT if checkpoint_dir is not None else None
    if ckpt is not None and ckpt.is_file():
        state = torch.load(ckpt, map_location=device, weights_only=False)
        if state["config"] != dataclasses.asdict(config):
            raise InputError(f"the checkpoint in {str(ckpt.parent)!r} is of another recipe; remove it or use "
                             "another folder")
        for module, key in zip(modules, ("model", "head")):
            module.load_state_dict(state[key])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        result, first = state["result"], state["step"]
        result.resumed_from = first
        for step in sorted(result.losses):  # what the earlier run measured is reported again (a new trial)
            if on_checkpoint is not None:
                on_checkpoint(step, result.losses[step])
    start = time.perf_counter() - result.seconds
    for step in range(first, config.steps):
        take_step(train_loss(step), optimizer, scheduler, params, step, what)
        if step + 1 in measured:
            t = time.perf_counter()
            value, result.predicted_tokens = measure()
            result.eval_seconds += time.perf_counter() - t
            result.losses[step + 1] = value
            result.train_seconds[step + 1] = time.perf_counter() - start - result.eval_seconds
            result.seconds = time.perf_counter() - start
            if ckpt is not None:
                ckpt.parent.mkdir(parents=True, exist_ok=True)
                tmp = ckpt.with_suffix(".tmp")
                torch.save({"config": dataclasses.asdict(config), "step": step + 1, "result": result,
                            "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                            "torch_rng": torch.get_rng_state(),
                            **{key: m.state_dict() for m, key in zip(modules, ("model", "head"))}}, tmp)
                os.replace(tmp, ckpt)
            if on_checkpoint is not None:
                on_checkpoint(step + 1, value)
    result.seconds = time.perf_counter() - start
    return result


def _hidden_size(model: nn.Module) -> int:
    size = getattr(getattr(model, "config", None), "hidden_size", None)
    if size is None:
        raise InputError(f"{type(model).__name__} has no config.hidden_size")
    return int(size)
