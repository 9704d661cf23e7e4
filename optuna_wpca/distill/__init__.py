"""Train only the winners: knowledge distillation of searched students from a pretrained teacher."""

from optuna_wpca.distill._losses import Projections, dist_loss, kd_loss, pkd_loss, soft_cross_entropy
from optuna_wpca.distill._mapping import layer_mapping
from optuna_wpca.distill._models import bundled_teacher_path, load_teacher
from optuna_wpca.distill._tasks import METRICS, Task, load_glue_files, load_task
from optuna_wpca.distill._config import TrainConfig, TrainResult
from optuna_wpca.distill._data import TextCorpus, load_text_corpus
from optuna_wpca.distill._supernet import Supernet, SupernetResult, train_supernet
from optuna_wpca.distill._pretrain import (
    MLMConfig, MLMCorpus, MLMResult, pretrain_mlm, pretrain_next_token, wikitext_mlm_corpus,
)
from optuna_wpca.distill._teacher_cache import TeacherCache, cache_teacher, teacher_fingerprint
from optuna_wpca.distill._top_trials import DistillationObjective, DistillTopTrials, distill_top_trials
from optuna_wpca.distill._trainer import evaluate, finetune_teacher, train


def __getattr__(name: str) -> object:
    # The student is the candidate's transformers classifier; importing it imports transformers'
    # modelling code, so it is looked up when first used, not with the package.
    if name == "StudentClassifier":
        from optuna_wpca.models._transformers import CandidateForSequenceClassification

        return CandidateForSequenceClassification
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DistillTopTrials",
    "DistillationObjective",
    "METRICS",
    "MLMConfig",
    "MLMCorpus",
    "MLMResult",
    "Projections",
    "StudentClassifier",
    "Supernet",
    "SupernetResult",
    "Task",
    "TeacherCache",
    "TextCorpus",
    "TrainConfig",
    "TrainResult",
    "cache_teacher",
    "evaluate",
    "distill_top_trials",
    "finetune_teacher",
    "dist_loss",
    "kd_loss",
    "pkd_loss",
    "layer_mapping",
    "load_glue_files",
    "load_task",
    "load_text_corpus",
    "bundled_teacher_path",
    "load_teacher",
    "pretrain_mlm",
    "pretrain_next_token",
    "soft_cross_entropy",
    "teacher_fingerprint",
    "train",
    "train_supernet",
    "wikitext_mlm_corpus",
]
