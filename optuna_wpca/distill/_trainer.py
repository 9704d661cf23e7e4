"""Distillation and plain training loops, resumable, speaking Optuna's report / prune protocol."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch
import torch.nn.functional as F
from torch import nn

from optuna_wpca._errors import InputError
from optuna_wpca._text import load_tokenizer, model_inputs
from optuna_wpca.distill._config import TrainConfig, TrainResult
from optuna_wpca.distill._data import TextCorpus, encode_split
from optuna_wpca.distill._losses import Projections, kd_loss
from optuna_wpca.distill._mapping import layer_mapping
from optuna_wpca.distill._models import Recorder, student_points, teacher_encoder, teacher_points
from optuna_wpca.distill._teacher_cache import TeacherCache
from optuna_wpca.distill._tasks import Task
from optuna_wpca.models import CandidateModel

_logger = optuna.logging.get_logger("optuna.optuna_wpca.distill")
CHECKPOINT = "checkpoint.pt"


def _batch_indices(n: int, batch_size: int, step: int, seed: int) -> np.ndarray:
    """The examples of ``step``: a function of (seed, step) only, so a resumed run sees the same batches."""
    start = step * batch_size
    idx = []
    while len(idx) < batch_size:
        epoch, offset = divmod(start + len(idx), n)
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        take = min(batch_size - len(idx), n - offset)
        idx.extend(perm[offset : offset + take])
    return np.asarray(idx)


def _logits(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    inputs = model_inputs(batch)
    out = model(**inputs)
    return out.logits if hasattr(out, "logits") else out


def _task_loss(logits: torch.Tensor, labels: torch.Tensor, regression: bool) -> torch.Tensor:
    if regression:
        return F.mse_loss(logits.squeeze(-1), labels.float())
    return F.cross_entropy(logits, labels)


def evaluate(model: nn.Module, task: Task, data: dict[str, torch.Tensor], *, batch_size: int = 128,
             limit: int | None = None, device: Any = "cpu") -> float:
    """The task's metric of ``model`` on encoded dev data."""
    return _evaluate(model, task, data, batch_size=batch_size, limit=limit, device=device)[0]


def _evaluate(model: nn.Module, task: Task, data: dict[str, torch.Tensor], *, batch_size: int = 128,
              limit: int | None = None, device: Any = "cpu") -> tuple[float, float]:
    """The task's metric and the task loss (mean cross-entropy, or MSE for regression) on dev data."""
    was_training = model.training
    model.eval()
    n = data["input_ids"].shape[0] if limit is None else min(limit, data["input_ids"].shape[0])
    preds, loss = [], 0.0
    with torch.inference_mode():
        for i in range(0, n, batch_size):
            batch = {k: v[i : min(n, i + batch_size)].to(device) for k, v in data.items()}
            logits = _logits(model, batch)
            loss += _task_loss(logits, batch["labels"], task.is_regression).item() * logits.shape[0]
            preds.append(logits.squeeze(-1) if task.is_regression else logits.argmax(-1))
    model.train(was_training)
    pred = torch.cat(preds).cpu().numpy()
    return task.score(pred, data["labels"][:n].numpy()), loss / n


def _save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write atomically: a crash mid-write leaves the previous checkpoint intact."""
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / (CHECKPOINT + ".tmp")
    torch.save(state, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path / CHECKPOINT)


def optimizer_and_schedule(params: list[nn.Parameter], config: TrainConfig):
    """AdamW (weight decay off biases and norms) and the recipe's rate: linear warm-up, then linear
    decay to 0 or, with ``schedule="constant"``, a constant rate."""
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=config.learning_rate, betas=config.betas,
    )
    warmup = int(config.warmup_ratio * config.steps) if config.warmup_steps is None else config.warmup_steps

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(1, warmup)
        if config.schedule == "constant":
            return 1.0
        return max(0.0, (config.steps - step) / max(1, config.steps - warmup))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def take_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer, scheduler: Any, params: list[nn.Parameter],
              step: int, what: str = "training loss") -> None:
    """One update of every recipe here: refuse a non-finite loss (naming ``what`` and the step), then
    backward, clip the gradient norm to 1, step the optimizer and the rate schedule."""
    if not torch.isfinite(loss):
        raise FloatingPointError(f"{what} became {float(loss)} at step {step}; lower the learning rate")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    scheduler.step()


def train(
    model: nn.Module,
    task: Task | TextCorpus,
    config: TrainConfig | None = None,
    *,
    teacher: nn.Module | None = None,
    tokenizer: Any = None,
    trial: optuna.trial.BaseTrial | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    progress: bool = False,
    teacher_cache: TeacherCache | None = None,
) -> TrainResult:
    """Train ``model`` on ``task``: with a ``teacher``, by the paper's KD losses; without, on labels.

    With a ``trial``, the dev metric is reported at every evaluation (``trial.report(metric,
    step)``) and ``optuna.TrialPruned`` is raised when ``trial.should_prune()``, so any Optuna
    pruner decides how far the run goes. With a ``checkpoint_dir``, the run checkpoints every
    ``config.checkpoint_every`` steps and, when started again, resumes where it stopped.

    With a :class:`TextCorpus` instead of a task, this is the task-agnostic stage: KD on raw text
    with gamma 0 (a teacher is required), scored by the KD loss on the dev text (lower is better).

    A ``teacher_cache`` (from :func:`cache_teacher`, for this teacher, task and ``max_seq_len``)
    supplies the teacher's training targets instead of a teacher forward pass at every step.
    """
    config = config or TrainConfig()
    device = torch.device(config.device)
    tokenizer = tokenizer or load_tokenizer()
    general = isinstance(task, TextCorpus)
    if not task.train or not task.dev:
        raise InputError(f"task {task.name!r} has an empty train or dev split")
    if general:
        if teacher is None:
            raise InputError("task-agnostic distillation on raw text needs a teacher")
        config = dataclasses.replace(config, gamma=0.0)
    train_data = encode_split(task, "train", tokenizer, config.max_seq_len)
    dev_data = encode_split(task, "dev", tokenizer, config.max_seq_len)
    if teacher_cache is not None:
        if teacher is None:
            raise InputError("a teacher_cache is given but no teacher: pass the teacher it was computed from")
        teacher_cache.check(train_data["input_ids"], teacher)
    student = _candidate_of(model)
    if student is not None and config.max_seq_len > student.config.max_position_embeddings:
        raise InputError(f"max_seq_len {config.max_seq_len} exceeds the student's max positions")
    model.to(device).train()

    kd = _distillation(model, teacher, train_data, config, device) if teacher is not None else None
    projections = kd.projections if kd is not None else None
    params = list(model.parameters()) + (list(projections.parameters()) if projections is not None else [])
    optimizer, scheduler = optimizer_and_schedule(params, config)
    ckpt = Path(checkpoint_dir) / CHECKPOINT if checkpoint_dir else None
    step, history, resumed = _resume(ckpt, model, projections, optimizer, scheduler, config, device)

    start = time.perf_counter()
    n = train_data["input_ids"].shape[0]
    from tqdm import tqdm

    bar = tqdm(total=config.steps, initial=step, desc=f"training on {task.name}", unit="step", disable=not progress)
    try:
        while step < config.steps:
            idx = torch.from_numpy(_batch_indices(n, config.batch_size, step, config.seed))
            batch = {k: v[idx].to(device) for k, v in train_data.items()}
            if teacher is None:
                loss = _task_loss(_logits(model, batch), batch["labels"], task.is_regression)
                parts = {"labels": loss.item()}
            else:
                cached = teacher_cache.targets(idx, device) if teacher_cache is not None else None
                loss, parts = _kd_step(kd, model, batch, cached)
            take_step(loss, optimizer, scheduler, params, step)
            step += 1
            bar.update(1)
            if step % config.eval_every == 0 or step == config.steps:
                if general:
                    metric = _dev_kd_loss(kd, model, dev_data, device)
                else:
                    metric, dev_loss = _evaluate(model, task, dev_data, limit=config.eval_limit, device=device)
                    parts = {**parts, "dev_loss": dev_loss}
                history.append({"step": step, "metric": metric, "loss": loss.item(), **parts,
                                "seconds": time.perf_counter() - start})
            # Saved before the report: a process killed once the trial holds this step's value resumes here.
            if ckpt is not None and (step % config.checkpoint_every == 0 or step == config.steps):
                _save_checkpoint(ckpt.parent, {
                    "model": model.state_dict(),
                    "projections": projections.state_dict() if projections is not None else None,
                    "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "torch_rng": torch.get_rng_state(), "step": step, "history": history,
                    "config": dataclasses.asdict(config),
                })
            if trial is not None and history and history[-1]["step"] == step:
                trial.report(history[-1]["metric"], step)
                # A run that has done all its steps is complete: pruning it then saves nothing.
                if step < config.steps and trial.should_prune():
                    raise optuna.TrialPruned(f"pruned at step {step} with {task.metric} {history[-1]['metric']:.4f}")
    finally:
        bar.close()
        if kd is not None:
            kd.rec_s.remove()
            kd.rec_t.remove()
    return TrainResult(history[-1]["metric"], step, time.perf_counter() - start, history, resumed,
                       history[-1].get("dev_loss"))


def _distillation(model: nn.Module, teacher: nn.Module, train_data: dict, config: TrainConfig, device: Any) -> _KD:
    """What KD needs: the layer mapping, the recorders on both models, and Appendix F's projections."""
    student = _candidate_of(model)
    if student is None:
        raise InputError("distillation needs a candidate student (CandidateForSequenceClassification.from_candidate)")
    teacher.to(device).eval()
    s_points = student_points(student)
    mapping = layer_mapping(len(s_points["ffn"]), len(teacher_points(teacher)["ffn"]))
    # Appendix F's W_e, W_a, W_h are learned linear maps between any two widths: a student wider than
    # its teacher (hidden 528 against MiniLM's 384) is projected down as a narrower one is projected up.
    widths = _output_widths(student, s_points, train_data, device)
    projections = Projections(widths, teacher_encoder(teacher).config.hidden_size).to(device)
    generator = torch.Generator().manual_seed(config.seed)
    with torch.no_grad():
        for m in projections.maps.values():
            m.weight.copy_(torch.randn(m.weight.shape, generator=generator) * 0.02)
            m.bias.zero_()
    return _KD(teacher, projections, Recorder(s_points), Recorder(teacher_points(teacher)), mapping, config)


def _resume(ckpt: Path | None, model: nn.Module, projections: Projections | None, optimizer: Any, scheduler: Any,
            config: TrainConfig, device: Any) -> tuple[int, list[dict[str, Any]], int | None]:
    """``(step, history, resumed step)`` from the checkpoint, its states loaded; a fresh start seeds torch."""
    if ckpt is None or not ckpt.is_file():
        torch.manual_seed(config.seed)
        return 0, [], None
    state = torch.load(ckpt, map_location=device, weights_only=False)
    model.load_state_dict(state["model"])
    if projections is not None and state.get("projections") is not None:
        projections.load_state_dict(state["projections"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    _logger.info("resumed %s at step %d", ckpt.parent, state["step"])
    return state["step"], state["history"], state["step"]


def _candidate_of(model: nn.Module) -> CandidateModel | None:
    """The candidate encoder of a student classifier, or None for another model (a teacher)."""
    from optuna_wpca.models._transformers import CandidateForSequenceClassification

    return model.candidate if isinstance(model, CandidateForSequenceClassification) else None


def _output_widths(student: CandidateModel, points: dict, data: dict, device: Any) -> dict[str, set[int]]:
    rec = Recorder(points)
    try:
        with torch.no_grad():
            student(data["input_ids"][:1, :8].to(device))
        return {kind: {out.shape[-1] for out in outs} for kind, outs in rec.outputs.items()}
    finally:
        rec.remove()


@dataclass
class _KD:
    """What every distillation step of one run shares: the teacher, the learned projections, the
    recorders of both models' outputs, the student-to-teacher layer mapping and the recipe."""

    teacher: nn.Module
    projections: Projections
    rec_s: Recorder
    rec_t: Recorder
    mapping: list[int]
    config: TrainConfig


def _kd_step(kd: _KD, model: nn.Module, batch: dict[str, torch.Tensor], cached: dict | None = None):
    """The KD loss and its parts on one batch (teacher targets from ``cached`` when given)."""
    teacher, rec_s, rec_t, config = kd.teacher, kd.rec_s, kd.rec_t, kd.config
    rec_s.clear()
    rec_t.clear()
    inputs = model_inputs(batch)
    if cached is None:
        with torch.no_grad():
            t_out = teacher(**inputs)
        t_logits = t_out.logits if hasattr(t_out, "logits") else None
        teacher_side = {"embeddings": rec_t.outputs["embeddings"][0], "attention": rec_t.outputs["attention"],
                        "ffn": rec_t.outputs["ffn"]}
        if t_logits is not None:
            teacher_side["logits"] = t_logits
    else:
        teacher_side = cached
    s_logits = _logits(model, batch)
    student = {"embeddings": rec_s.outputs["embeddings"][0], "attention": rec_s.outputs["attention"],
               "ffn": rec_s.outputs["ffn"], "logits": s_logits}
    return kd_loss(student, teacher_side, kd.projections, kd.mapping, gamma=config.gamma,
                   temperature=config.temperature, feature_loss=config.feature_loss, logit_loss=config.logit_loss)


def _dev_kd_loss(kd: _KD, model: nn.Module, data: dict[str, torch.Tensor], device: Any) -> float:
    """The mean KD loss over the dev data (the task-agnostic stage's metric; lower is better)."""
    config = kd.config
    was_training = model.training
    model.eval()
    n = data["input_ids"].shape[0] if config.eval_limit is None else min(config.eval_limit, data["input_ids"].shape[0])
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, n, config.batch_size):
            batch = {k: v[i : min(n, i + config.batch_size)].to(device) for k, v in data.items()}
            loss, _ = _kd_step(kd, model, batch)
            total += loss.item() * batch["input_ids"].shape[0]
            count += batch["input_ids"].shape[0]
    model.train(was_training)
    return total / count


def finetune_teacher(
    path: str | os.PathLike, task: Task, out_dir: str | os.PathLike, config: TrainConfig | None = None,
    *, tokenizer: Any = None, progress: bool = False,
) -> TrainResult:
    """Fine-tune a pretrained BERT-family model on ``task`` (labels) and save it to ``out_dir``."""
    from optuna_wpca.distill._models import load_teacher, save_model

    config = config or TrainConfig(learning_rate=5e-5)
    model = load_teacher(path, num_labels=task.num_labels, device=config.device, warn_untrained_head=False)
    if tokenizer is None and (Path(path) / "tokenizer.json").is_file():
        tokenizer = load_tokenizer(str(path))
    result = train(model, task, config, tokenizer=tokenizer, progress=progress)
    save_model(model, out_dir, quiet=not progress)
    if tokenizer is not None:
        tokenizer.save_pretrained(str(out_dir))
    return result
