"""The resumable ranking's checkpoint: one JSON line per scored architecture, after a settings line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from optuna_wpca._errors import InputError
from optuna_wpca.ranking._benchmark import Benchmark

def entry_key(benchmark: Benchmark, i: int) -> str:
    """What a checkpoint line is found by: the entry's id and its architecture, so entries keep their
    scores when the file gains or reorders entries, and an id that now names another architecture is
    scored again."""
    params = benchmark.space_of(i).to_params(benchmark.archs[i])
    return json.dumps([benchmark.ids[i], params], sort_keys=True, default=str)


def read_checkpoint(path: str | Path, settings: dict[str, Any], keys: list[str],
                     metric: str) -> dict[str, dict[str, tuple]]:
    """Entries already scored, by ``entry_key``. Files of optuna-wpca 0.x before entry keys (a
    ``metric`` in the settings line, entries by index) are read when the metric is the same one."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return {}
    lines = path.read_text().splitlines()
    try:
        header = json.loads(lines[0])["settings"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise InputError(f"checkpoint {str(path)!r} does not start with a ranking settings line") from None
    expected = json.loads(json.dumps(settings))  # as it reads back: tuples become lists
    by_index = "metric" in header  # the older layout: indices into the entries scored by that metric
    if by_index:
        expected = {**expected, "metric": metric}
    if header != expected:
        changed = sorted(k for k in expected if header.get(k) != expected[k])
        raise InputError(f"checkpoint {str(path)!r} was written with other settings ({', '.join(changed)}); "
                         "use another file or the same settings")
    done: dict[str, dict[str, tuple]] = {}
    for line in lines[1:]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a kill: that entry is scored again
            continue
        if "settings" in record:  # shards that started on an empty file both wrote the header
            if record["settings"] != header:
                raise InputError(f"checkpoint {str(path)!r} mixes rankings with different settings")
            continue
        if "key" in record:
            key = record["key"]
        elif by_index and int(record["index"]) < len(keys):
            key = keys[int(record["index"])]
        else:
            continue
        done[key] = {k: tuple(v) for k, v in record["scores"].items()}
    return done
