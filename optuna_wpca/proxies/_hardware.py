"""Measured cost proxies: latency and peak memory on the device the user runs on."""

from __future__ import annotations

import statistics
import time

import torch

from optuna_wpca._errors import InputError
from optuna_wpca._text import TextBatch
from optuna_wpca.models import CandidateModel
from optuna_wpca.proxies._registry import ProxyResult, register_proxy


def measurement_input(model: CandidateModel, batch: TextBatch, batch_size: int, seq_len: int) -> torch.Tensor:
    """``batch_size`` x ``seq_len`` token ids from ``batch``: its tokens read row after row (repeated
    when it holds fewer), so a search on a 16 x 32 minibatch times the same 1 x 128 input shape as one
    on 16 x 128. ``seq_len`` is capped at the model's position table."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if batch_size < 1 or seq_len < 1:
        raise InputError(f"latency_batch_size and latency_seq_len must be >= 1, got {batch_size} and {seq_len}")
    seq_len = min(seq_len, limit) if isinstance(limit, int) else seq_len
    flat = batch.input_ids.reshape(-1)
    need = batch_size * seq_len
    if flat.numel() < need:
        flat = flat.repeat(-(-need // flat.numel()))
    return flat[:need].reshape(batch_size, seq_len)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@register_proxy("latency", needs_grad=False, description="median forward time in ms (batch 1, 128 tokens)",
                direction="minimize", unit="ms")
def latency(
    model: CandidateModel,
    batch: TextBatch,
    *,
    latency_batch_size: int = 1,
    latency_seq_len: int = 128,
    warmup: int = 3,
    repeats: int = 10,
) -> ProxyResult:
    """Median wall time of a forward pass after warm-up, as LiteTransformerSearch measures it,
    with its interquartile range (``latency_iqr_ms``) and slowest pass (``latency_max_ms``).

    The input is ``latency_batch_size`` x ``latency_seq_len`` tokens of ``batch`` (see
    :func:`measurement_input`), whatever the minibatch's own shape, so latencies of searches on
    different minibatches compare. On CUDA the peak allocated memory of one pass is recorded too.
    """
    if repeats < 1:
        raise InputError(f"repeats must be >= 1, got {repeats}")
    device = next(model.parameters()).device
    ids = measurement_input(model, batch, latency_batch_size, latency_seq_len).to(device)
    was_training = model.training
    model.eval()
    times = []
    try:
        with torch.inference_mode():
            for _ in range(warmup):
                model(ids)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            for _ in range(repeats):
                _sync(device)
                start = time.perf_counter()
                model(ids)
                _sync(device)
                times.append(time.perf_counter() - start)
    finally:
        model.train(was_training)
    ms = sorted(1000 * t for t in times)
    quartiles = statistics.quantiles(ms, n=4) if len(ms) > 1 else [ms[0]] * 3
    # The median and the interquartile range: a few slow passes (another process, a page fault)
    # move neither, where they would move a mean.
    parts = {"latency_ms": statistics.median(ms), "latency_iqr_ms": quartiles[2] - quartiles[0],
             "latency_max_ms": ms[-1], "input": list(ids.shape), "unit": "ms", "device": str(device)}
    if device.type == "cuda":
        parts["peak_memory_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return ProxyResult(parts["latency_ms"], parts)


@register_proxy("peak_memory", needs_grad=False, direction="minimize", unit="MiB",
                description="peak memory of one forward pass in MB: weights plus the allocator's activation peak")
def peak_memory(
    model: CandidateModel,
    batch: TextBatch,
    *,
    latency_batch_size: int = 1,
    latency_seq_len: int = 128,
) -> ProxyResult:
    """Measured on the device the model is on, for the same input as ``latency``.

    On CUDA, ``torch.cuda.max_memory_allocated`` over one pass. On the CPU, the profiler's memory
    events of one pass (allocations and frees in time order) give the activation peak above what
    was allocated before; the weights are added to both.
    """
    device = next(model.parameters()).device
    ids = measurement_input(model, batch, latency_batch_size, latency_seq_len).to(device)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            model(ids)  # warm-up: lazy allocations are not the model's
            if device.type == "cuda":
                torch.cuda.synchronize(device)
                base = torch.cuda.memory_allocated(device)
                torch.cuda.reset_peak_memory_stats(device)
                model(ids)
                torch.cuda.synchronize(device)
                activations = torch.cuda.max_memory_allocated(device) - base
            else:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                    model(ids)
                current = activations = 0
                for event in sorted(prof.events(), key=lambda e: e.time_range.start):
                    current += event.self_cpu_memory_usage
                    activations = max(activations, current)
    finally:
        model.train(was_training)
    mb = (weights + activations) / 2**20
    return ProxyResult(mb, {"peak_memory_mb": mb, "weights_mb": weights / 2**20,
                            "activations_mb": activations / 2**20, "input": list(ids.shape), "unit": "MiB"})
