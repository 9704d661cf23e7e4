"""What a W-PCA evaluation costs, stage by stage, against its own forward pass and a gradient step.

    python benchmarks/proxy_speed.py [--batch-size 32 --seq-len 128 --repeats 5 --device cpu]
                                     [--workers 2] [--json benchmarks/results/proxy_speed.json]

On the W-PCA-Small candidate of the speed issue (``WPCASpace.small().sample(0)``, seed 0), in one
process and one run, medians of ``--repeats`` after a warm-up:
- build: ``space.build`` (allocation and seeded initialisation, on the target device);
- forward: one plain forward pass under ``torch.inference_mode`` (the physical floor);
- forward + covariances: the hooked pass that W-PCA runs (stopping after the last FFN linear);
- eigenvalues: the batched eigendecompositions of those covariances;
- W-PCA: the registered proxy end to end (``compute_proxy("wpca", ...)``);
- gradient step: forward + backward of a masked-LM loss (what the cheapest gradient proxy spends).
Ratios are what to read: absolute seconds move with the machine's load. With ``--workers N`` (CPU),
N processes then score W-PCA at the same time, each with ``cores / N`` threads, and the per-evaluation
time is compared with one worker's in the same run (the "no collapse" check).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import time

import torch

from optuna_wpca import WPCASpace, compute_proxy, dim_from_spectrum, text_batch
from optuna_wpca.proxies._pca import eigenvalues, layer_covariances


def median_seconds(fn, repeats: int, sync) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _worker(args: tuple[int, int, int, int, int, object]) -> float:
    threads, batch_size, seq_len, repeats, _, barrier = args
    torch.set_num_threads(threads)
    space = WPCASpace.small()
    model = space.build(space.sample(0), seed=0)
    batch = text_batch(batch_size=batch_size, seq_len=seq_len)
    compute_proxy("wpca", model, batch)
    barrier.wait()
    start = time.perf_counter()
    for _ in range(repeats):
        compute_proxy("wpca", model, batch)
    return (time.perf_counter() - start) / repeats


def workers_check(n: int, batch_size: int, seq_len: int, repeats: int) -> dict[str, float]:
    cores = os.cpu_count() or 1
    out = {}
    ctx = mp.get_context("spawn")
    for workers in (1, n):
        threads = max(1, cores // workers)
        with ctx.Manager() as manager:
            barrier = manager.Barrier(workers)
            with ctx.Pool(workers) as pool:
                times = pool.map(_worker, [(threads, batch_size, seq_len, repeats, i, barrier) for i in range(workers)])
        out[f"{workers}_workers_seconds_per_evaluation"] = statistics.mean(times)
        out[f"{workers}_workers_threads_each"] = threads
    out["slowdown"] = out[f"{n}_workers_seconds_per_evaluation"] / out["1_workers_seconds_per_evaluation"]
    return out


def _one_after_another(covariances) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        eigenvalues(covariances)
    finally:
        torch.set_num_threads(threads)


def seeded_build_checks(space: WPCASpace, arch, device: torch.device) -> dict[str, bool]:
    """A seed gives the same weights twice on ``device``, and ``init_device="cpu"`` the CPU's."""

    def same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
        sa, sb = a.state_dict(), b.state_dict()
        return all(torch.equal(sa[k].cpu(), sb[k].cpu()) for k in sa)

    cpu = space.build(arch, seed=0)
    return {
        "reproducible_on_device": same(space.build(arch, seed=0, device=device), space.build(arch, seed=0, device=device)),
        "init_device_cpu_equals_cpu_build": same(cpu, space.build(arch, seed=0, device=device, init_device="cpu")),
        "device_draw_equals_cpu_build": same(cpu, space.build(arch, seed=0, device=device)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workers", type=int, default=0, help="also run the N-worker check (CPU)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    space = WPCASpace.small()
    arch = space.sample(0)
    model = space.build(arch, seed=0, device=device)
    batch = text_batch(batch_size=args.batch_size, seq_len=args.seq_len).to(device)
    head = torch.nn.Linear(space.hidden_size, space.vocab_size).to(device)
    masked = (torch.rand(batch.input_ids.shape, generator=torch.Generator().manual_seed(0)) < 0.15).to(device)

    def forward() -> None:
        with torch.inference_mode():
            model(**batch.as_kwargs())

    def gradient() -> None:
        model.zero_grad(set_to_none=True)
        hidden = model(**batch.as_kwargs())
        loss = torch.nn.functional.cross_entropy(head(hidden[masked]), batch.input_ids[masked])
        loss.backward()

    covariances = layer_covariances(model, batch)
    stages = {
        "build": median_seconds(lambda: space.build(arch, seed=0, device=device), args.repeats, sync),
        # the path before 2026-12-05: drawn on the CPU, then copied to the device
        "build_cpu_init": median_seconds(
            lambda: space.build(arch, seed=0, device=device, init_device="cpu"), args.repeats, sync
        ),
        "forward": median_seconds(forward, args.repeats, sync),
        "forward_and_covariances": median_seconds(lambda: layer_covariances(model, batch), args.repeats, sync),
        "eigenvalues": median_seconds(lambda: eigenvalues(covariances), args.repeats, sync),
        "wpca": median_seconds(lambda: compute_proxy("wpca", model, batch), args.repeats, sync),
        "gradient_step": median_seconds(gradient, args.repeats, sync),
    }
    if device.type == "cpu" and torch.get_num_threads() > 1:  # one matrix after another, the path before 2026-12-05
        stages["eigenvalues_one_after_another"] = median_seconds(
            lambda: _one_after_another(covariances), args.repeats, sync
        )
    if device.type != "cpu":  # the accelerator's own eigensolver, the path before 2026-12-05
        stages["eigenvalues_on_device"] = median_seconds(
            lambda: eigenvalues(covariances, on_host=False), args.repeats, sync
        )
    result = {
        "candidate": "WPCASpace.small().sample(0), seed 0",
        "candidate_params": space.num_params(arch),
        "batch": [args.batch_size, args.seq_len],
        "device": str(device),
        "threads": torch.get_num_threads(),
        "seconds": stages,
        "ratios": {
            "wpca_over_forward": stages["wpca"] / stages["forward"],
            "eigenvalues_share_of_wpca": stages["eigenvalues"] / stages["wpca"],
            "covariances_over_forward": (stages["forward_and_covariances"] - stages["forward"]) / stages["forward"],
            "wpca_over_gradient_step": stages["wpca"] / stages["gradient_step"],
            "build_over_wpca": stages["build"] / stages["wpca"],
            "build_over_build_cpu_init": stages["build"] / stages["build_cpu_init"],
        },
        "seeded_build": seeded_build_checks(space, arch, device),
        "same_pca_dims_on_host_and_device": [dim_from_spectrum(e, 0.99) for e in eigenvalues(covariances)]
        == [dim_from_spectrum(e, 0.99) for e in eigenvalues(covariances, on_host=False)],
        "torch": torch.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
    }
    if "eigenvalues_one_after_another" in stages:
        result["ratios"]["eigenvalues_side_by_side_over_one_after_another"] = (
            stages["eigenvalues"] / stages["eigenvalues_one_after_another"]
        )
    if "eigenvalues_on_device" in stages:
        result["ratios"]["eigenvalues_on_device_over_on_host"] = stages["eigenvalues_on_device"] / stages["eigenvalues"]
    if device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name(device)
    if args.workers and device.type == "cpu":
        result["workers"] = workers_check(args.workers, args.batch_size, args.seq_len, args.repeats)
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
