"""One shortlisted architecture trained by the second stage's signal, measured at every rung.

:class:`ShortlistTrainer` prepares what every candidate of one stage shares once (the text, and for
KD the teacher and its targets on that text), then trains one architecture at a time, calling
``report(step, loss)`` after each held-out measurement; ``report`` may raise ``optuna.TrialPruned``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from optuna_wpca.pick._protocol import DEFAULT_PROTOCOL, PickProtocol
from optuna_wpca.spaces import Architecture, SearchSpace

#: What each signal's loss is, for tables and notes.
SIGNAL_LOSSES = {
    "kd": "held-out KD loss per matched term (Appendix F MSE against the teacher, gamma 0)",
    "mlm": "held-out masked-LM cross-entropy per masked token",
    "next_token": "held-out next-token cross-entropy per token",
}


@dataclass
class TrainingCurve:
    """A run's held-out loss at each measured step, and what it cost."""

    losses: dict[int, float] = field(default_factory=dict)
    #: Wall seconds of the run (training and measurements).
    seconds: float = 0.0
    #: CPU seconds of this process during the run (all threads).
    cpu_seconds: float = 0.0
    #: The step a run resumed from its checkpoint started at (``None``: trained from step 0).
    resumed_from: int | None = None

    @property
    def loss(self) -> float:
        """The loss at the last measured step."""
        return self.losses[max(self.losses)]


def language_model_corpus(path: str | os.PathLike | None = None) -> Any:
    """Training and held-out token streams: the bundled WikiText-2 split by article, or a text file's
    paragraphs with every fifth held out."""
    from optuna_wpca.distill._pretrain import MLMCorpus, wikitext_mlm_corpus

    if path is None:
        return wikitext_mlm_corpus()
    from optuna_wpca._text import _read_corpus, load_tokenizer

    lines = _read_corpus(path)
    tok = load_tokenizer()
    held = [s for i, s in enumerate(lines) if i % 5 == 4]
    train = [s for i, s in enumerate(lines) if i % 5 != 4]

    def stream(text: list[str]) -> np.ndarray:
        ids = tok(text, add_special_tokens=False)["input_ids"] if text else []
        return np.fromiter((t for seq in ids for t in seq), dtype=np.int64)

    return MLMCorpus(stream(train), stream(held), tok.cls_token_id, tok.sep_token_id, tok.mask_token_id, len(tok),
                     f"{Path(path).name}: {len(train)} training paragraphs, {len(held)} held out (every 5th)")


class ShortlistTrainer:
    """Trains architectures of ``space`` by ``protocol``'s signal (see :class:`PickProtocol`).

    Args:
        space: The search space the architectures belong to.
        protocol: The recipe.
        corpus: A text file to train on (default: the bundled WikiText-2).
        teacher: KD only: a teacher model or its directory (default: the bundled MiniLM).
        work_dir: KD only: where the teacher's targets on the training text are kept (computed once,
            reused by every candidate and every later stage on the same text); without it they are
            computed in a temporary folder for this trainer's life.
        device: Where training runs (``"cuda"`` when present, say).

    Example:
        >>> from optuna_wpca import DecoderSpace
        >>> from optuna_wpca.pick import PickProtocol, ShortlistTrainer
        >>> space = DecoderSpace(num_layers_choices=(1,), hidden_sizes=(32,), heads=(2,), ffn_sizes=(64,))
        >>> trainer = ShortlistTrainer(space, PickProtocol(steps=2, report_every=1, batch_size=2, seq_len=16,
        ...                                                eval_windows=2))
        >>> curve = trainer.train(space.sample(0))
        >>> trainer.signal, sorted(curve.losses)
        ('next_token', [1, 2])
    """

    def __init__(self, space: SearchSpace, protocol: PickProtocol = DEFAULT_PROTOCOL, *,
                 corpus: str | os.PathLike | None = None, teacher: Any = None,
                 work_dir: str | os.PathLike | None = None, device: str | torch.device = "cpu") -> None:
        self.space, self.protocol, self.device = space, protocol, str(device)
        self.signal = protocol.signal_for(space.family)
        self.corpus_path, self.teacher, self.work_dir = corpus, teacher, work_dir
        self._prepared: Any = None
        #: Seconds spent preparing what candidates share (the teacher's targets), once.
        self.setup_seconds = 0.0

    @property
    def loss_name(self) -> str:
        """What the reported loss is."""
        return SIGNAL_LOSSES[self.signal]

    def _prepare(self) -> Any:
        if self._prepared is not None:
            return self._prepared
        start = time.perf_counter()
        if self.signal == "kd":
            import tempfile

            from optuna_wpca.distill import TrainConfig, cache_teacher, load_teacher, load_text_corpus

            text = load_text_corpus(self.corpus_path)
            p = self.protocol
            text = type(text)(f"{text.name}-{p.train_examples}", text.train[: p.train_examples],
                              text.dev[: p.eval_windows])
            teacher = self.teacher
            if teacher is None or isinstance(teacher, (str, os.PathLike)):
                teacher = load_teacher(teacher, device=self.device, warn_untrained_head=False)
            root = Path(self.work_dir) if self.work_dir is not None else Path(tempfile.mkdtemp(prefix="optuna-wpca-pick-"))
            cache = cache_teacher(teacher, text, root / f"teacher-targets-{text.name}-{p.seq_len}",
                                  TrainConfig(batch_size=p.batch_size, max_seq_len=p.seq_len, device=self.device))
            self._prepared = (text, teacher, cache)
        else:
            self._prepared = language_model_corpus(self.corpus_path)
        self.setup_seconds = time.perf_counter() - start
        return self._prepared

    def train(self, arch: Architecture, *, report: Callable[[int, float], None] | None = None,
              checkpoint_dir: str | os.PathLike | None = None) -> TrainingCurve:
        """Train ``arch`` from its seeded initialisation; ``report(step, loss)`` after each measurement.

        With ``checkpoint_dir``, the run saves its state at each measurement and a later call with the
        same folder resumes there (the measurements before are reported again), so a killed stage
        trains no step twice beyond the last measurement.
        """
        prepared = self._prepare()
        p = self.protocol
        model = self.space.build(arch, seed=p.seed, device=self.device)
        curve = TrainingCurve()
        wall, cpu = time.perf_counter(), time.process_time()

        def measured(step: int, loss: float) -> None:
            curve.losses[step] = loss
            if report is not None:
                report(step, loss)

        try:
            if self.signal == "kd":
                curve.resumed_from = self._train_kd(model, prepared, measured, checkpoint_dir)
            else:
                from optuna_wpca.distill._pretrain import MLMConfig, pretrain_mlm, pretrain_next_token

                config = MLMConfig(steps=p.steps, checkpoints=tuple(p.rungs()), batch_size=p.batch_size,
                                   seq_len=p.seq_len, learning_rate=p.learning_rate, warmup_steps=p.warmup_steps,
                                   seed=p.seed, eval_seed=p.seed, eval_windows=p.eval_windows,
                                   eval_batch_size=32, device=self.device)
                run = pretrain_next_token if self.signal == "next_token" else pretrain_mlm
                curve.resumed_from = run(model, prepared, config, on_checkpoint=measured,
                                         checkpoint_dir=checkpoint_dir).resumed_from
        finally:
            curve.seconds = time.perf_counter() - wall
            curve.cpu_seconds = time.process_time() - cpu
        return curve

    def _train_kd(self, model: Any, prepared: Any, measured: Callable[[int, float], None],
                  checkpoint_dir: str | os.PathLike | None) -> int | None:
        from optuna_wpca.distill import TrainConfig, train
        from optuna_wpca.distill._trainer import CHECKPOINT
        from optuna_wpca.models._transformers import CandidateForSequenceClassification

        text, teacher, cache = prepared
        p = self.protocol
        # The KD loss sums one term per matched point (embeddings, and two per layer); per term, a
        # deeper student is not charged for having more of them.
        terms = 1 + 2 * len(model.layers)
        student = CandidateForSequenceClassification.from_candidate(model, 2, seed=p.seed)
        config = TrainConfig(steps=p.steps, batch_size=p.batch_size, max_seq_len=p.seq_len,
                             learning_rate=p.learning_rate, schedule="constant", warmup_steps=p.warmup_steps,
                             gamma=0.0, eval_every=p.report_every, checkpoint_every=p.report_every, seed=p.seed,
                             device=self.device)
        if checkpoint_dir is not None and (Path(checkpoint_dir) / CHECKPOINT).is_file():
            state = torch.load(Path(checkpoint_dir) / CHECKPOINT, map_location="cpu", weights_only=False)
            for h in state["history"]:  # measured before the stop: reported again to the new trial
                measured(h["step"], h["metric"] / terms)

        class _Reports:
            """What ``train`` calls on a trial, turned into ``measured`` (which prunes by raising)."""

            @staticmethod
            def report(value: float, step: int) -> None:
                measured(step, value / terms)

            @staticmethod
            def should_prune() -> bool:
                return False

        return train(student, text, config, teacher=teacher, trial=_Reports(), checkpoint_dir=checkpoint_dir,
                     teacher_cache=cache).resumed_from
