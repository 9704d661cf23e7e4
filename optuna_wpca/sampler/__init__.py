"""The paper's genetic algorithm as an Optuna sampler."""

from optuna_wpca.sampler._operators import mutate, uniform_crossover
from optuna_wpca.sampler._sampler import WPCASampler, is_feasible, top_trials

__all__ = ["WPCASampler", "is_feasible", "mutate", "top_trials", "uniform_crossover"]
