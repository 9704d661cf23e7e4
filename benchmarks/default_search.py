"""2,000-evaluation searches with the default objectives against the same searches with W-PCA.

For each preset (``wpca-small``, ``lts-gpt2``) and objective (``wpca``; ``vpca_params_saliency``, 0.2's
default; on lts-gpt2 also ``wpca_saliency``, the decoders' default now, and ``wpca_saliency+boundary``, the same
with the GA operators that are the decoders' default since 0.3), the CLI's search
(population 50 x 40 generations, the default 16 x 128 minibatch, trials written 50 at a time) runs
into a journal, so a stopped run resumes where it stopped; one journal per study,
``benchmarks/results/default_search.STUDY.journal``, so that a segment does not replay the other
studies' logs. The journals are not committed: an lts-gpt2 trial records its
per-layer FFN distributions of 1,537 choices each, about 145 KB a trial. Each segment's wall-clock, the
process's CPU seconds (user + system, all threads) and the 1-minute load average at its end are
appended to ``benchmarks/results/default_search.segments.jsonl`` (committed): on this 2-core machine the
CPU seconds move much less than the wall-clock when another job shares it. To keep the machine idle for the
search, other work pauses it (``pause`` sends SIGSTOP, ``resume`` SIGCONT) and the pause windows go to
``benchmarks/results/default_search.pauses.jsonl``; the summary subtracts them from the trials they overlap.
The summary (wall time, evaluations per
second, and how the picked architectures differ: parameter count, depth, block mix) goes to
``benchmarks/results/default_search.json``.

    python benchmarks/default_search.py run [--stop-after SECONDS] [--only PRESET:PROXY ...]
    python benchmarks/default_search.py pause | resume
    python benchmarks/default_search.py summary [--only PRESET:PROXY ...]
    python benchmarks/default_search.py cross

``cross`` scores each search's pick with the other search's objective (its recorded minibatch,
initialisation seed, eta and, for a combination, its recorded reference sample) and places it among
that search's 2,000 evaluations: would the other objective have preferred it to its own pick?
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections import Counter
from pathlib import Path

import optuna
from optuna.trial import TrialState

from optuna_wpca import ZeroCostObjective, is_feasible, read_search
from optuna_wpca.cli import main as cli
from optuna_wpca.proxies import ReferenceSample

RESULTS = Path(__file__).parent / "results"
SEGMENTS = RESULTS / "default_search.segments.jsonl"
PAUSES = RESULTS / "default_search.pauses.jsonl"
_PAUSED_AT = RESULTS / "default_search.paused"
# vpca_params_saliency was 0.2's default for every space; wpca_saliency is the decoders' default now
# (the encoders' is wpca).
RUNS = [(preset, proxy) for preset in ("lts-gpt2", "wpca-small") for proxy in ("wpca", "vpca_params_saliency")]
RUNS.append(("lts-gpt2", "wpca_saliency"))
# The same search with the GA operators that became the decoders' default (0.3): its study name carries
# the operators' name, so the earlier study (the paper's operators, then the default) stays as it was.
RUNS.append(("lts-gpt2", "wpca_saliency+boundary"))
TRIALS = 2000


def _proxy_and_operators(proxy: str) -> tuple[str, str | None]:
    name, _, operators = proxy.partition("+")
    return name, operators or None


def study_name(preset: str, proxy: str) -> str:
    name, operators = _proxy_and_operators(proxy)
    return f"{preset}-{name}" + (f"-{operators}" if operators else "")


def journal(preset: str, proxy: str) -> Path:
    return RESULTS / f"default_search.{study_name(preset, proxy)}.journal"


def _storage(preset: str, proxy: str) -> optuna.storages.JournalStorage:
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal(preset, proxy))))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _load(preset: str, proxy: str) -> optuna.Study | None:
    """The study as its journal holds it (each call replays the journal: ~290 MB for lts-gpt2), or None."""
    try:
        return optuna.load_study(study_name=study_name(preset, proxy), storage=_storage(preset, proxy))
    except KeyError:
        return None


def _finished(study: optuna.Study | None) -> int:
    if study is None:
        return 0
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def run(stop_after: float | None, only: list[str] | None) -> None:
    start = time.time()
    for preset, proxy in RUNS:
        if only and f"{preset}:{proxy}" not in only:
            continue
        done = _finished(_load(preset, proxy))
        while done < TRIALS:
            left = None if stop_after is None else stop_after - (time.time() - start)
            if left is not None and left <= 0:
                return
            target = min(TRIALS, done + 500)  # segments of 500: a stop loses at most one
            t0, cpu0 = time.time(), _cpu_seconds()
            name, operators = _proxy_and_operators(proxy)
            code = cli(["search", "--preset", preset, "--proxy", name, "--storage", f"journal://{journal(preset, proxy)}",
                        "--study-name", study_name(preset, proxy), "--n-trials", str(target), "--write-every", "50",
                        "--sampler-seed", "0", "--quiet", "--top", "1",
                        *(["--operators", operators] if operators else [])])
            if code != 0:
                raise SystemExit(code)
            wall, cpu = time.time() - t0, _cpu_seconds() - cpu0
            after = _finished(_load(preset, proxy))
            with SEGMENTS.open("a") as f:
                f.write(json.dumps({"study": study_name(preset, proxy), "from": done, "to": after,
                                    "wall_seconds": wall, "cpu_seconds": cpu,
                                    "load_average_1min": os.getloadavg()[0]}) + "\n")
            done = after


def _runs() -> list[int]:
    import subprocess

    out = subprocess.run(["pgrep", "-f", "default_search.py run"], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split() if int(pid) != os.getpid()]


def pause() -> None:
    import signal

    pids = _runs()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    if pids and not _PAUSED_AT.exists():
        _PAUSED_AT.write_text(str(time.time()))
    print(f"paused {pids}" if pids else "no search running")


def resume() -> None:
    import signal

    for pid in _runs():
        os.kill(pid, signal.SIGCONT)
    if _PAUSED_AT.exists():
        with PAUSES.open("a") as f:
            f.write(json.dumps({"from": float(_PAUSED_AT.read_text()), "to": time.time()}) + "\n")
        _PAUSED_AT.unlink()
    print("resumed")


def _paused_within(start: float, end: float, pauses: list[dict]) -> float:
    return sum(max(0.0, min(end, p["to"]) - max(start, p["from"])) for p in pauses)


def _feasible(study: optuna.Study) -> list:
    """The study's completed trials that meet the budget (the pick is the best of them)."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if is_feasible(t)]


def _summary_of(preset: str, proxy: str, segments: list[dict]) -> dict | None:
    study = _load(preset, proxy)
    if study is None or not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return None
    finished = _finished(study)
    own = [s for s in segments if s["study"] == study_name(preset, proxy)]
    wall = sum(s["wall_seconds"] for s in own)
    cpu = [s["cpu_seconds"] for s in own if "cpu_seconds" in s]
    # The trials' own durations (start to complete, as Optuna records them) survive a killed segment;
    # they leave out the batched storage writes and the reference sample drawn before the first trial.
    pauses = [json.loads(line) for line in PAUSES.read_text().splitlines()] if PAUSES.exists() else []
    spans = [(t.datetime_start.timestamp(), t.datetime_complete.timestamp())
             for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
             if t.datetime_start and t.datetime_complete]
    durations = sorted(b - a - _paused_within(a, b, pauses) for a, b in spans)
    paused = sum(_paused_within(a, b, pauses) for a, b in spans)
    trial_seconds = sum(durations)
    # The median trial is what an idle machine gives even when a minority of trials ran beside other work.
    median = durations[len(durations) // 2] if durations else None
    record = read_search(study)
    space = record.space
    best = max(_feasible(study), key=lambda t: t.value)
    arch = space.from_params(best.params)
    layers = arch.layers
    mix = Counter(space.block_kind(layer) for layer in layers)
    return {
        "finished": finished, "target": TRIALS, "wall_seconds_of_whole_segments": wall,
        "trial_seconds": trial_seconds, "paused_seconds_subtracted": paused,
        "cpu_seconds_of_recorded_segments": sum(cpu) if cpu else None,
        "segments_with_cpu_seconds": len(cpu), "segments": len(own),
        "evaluations_per_second": finished / trial_seconds if trial_seconds else None,
        "median_trial_seconds": median,
        "best": {"trial": best.number, "value": best.value, "num_params": space.num_params(arch),
                 "depth": arch.num_layers, "block_mix": dict(mix),
                 "ffn_widths": [int(layer.ffn_size) for layer in layers], "hidden": arch.hidden_size,
                 "architecture": space.summary(arch)},
        "reference_sample": (record.reference or {}).get("size"),
    }


def summary(only: list[str] | None = None) -> None:
    """Summarise every study, or only the ``PRESET:PROXY`` ones named (the others' entries are kept
    from the last summary: reading an lts-gpt2 journal of 2,000 trials takes minutes)."""
    segments = [json.loads(line) for line in SEGMENTS.read_text().splitlines()] if SEGMENTS.exists() else []
    last = RESULTS / "default_search.json"
    kept = json.loads(last.read_text()) if last.exists() else {}
    # Without --only every study is summarised again; the cross-scoring (``cross``) is kept either way.
    out = kept if only else {k: v for k, v in kept.items() if k == "cross"}
    for preset, proxy in RUNS:
        if only and f"{preset}:{proxy}" not in only:
            continue
        s = _summary_of(preset, proxy, segments)
        if s is None:
            continue
        out[study_name(preset, proxy)] = s
        b = s["best"]
        rate = f"{s['evaluations_per_second']:.2f}/s" if s["evaluations_per_second"] else "-"
        median = f"median {s['median_trial_seconds']:.3f} s" if s["median_trial_seconds"] else "-"
        print(f"{study_name(preset, proxy):<36} {s['finished']:>5}/{TRIALS}  {s['trial_seconds']:>8.0f} s  {rate:>8}  "
              f"{median}  "
              f"best: {b['num_params']:,} params, {b['depth']} layers, {b['block_mix']}, hidden {b['hidden']}, "
              f"FFN {b['ffn_widths']}")
    (RESULTS / "default_search.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS / 'default_search.json'}")


def _objective(study: optuna.Study, proxy: str) -> tuple[ZeroCostObjective, ReferenceSample | None]:
    record = read_search(study)
    options = {} if record.eta is None else {"eta": record.eta}
    name, _ = _proxy_and_operators(proxy)
    objective = ZeroCostObjective(record.space, name, batch=record.scoring_batch(), seed=record.init_seed or 0,
                                  budget=record.budget, **options)
    reference = ReferenceSample.from_dict(record.reference) if record.reference else None
    return objective, reference


def cross() -> None:
    """Score each pick with the other objective and rank it among that objective's own search."""
    last = RESULTS / "default_search.json"
    out = json.loads(last.read_text()) if last.exists() else {}
    out["cross"] = {}
    for preset in dict.fromkeys(p for p, _ in RUNS):
        proxies = [proxy for p, proxy in RUNS if p == preset]
        loaded = {proxy: _load(preset, proxy) for proxy in proxies if journal(preset, proxy).exists()}
        studies = {proxy: study for proxy, study in loaded.items() if _finished(study) >= TRIALS}
        picks = {}
        for proxy, study in studies.items():
            feasible = _feasible(study)
            best = max(feasible, key=lambda t: t.value)
            picks[proxy] = (best, feasible)
        for proxy, study in studies.items():
            objective, reference = _objective(study, proxy)
            own_best, feasible = picks[proxy]
            space = objective.space
            # The recomputed value of the study's own pick checks that the scoring is the search's.
            own_again = objective.score(space.from_params(own_best.params), reference)[0][0]
            for other, (other_best, _) in picks.items():
                if other == proxy:
                    continue
                value = objective.score(space.from_params(other_best.params), reference)[0][0]
                above = sum(t.value > value for t in feasible)
                entry = {"pick_of": other, "pick_trial": other_best.number, "scored_by": proxy, "value": value,
                         "own_pick_value": own_best.value, "own_pick_recomputed": own_again,
                         "trials_scoring_higher": above, "feasible_trials": len(feasible),
                         "percentile": 1 - above / len(feasible)}
                out["cross"][f"{preset}: {other} pick under {proxy}"] = entry
                print(f"{preset}: the {other} pick (trial {other_best.number}) scores {value:.4g} under {proxy}; "
                      f"{above} of {len(feasible)} feasible trials of the {proxy} search score higher "
                      f"(its pick {own_best.value:.4g}, recomputed {own_again:.4g})")
    last.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {last}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("run", "pause", "resume", "summary", "cross"))
    parser.add_argument("--stop-after", type=float, default=None, help="seconds; the run stops after the segment "
                        "running then")
    parser.add_argument("--only", nargs="*", default=None, help="PRESET:PROXY pairs to run or summarise")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    {"run": lambda: run(args.stop_after, args.only), "pause": pause, "resume": resume, "summary": lambda: summary(args.only),
     "cross": cross}[args.what]()
