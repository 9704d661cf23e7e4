"""Where a decoders'-default evaluation spends its time, phase by phase, against a W-PCA evaluation.

    python benchmarks/shared_pass_phases.py [--n 12] [--preset lts-gpt2]

For N architectures within the preset's budget (seeded), on the search's 16 x 128 minibatch: building
the model; W-PCA as the search computes it (a forward pass under ``torch.inference_mode`` that stops at
the last FFN, then the eigensolver); and the shared pass of ``wpca_saliency`` split into its phases (the
forward pass that records the FFN covariances and keeps what the backward pass needs, the next-token
head over the vocabulary, the backward pass to the FFN weights, the saliency sum, the eigensolver). The
shared pass is timed with the same code the objective runs (``_shared_pass``), piece by piece.

The ratio floor it prints is what ``wpca_saliency`` would cost against W-PCA if its forward pass were
free of autograd's overhead (as cheap as W-PCA's): build + W-PCA's own pass + head + backward, over
build + W-PCA. Run it on an idle machine. Writes ``benchmarks/results/shared_pass_phases.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

import optuna_wpca
from optuna_wpca.proxies import compute_proxy
from optuna_wpca.proxies._baselines import _scoring, gradients_only_for, saliency_of
from optuna_wpca.proxies._pca import CovarianceRecorder, eigenvalues
from optuna_wpca.proxies._shared_pass import next_token_loss_and_grad


def phases(space, arch, batch) -> dict[str, float]:
    out: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        out[name] = now - clock
        clock = now

    model = space.build(arch, seed=0)
    lap("build")
    compute_proxy("wpca", model, batch)
    lap("wpca (inference forward + eigensolver)")
    linears = model.ffn_linears()
    ids = batch.input_ids
    with _scoring(model), gradients_only_for(model, [lin.weight for lin in linears]):
        with CovarianceRecorder(model, batch) as recorder:
            hidden = model(ids)
        lap("shared: forward with autograd")
        h = hidden[:, :-1].reshape(-1, hidden.shape[-1])
        _, grad = next_token_loss_and_grad(h.detach(), model.embeddings.word.weight.detach(), ids[:, 1:].reshape(-1))
        lap("shared: next-token head")
        h.backward(grad)
        lap("shared: backward")
        saliency_of(linears)
        lap("shared: saliency sum")
    eigenvalues(recorder.result())
    lap("shared: eigensolver")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=12)
    parser.add_argument("--preset", default="lts-gpt2")
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "shared_pass_phases.json"))
    args = parser.parse_args()
    space, budget = optuna_wpca.preset(args.preset)
    batch = optuna_wpca.text_batch(batch_size=16, seq_len=128)
    rng = np.random.default_rng(1)
    archs = []
    while len(archs) < args.n + 1:
        arch = space.sample(rng)
        if budget.contains(space.num_params(arch)):
            archs.append(arch)
    phases(space, archs[0], batch)  # warm-up, untimed
    runs = [phases(space, arch, batch) for arch in archs[1:]]
    median = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
    build, wpca = median["build"], median["wpca (inference forward + eigensolver)"]
    shared = sum(v for k, v in median.items() if k.startswith("shared"))
    floor = (build + wpca + median["shared: next-token head"] + median["shared: backward"]) / (build + wpca)
    result = {
        "command": f"python benchmarks/shared_pass_phases.py --n {args.n} --preset {args.preset}",
        "machine": f"{platform.machine()}, {platform.system()}, torch {torch.__version__}",
        "torch_threads": torch.get_num_threads(),
        "median_s": median,
        "ratio_now": (build + shared) / (build + wpca),
        "ratio_floor_with_a_free_autograd_forward": floor,
    }
    for name, seconds in median.items():
        print(f"{name:<42} {seconds:.3f} s")
    print(f"ratio, build + shared pass over build + W-PCA: {result['ratio_now']:.2f}; "
          f"floor with a forward pass as cheap as W-PCA's: {floor:.2f}")
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
