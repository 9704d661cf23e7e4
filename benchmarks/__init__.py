"""The measurement scripts behind docs/benchmarks.md, each runnable as ``python benchmarks/NAME.py``.

A package so that the tests import the logic they check (``from benchmarks import own_bench``) instead of
editing ``sys.path``; it is not part of the installed ``optuna_wpca`` distribution.
"""
