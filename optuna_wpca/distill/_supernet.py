"""ELM's one-shot path: a weight-sharing supernet over a W-PCA-family space, trained by KD with
single-path sampling; a candidate is scored with the weights it inherits from it.

The supernet holds, for every layer, one BERT block and one MobileBERT block at the space's widest
FFN, and one embedding. A path (an architecture of the space) uses, in layer i, the block of its
type, the first ``ffn_size`` units of its FFN (rows of the first linear, columns of the second)
and its number of heads: the attention width is fixed in these spaces, so heads only change how
the same projections are split and need no weights of their own. A path runs as the candidate
model itself (``torch.func.functional_call`` with the sliced weights), so the KD trainer's hooks
and losses apply unchanged and :meth:`Supernet.extract` gives exactly the path's function as a
standalone model.

Training (:func:`train_supernet`) samples one path per step from the space and distils the
teacher into it with the Appendix F feature losses (gamma 0: task-agnostic, on raw text); the
dev KD loss of a fixed set of paths is reported to an Optuna trial, which may prune the run. The
registered proxy ``supernet`` scores a candidate by minus its inherited path's KD loss on the
minibatch (higher is better); it needs ``supernet=DIR`` (a directory written by
:meth:`Supernet.save`) and is left out of ``--proxy all``, since it is not zero-cost.
"""

from __future__ import annotations

import functools
import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch
from torch import nn
from torch.func import functional_call

from optuna_wpca._errors import InputError
from optuna_wpca._text import TextBatch, load_tokenizer, model_inputs
from optuna_wpca.distill._config import TrainConfig
from optuna_wpca.distill._data import TextCorpus, encode_split
from optuna_wpca.distill._losses import Projections, kd_loss
from optuna_wpca.distill._mapping import layer_mapping
from optuna_wpca.distill._models import Recorder, load_teacher, student_points, teacher_encoder, teacher_points
from optuna_wpca.distill._trainer import optimizer_and_schedule, take_step
from optuna_wpca.models import WPCALayerConfig, WPCAModel
from optuna_wpca.spaces import Architecture, WPCASpace, space_from_dict

_FFN_ROWS = ("ffn_in.weight", "ffn_in.bias")
_FFN_COLUMNS = ("ffn_out.weight",)
_TEMPLATES = 64  # path modules kept: building one costs a model's allocation


class Supernet(nn.Module):
    """Weight-sharing supernet over a :class:`WPCASpace` or :class:`ELMSpace`.

    Example:
        >>> space = WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
        >>> net = Supernet(space, seed=0).eval()
        >>> arch = space.sample(0)
        >>> ids = torch.randint(0, 30522, (2, 8))
        >>> torch.allclose(net(arch, ids), net.extract(arch)(ids))
        True
    """

    def __init__(self, space: WPCASpace, seed: int | None = 0) -> None:
        super().__init__()
        if not isinstance(space, WPCASpace):
            raise InputError(f"a supernet needs a W-PCA-family space (WPCASpace, ELMSpace), not {type(space).__name__}")
        self.space = space
        self.widest = space.ffn_unit * max(space.ffn_mults)
        self.blocks = nn.ModuleDict()
        for k, block in enumerate(space.blocks):
            layers = [WPCALayerConfig(block=block, ffn_size=self.widest) for _ in range(space.num_layers)]
            config = replace(space.model_config(_any_arch(space)), layers=layers,
                             seed=None if seed is None else seed + k)
            whole = WPCAModel(config)
            if k == 0:
                self.embeddings = whole.embeddings
            self.blocks[block] = whole.layers
        self._templates: OrderedDict[str, nn.Module] = OrderedDict()

    def path_state(self, arch: Architecture) -> dict[str, torch.Tensor]:
        """The candidate's parameters by name, as views of the supernet's (gradients flow back)."""
        self.space.to_params(arch)  # raises for an architecture outside the space
        state = {f"embeddings.{n}": p for n, p in self.embeddings.named_parameters()}
        for i, layer in enumerate(arch.layers):
            for name, p in self.blocks[layer.block][i].named_parameters():
                if name in _FFN_ROWS:
                    p = p[: layer.ffn_size]
                elif name in _FFN_COLUMNS:
                    p = p[:, : layer.ffn_size]
                state[f"layers.{i}.{name}"] = p
        return state

    def template(self, arch: Architecture) -> WPCAModel:
        """A module with the candidate's structure (its own weights are never used)."""
        key = json.dumps(self.space.to_params(arch), sort_keys=True)
        if key in self._templates:
            self._templates.move_to_end(key)
        else:
            self._templates[key] = self.space.build(arch, seed=0)  # seeded: the global RNG is left alone
            if len(self._templates) > _TEMPLATES:
                self._templates.popitem(last=False)
        module = self._templates[key]
        return module.train(self.training)

    def forward(self, arch: Architecture, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Hidden states of path ``arch`` on the inputs, with the supernet's weights."""
        return functional_call(self.template(arch), self.path_state(arch), (input_ids,),
                               {"attention_mask": attention_mask, "token_type_ids": token_type_ids})

    def extract(self, arch: Architecture) -> WPCAModel:
        """Path ``arch`` as a standalone candidate model holding a copy of its inherited weights."""
        model = self.space.build(arch, seed=0, device=next(self.parameters()).device)
        model.load_state_dict({k: v.detach().clone() for k, v in self.path_state(arch).items()})
        return model

    def save(self, directory: str | Path, *, projections: Projections, teacher: str,
             extra: dict[str, Any] | None = None) -> None:
        """Write the weights, the KD projections, the space and the teacher's path to ``directory``."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        torch.save({"supernet": self.state_dict(), "projections": projections.state_dict(),
                    "widths": {k: sorted(v) for k, v in _student_widths(self.space).items()},
                    "teacher_width": projections.teacher_width}, path / "supernet.pt")
        (path / "supernet.json").write_text(json.dumps(
            {"space": self.space.to_dict(), "teacher": str(teacher), **(extra or {})}, indent=1) + "\n")

    @classmethod
    def load(cls, directory: str | Path, device: Any = "cpu") -> tuple["Supernet", Projections, dict[str, Any]]:
        """A saved supernet, its projections and its description (``supernet.json``)."""
        path = Path(directory)
        if not (path / "supernet.json").is_file() or not (path / "supernet.pt").is_file():
            raise FileNotFoundError(f"{str(path)!r} holds no saved supernet (supernet.json and supernet.pt)")
        meta = json.loads((path / "supernet.json").read_text())
        state = torch.load(path / "supernet.pt", map_location=device, weights_only=True)
        net = cls(space_from_dict(meta["space"]), seed=None)
        net.load_state_dict(state["supernet"])
        projections = Projections({k: set(v) for k, v in state["widths"].items()}, state["teacher_width"])
        projections.load_state_dict(state["projections"])
        return net.to(device), projections.to(device), meta


def _any_arch(space: WPCASpace) -> Architecture:
    return space.sample(0)


def _student_widths(space: WPCASpace) -> dict[str, set[int]]:
    h = space.hidden_size
    attention = {h if block == "bert" else space.bottleneck_size for block in space.blocks}
    return {"embeddings": {h}, "attention": attention, "ffn": {h}}


@dataclass
class SupernetResult:
    """What :func:`train_supernet` returns: the final dev KD loss of the fixed paths and the history."""

    dev_loss: float
    steps: int
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)


def _path_loss(net: Supernet, arch: Architecture, batch: dict[str, torch.Tensor], teacher: nn.Module,
               rec_t: Recorder, projections: Projections, mapping: list[int], config: TrainConfig) -> torch.Tensor:
    inputs = model_inputs(batch)
    rec_t.clear()
    with torch.no_grad():
        teacher(**inputs)
    target = {"embeddings": rec_t.outputs["embeddings"][0], "attention": rec_t.outputs["attention"],
              "ffn": rec_t.outputs["ffn"]}
    rec_s = Recorder(student_points(net.template(arch)))
    try:
        net(arch, **inputs)
        student = {"embeddings": rec_s.outputs["embeddings"][0], "attention": rec_s.outputs["attention"],
                   "ffn": rec_s.outputs["ffn"]}
    finally:
        rec_s.remove()
    loss, _ = kd_loss(student, target, projections, mapping, gamma=0.0, feature_loss=config.feature_loss)
    return loss


def train_supernet(
    net: Supernet,
    teacher: nn.Module,
    corpus: TextCorpus,
    config: TrainConfig | None = None,
    *,
    trial: optuna.trial.BaseTrial | None = None,
    eval_paths: int = 4,
) -> tuple[SupernetResult, Projections]:
    """Train ``net`` by KD from ``teacher`` on raw text, one path sampled from the space per step.

    Every ``config.eval_every`` steps the mean dev KD loss of ``eval_paths`` fixed paths (sampled
    with ``config.seed``) is reported to ``trial`` (lower is better), which may prune the run.
    AdamW and a linear decay after warm-up, as :func:`optuna_wpca.distill.train`.
    """
    config = config or TrainConfig()
    device = torch.device(config.device)
    tokenizer = load_tokenizer()
    if not corpus.train or not corpus.dev:
        raise InputError("the supernet's text corpus has an empty train or dev split")
    train_data = encode_split(corpus, "train", tokenizer, config.max_seq_len)
    dev_data = encode_split(corpus, "dev", tokenizer, config.max_seq_len)
    net.to(device).train()
    teacher.to(device).eval()
    t_width = teacher_encoder(teacher).config.hidden_size
    mapping = layer_mapping(net.space.num_layers, len(teacher_points(teacher)["ffn"]))
    projections = Projections(_student_widths(net.space), t_width).to(device)
    rec_t = Recorder(teacher_points(teacher))
    params = list(net.parameters()) + list(projections.parameters())
    optimizer, scheduler = optimizer_and_schedule(params, config)
    rng = np.random.default_rng(config.seed)
    fixed = [net.space.sample(rng) for _ in range(eval_paths)]
    torch.manual_seed(config.seed)
    n = train_data["input_ids"].shape[0]
    history: list[dict[str, float]] = []
    start = time.perf_counter()
    dev = float("nan")
    try:
        for step in range(config.steps):
            arch = net.space.sample(np.random.default_rng([config.seed, step]))
            idx = torch.from_numpy(np.random.default_rng([config.seed, 1, step]).integers(0, n, config.batch_size))
            batch = {k: v[idx].to(device) for k, v in train_data.items()}
            loss = _path_loss(net, arch, batch, teacher, rec_t, projections, mapping, config)
            take_step(loss, optimizer, scheduler, params, step, "supernet KD loss")
            done = step + 1
            if done % config.eval_every == 0 or done == config.steps:
                dev = _dev_loss(net, fixed, dev_data, teacher, rec_t, projections, mapping, config)
                history.append({"step": done, "loss": loss.item(), "dev_loss": dev})
                if trial is not None:
                    trial.report(dev, done)
                    if done < config.steps and trial.should_prune():
                        raise optuna.TrialPruned(f"supernet pruned at step {done} with dev KD loss {dev:.4f}")
    finally:
        rec_t.remove()
    return SupernetResult(dev, config.steps, time.perf_counter() - start, history), projections


def _dev_loss(net: Supernet, paths: list[Architecture], data: dict[str, torch.Tensor], teacher: nn.Module,
              rec_t: Recorder, projections: Projections, mapping: list[int], config: TrainConfig) -> float:
    was = net.training
    net.eval()
    limit = data["input_ids"].shape[0] if config.eval_limit is None else min(config.eval_limit, data["input_ids"].shape[0])
    total = 0.0
    try:
        with torch.no_grad():
            for arch in paths:
                for i in range(0, limit, config.batch_size):
                    batch = {k: v[i : min(limit, i + config.batch_size)].to(next(net.parameters()).device)
                             for k, v in data.items()}
                    total += _path_loss(net, arch, batch, teacher, rec_t, projections, mapping, config).item() * \
                        batch["input_ids"].shape[0]
    finally:
        net.train(was)
    return total / (limit * len(paths))


@functools.lru_cache(maxsize=2)
def _loaded(directory: str, device: str) -> tuple[Supernet, Projections, nn.Module]:
    net, projections, meta = Supernet.load(directory, device)
    teacher = load_teacher(meta["teacher"], device=device)
    return net.eval(), projections, teacher


def _architecture_of(model: nn.Module, space: WPCASpace) -> Architecture:
    # Whatever the model's class, its config either describes a path of the space or it does not.
    config = getattr(model, "config", None)
    try:
        arch = Architecture(config.hidden_size, tuple(config.layers))
        space.to_params(arch)
    except (AttributeError, TypeError, KeyError, ValueError) as err:
        raise InputError(f"the candidate ({type(model).__name__}) is not a path of the supernet's space: "
                         f"{err}") from None
    return arch


def inherited_kd_loss(model: nn.Module, batch: TextBatch, directory: str | Path) -> float:
    """The KD loss (teacher of the supernet, Appendix F feature losses) of ``model``'s path with the
    weights it inherits from the supernet saved in ``directory``, on ``batch``: what the ``supernet``
    proxy (``optuna_wpca/proxies/_supernet.py``) reports, negated."""
    device = str(next(model.parameters()).device)
    net, projections, teacher = _loaded(str(Path(directory).resolve()), device)
    arch = _architecture_of(model, net.space)
    rec_t = Recorder(teacher_points(teacher))
    try:
        with torch.inference_mode():
            inputs = {k: v.to(device) for k, v in batch.as_kwargs().items()}
            loss = _path_loss(net, arch, inputs, teacher, rec_t, projections,
                              layer_mapping(net.space.num_layers, len(teacher_points(teacher)["ffn"])), TrainConfig())
    finally:
        rec_t.remove()
    return float(loss)
