
import sys, optuna
from optuna_wpca import WPCASampler, WPCASpace, ZeroCostObjective, text_batch
optuna.logging.set_verbosity(optuna.logging.WARNING)
url, name, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
space = WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)
study = optuna.load_study(study_name=name, storage=url, sampler=WPCASampler(space, population_size=50, seed=seed))
study.optimize(ZeroCostObjective(space, batch=text_batch(batch_size=4, seq_len=16)), n_trials=n)
