"""The paper's genetic algorithm as an Optuna sampler."""

from optuna_wpca.sampler._operators import DEFAULT_OPERATORS, OPERATORS, mutate, uniform_crossover
from optuna_wpca.sampler._sampler import WPCASampler, default_operators

__all__ = ["DEFAULT_OPERATORS", "OPERATORS", "WPCASampler", "default_operators", "mutate", "uniform_crossover"]
