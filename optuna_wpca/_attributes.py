"""The names under which optuna-wpca writes into an Optuna study, in one place.

Study user attributes hold the search's record (see :class:`optuna_wpca.SearchRecord`); trial user
attributes hold what a trial was and what its proxies measured. optuna-dashboard shows both, so the
names are part of what users read, and changing one breaks the studies already written.
"""

# Study user attributes: the search record.
SPACE = "optuna_wpca.space"
MAX_PARAMS = "optuna_wpca.max_params"
MIN_PARAMS = "optuna_wpca.min_params"
#: The proxies, comma-separated, in the order of the study's values.
PROXIES = "optuna_wpca.proxy"
#: The minibatch's shape, ``[sequences, tokens]``.
BATCH = "optuna_wpca.batch"
#: Where the minibatch came from (corpus and its SHA-256, tokenizer, batch seed), the initialisation
#: seed and the proxies' options that change a value (eta, a latency model).
MINIBATCH_SOURCE = "optuna_wpca.minibatch_source"
#: WPCASampler's settings.
GA = "optuna_wpca.ga"
#: The reference sample that scales a combined objective (``ReferenceSample.to_dict``).
REFERENCE = "optuna_wpca.reference"
#: Which worker is scoring the reference sample, and how far it is (``optuna_wpca._claim.StudyClaim``).
REFERENCE_CLAIM = "optuna_wpca.reference_claim"
#: The folder of the search's architecture pictures (``search --artifact-dir``), absolute, so that
#: ``refine`` draws its trials' pictures in the same place.
ARTIFACT_DIR = "optuna_wpca.artifact_dir"
#: A distillation study's zero-cost study and task.
SOURCE_STUDY = "optuna_wpca.source_study"
TASK = "optuna_wpca.task"

# Trial user attributes.
#: Whether the candidate fits the budget (mirrors the Optuna constraints).
FEASIBLE = "feasible"
#: The candidate's parameter count under the space's convention.
NUM_PARAMS = "num_params"
#: The candidate in one line (``SearchSpace.summary``).
ARCHITECTURE = "architecture"
#: PCA dim of each layer's FFN activations (W-PCA's per-layer count).
PCA_DIMS = "pca_dims"
#: Whether the values came from the objective's cache (the same architecture scored before).
CACHED = "cached"
#: Seconds the proxies took (0 when cached).
SECONDS = "seconds"
#: A distillation trial's zero-cost trial number, and that trial's value.
SOURCE_TRIAL = "zero_cost_trial"
SOURCE_VALUE = "zero_cost_value"
#: A distillation trial's dev metric's name (``accuracy``), its training time, and where the student was saved.
METRIC = "metric"
TRAIN_SECONDS = "train_seconds"
SAVED_TO = "saved_to"
#: A refined trial's parent (``optuna-wpca refine``).
REFINED_FROM = "refined_from"

#: The part of a ``ProxyResult`` that names other proxies' values computed on the way (W-PCA yields V-PCA).
BYPRODUCTS = "byproducts"

#: Trial user attributes that describe a trial rather than score it (a model card leaves them out of its scores).
NOT_SCORES = (FEASIBLE, NUM_PARAMS, ARCHITECTURE, PCA_DIMS, CACHED, SECONDS, SOURCE_TRIAL, SOURCE_VALUE, METRIC,
              TRAIN_SECONDS, SAVED_TO, REFINED_FROM)

# The second stage (``optuna-wpca pick``).
#: On the zero-cost study: the pick, its shortlist and each candidate's rung losses (``read_pick``).
PICK = "optuna_wpca.pick"
#: On the second-stage study: its protocol, zero-cost study and shortlist, compared on resume.
PICK_PROTOCOL = "optuna_wpca.pick_protocol"
PICK_SHORTLIST = "optuna_wpca.pick_shortlist"
#: A second-stage trial's held-out loss per measured step, and its training time in CPU seconds.
LOSSES = "losses"
CPU_SECONDS = "cpu_seconds"
