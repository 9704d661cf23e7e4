"""The one place that reads Optuna's private state.

Optuna's public API has no way to reach a study's storage object or the storage ids of a study and a
trial, which writing study attributes in bulk (``BatchedWrites``), heartbeats, failing a stale trial of
another process and dashboard notes need. Every such read goes through here, so a change in Optuna
breaks one module and its test (``tests/test_optuna_private.py``, run against the oldest supported
Optuna by ``make floors`` and the newest by ``make test``).
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

import optuna
from optuna.storages import BaseStorage

_tokens: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
_counter = itertools.count()


def storage_of(study: optuna.Study) -> BaseStorage:
    """The storage object a study reads and writes."""
    return study._storage


def study_id_of(study: optuna.Study) -> int:
    """The study's id in its storage."""
    return study._study_id


def trial_id_of(trial: optuna.Trial | optuna.trial.FrozenTrial) -> int:
    """The trial's id in its storage (not its number)."""
    return trial._trial_id


def study_key(study: optuna.Study) -> tuple[int, int]:
    """A key for per-study caches: the same for every ``Study`` object on the same storage object and
    study, never reused by another storage (unlike ``id()``, which Python hands out again once an
    object is freed). Optuna wraps an RDB storage in a new cache object per ``create_study`` /
    ``load_study`` given a URL, so two such loads are two keys: a cache is then filled twice, never
    shared wrongly."""
    storage = storage_of(study)
    token = _tokens.get(storage)
    if token is None:
        token = _tokens[storage] = next(_counter)
    return token, study_id_of(study)


def storage_url(study: optuna.Study) -> str | None:
    """The URL a study can be opened from again: an RDB's URL, ``journal://FILE`` for a journal file,
    ``None`` for an in-memory study or another storage."""
    layer = storage_of(study)
    for _ in range(3):  # an RDB storage sits behind a cache; a journal file behind its storage
        if getattr(layer, "url", None) is not None:
            return str(layer.url)
        if getattr(layer, "_file_path", None) is not None:
            return f"journal://{layer._file_path}"
        layer = getattr(layer, "_backend", None)
    return None
