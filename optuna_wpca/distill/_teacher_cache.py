"""The teacher's KD targets for a whole training set, computed once and read back at every step.

A teacher in eval mode gives an example the same outputs whichever batch it sits in, so a benchmark
that distils many students from one teacher on one task need not run the teacher again for each
student: the targets (embeddings, every attention-block and layer output, logits) are written once
to a memory-mapped file, and each training step reads the rows of its batch.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from optuna_wpca._errors import InputError
from optuna_wpca._text import load_tokenizer, model_inputs
from optuna_wpca.distill._config import TrainConfig
from optuna_wpca.distill._data import TextCorpus, encode_split
from optuna_wpca.distill._models import Recorder, teacher_points

if TYPE_CHECKING:
    from optuna_wpca.distill._tasks import Task

FORMAT = "optuna-wpca teacher cache 1"


def teacher_fingerprint(teacher: nn.Module) -> str:
    """SHA-256 over the teacher's parameter and buffer values (names, shapes and bytes)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(teacher.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


class TeacherCache:
    """Read side of a cache directory: ``hidden.npy`` (examples, points, tokens, width), ``logits.npy``,
    ``input_ids.npy`` (what the targets were computed for) and ``meta.json``.

    Point 0 is the embeddings, points 1..L the attention-block outputs, L+1..2L the layer outputs.
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        meta_file = self.directory / "meta.json"
        if not meta_file.is_file():
            raise FileNotFoundError(f"{str(self.directory)!r} holds no teacher cache (meta.json missing)")
        self.meta = json.loads(meta_file.read_text())
        if self.meta.get("format") != FORMAT:
            raise InputError(f"{str(self.directory)!r} is not a teacher cache of format {FORMAT!r}")
        self.hidden = np.load(self.directory / "hidden.npy", mmap_mode="r")
        logits_file = self.directory / "logits.npy"
        self.logits = np.load(logits_file) if logits_file.is_file() else None
        self.input_ids = torch.from_numpy(np.load(self.directory / "input_ids.npy"))
        self.num_layers = int(self.meta["num_layers"])

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the teacher the cache was computed from."""
        return self.meta["teacher"]

    def holds(self, input_ids: torch.Tensor) -> bool:
        """Whether the cache was computed for exactly these token ids."""
        return torch.equal(input_ids.cpu(), self.input_ids)

    def check(self, input_ids: torch.Tensor, teacher: nn.Module | None = None) -> None:
        """Raise ValueError unless the cache holds exactly these examples (and this teacher's targets)."""
        if not self.holds(input_ids):
            raise InputError(
                f"teacher cache {str(self.directory)!r} was computed for other training data "
                f"({tuple(self.input_ids.shape)} token ids, not {tuple(input_ids.shape)}); build it for this task "
                "and max_seq_len"
            )
        if teacher is not None and teacher_fingerprint(teacher) != self.fingerprint:
            raise InputError(f"teacher cache {str(self.directory)!r} was computed by another teacher")

    def targets(self, idx: torch.Tensor, device: Any = "cpu") -> dict[str, Any]:
        """The KD targets of the examples ``idx``, laid out as the KD loss reads a teacher's outputs."""
        rows = idx.cpu().numpy()
        hidden = torch.from_numpy(np.ascontiguousarray(self.hidden[rows])).to(device)
        n = self.num_layers
        out: dict[str, Any] = {
            "embeddings": hidden[:, 0],
            "attention": [hidden[:, 1 + i] for i in range(n)],
            "ffn": [hidden[:, 1 + n + i] for i in range(n)],
        }
        if self.logits is not None:
            out["logits"] = torch.from_numpy(self.logits[rows]).to(device)
        return out

    @classmethod
    def write(
        cls,
        directory: str | os.PathLike,
        teacher: nn.Module,
        data: dict[str, torch.Tensor],
        *,
        batch_size: int = 64,
        device: Any = "cpu",
        extra: dict[str, Any] | None = None,
    ) -> "TeacherCache":
        """Run ``teacher`` once over the encoded ``data`` and store its targets in ``directory``.

        Written into a sibling temporary directory and renamed into place, so a crash never leaves
        a half-written cache where a reader would take it; concurrent writers take a lock, and the
        second one finds the first one's cache.
        """
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        fingerprint = teacher_fingerprint(teacher)
        with open(directory.with_name(directory.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (directory / "meta.json").is_file():
                cache = cls(directory)
                if cache.fingerprint == fingerprint and cache.holds(data["input_ids"]):
                    return cache
                shutil.rmtree(directory)
            tmp = directory.with_name(directory.name + f".tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            cls._compute(tmp, teacher, data, batch_size, device, fingerprint, extra or {})
            os.rename(tmp, directory)
        return cls(directory)

    @staticmethod
    def _compute(path: Path, teacher: nn.Module, data: dict[str, torch.Tensor], batch_size: int, device: Any,
                 fingerprint: str, extra: dict[str, Any]) -> None:
        was_training = teacher.training
        teacher.to(device).eval()
        points = teacher_points(teacher)
        n_layers = len(points["ffn"])
        n, tokens = data["input_ids"].shape
        width = None
        hidden = logits = None
        recorder = Recorder(points)
        try:
            with torch.inference_mode():
                for start in range(0, n, batch_size):
                    batch = {k: v[start : start + batch_size].to(device) for k, v in model_inputs(data).items()}
                    recorder.clear()
                    out = teacher(**batch)
                    stacked = torch.stack(
                        [recorder.outputs["embeddings"][0], *recorder.outputs["attention"], *recorder.outputs["ffn"]],
                        dim=1,
                    ).float().cpu().numpy()
                    if hidden is None:
                        width = stacked.shape[-1]
                        hidden = np.lib.format.open_memmap(path / "hidden.npy", mode="w+", dtype=np.float32,
                                                           shape=(n, 1 + 2 * n_layers, tokens, width))
                    hidden[start : start + stacked.shape[0]] = stacked
                    if getattr(out, "logits", None) is not None:
                        if logits is None:
                            logits = np.zeros((n, out.logits.shape[-1]), dtype=np.float32)
                        logits[start : start + stacked.shape[0]] = out.logits.float().cpu().numpy()
        finally:
            recorder.remove()
            teacher.train(was_training)
        hidden.flush()
        del hidden
        if logits is not None:
            np.save(path / "logits.npy", logits)
        np.save(path / "input_ids.npy", data["input_ids"].cpu().numpy())
        meta = {"format": FORMAT, "teacher": fingerprint, "examples": n, "tokens": tokens, "width": width,
                "num_layers": n_layers, **extra}
        (path / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def cache_teacher(
    teacher: nn.Module,
    task: "Task | TextCorpus",
    directory: str | os.PathLike,
    config: TrainConfig | None = None,
    *,
    tokenizer: Any = None,
) -> TeacherCache:
    """Compute ``teacher``'s KD targets for every training example of ``task`` once, into ``directory``.

    Pass the result to :func:`train` as ``teacher_cache`` to distil any number of students without
    running the teacher again (``config.max_seq_len`` must be the one the students train with). A
    cache already in ``directory`` for the same teacher and examples is reused.

    Example (as ``benchmarks/own_bench.py`` uses it)::

        cache = cache_teacher(teacher, task, "work/teacher-cache", TrainConfig(max_seq_len=64))
        train(student, task, config, teacher=teacher, teacher_cache=cache)
    """
    config = config or TrainConfig()
    data = encode_split(task, "train", tokenizer or load_tokenizer(), config.max_seq_len)
    return TeacherCache.write(directory, teacher, data, batch_size=max(config.batch_size, 64), device=config.device,
                              extra={"task": task.name, "max_seq_len": config.max_seq_len})
