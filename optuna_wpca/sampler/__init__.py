"""The paper's genetic algorithm as an Optuna sampler."""

from optuna_wpca.sampler._operators import mutate, uniform_crossover
from optuna_wpca.sampler._sampler import WPCASampler

__all__ = ["WPCASampler", "mutate", "uniform_crossover"]
