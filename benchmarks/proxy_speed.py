"""W-PCA's cost against one gradient computation on the same candidate and batch.

    python benchmarks/proxy_speed.py [--batch-size 128 --seq-len 128 --repeats 3 --device cpu]

Scores a W-PCA-Small candidate (12 layers, hidden 528, within the 15.7M budget) with W-PCA (one
forward pass under ``torch.inference_mode``), and times a forward + backward pass of a masked-token
style loss on the same batch: the least a gradient-based proxy must spend (the vocabulary head only on 15% of the positions, as
BERT's MLM loss does). Both are medians of
``--repeats`` runs after one warm-up, measured in the same process, and the ratio is what to read:
absolute seconds move with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np
import torch

from optuna_wpca import WPCASpace, compute_proxy, text_batch


def median_seconds(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    space = WPCASpace.small()
    rng = np.random.default_rng(0)
    # The largest of 300 random candidates within the 15.7M budget: a W-PCA-Small-sized model.
    feasible = [a for a in (space.sample(rng) for _ in range(300)) if space.num_params(a) <= 15.7e6]
    arch = max(feasible, key=space.num_params)
    model = space.build(arch, seed=0, device=args.device)
    batch = text_batch(batch_size=args.batch_size, seq_len=args.seq_len).to(args.device)
    head = torch.nn.Linear(space.hidden_size, space.vocab_size).to(args.device)

    # A masked-LM loss as BERT computes it: the vocabulary head only on 15% of the positions.
    masked = torch.rand(batch.input_ids.shape, generator=torch.Generator().manual_seed(0)) < 0.15

    def gradient() -> None:
        model.zero_grad(set_to_none=True)
        hidden = model(**batch.as_kwargs())
        logits = head(hidden[masked.to(hidden.device)])
        loss = torch.nn.functional.cross_entropy(logits, batch.input_ids[masked.to(hidden.device)])
        loss.backward()

    wpca_s = median_seconds(lambda: compute_proxy("wpca", model, batch), args.repeats)
    grad_s = median_seconds(gradient, args.repeats)
    result = {
        "candidate_params": space.num_params(arch),
        "batch": [args.batch_size, args.seq_len],
        "wpca_seconds": wpca_s,
        "gradient_seconds": grad_s,
        "gradient_over_wpca": grad_s / wpca_s,
        "device": args.device,
        "threads": torch.get_num_threads(),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
