"""Several workers, one search: run this script on as many machines (or processes) as you like.

    python examples/distributed_postgres.py --storage postgresql://user:pass@db-host/optuna --n-trials 100

Every worker opens the same study in the PostgreSQL storage and calls study.optimize; WPCASampler
keeps its generations in the storage, so the workers share one genetic search. A heartbeat marks
the trial of a killed worker FAIL and RetryHeartbeatStaleTrialCallback re-queues it for the others.
On one host without a database server, use --storage journal:///path/to/file.log instead.
On a brand-new database, start one worker first (or create the study once): workers that start at the
same instant race to create Optuna's tables.
"""

import argparse

import optuna
from optuna.storages import JournalStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend

import optuna_wpca

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--storage", required=True, help="postgresql://user:pass@host/db, or journal://FILE on one host")
parser.add_argument("--study-name", default="wpca-tiny-distributed", help="study every worker joins")
parser.add_argument("--n-trials", type=int, default=100, help="evaluations of all workers together (default 100)")
parser.add_argument("--batch-size", type=int, default=32, help="sequences in the minibatch (default 32)")
parser.add_argument("--seq-len", type=int, default=64, help="tokens per sequence (default 64)")
args = parser.parse_args()

if args.storage.startswith("journal://"):
    storage = JournalStorage(JournalFileBackend(args.storage[len("journal://"):]))
else:
    storage = RDBStorage(args.storage, heartbeat_interval=10, grace_period=30,
                         heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=2))
space, budget = optuna_wpca.preset("wpca-tiny")
study = optuna.create_study(study_name=args.study_name, storage=storage, direction="maximize", load_if_exists=True,
                            sampler=optuna_wpca.WPCASampler(space, max_params=budget.max_params, population_size=20))
objective = optuna_wpca.ZeroCostObjective(space,
                                          batch=optuna_wpca.text_batch(batch_size=args.batch_size, seq_len=args.seq_len))
study.optimize(objective, n_trials=args.n_trials)
print(f"this worker is done; the study holds {len(study.trials)} trials, best W-PCA {study.best_value:.4g}")
