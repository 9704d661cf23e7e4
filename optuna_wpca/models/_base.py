"""Shared pieces of every candidate model: initialisation, counting, saving and loading."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch
from torch import nn

from optuna_wpca._errors import InputError
from optuna_wpca._registry import Registry

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"

#: Ways of counting a candidate's parameters. ``"all"`` counts every parameter of the built
#: model; ``"non_embedding"`` counts only the encoder layers (embedding tables, the embedding
#: projection and the embedding LayerNorm excluded), the convention under which the W-PCA
#: paper's budgets (W-PCA-Small <= 15.7M at hidden 528) admit its models.
COUNT_CONVENTIONS = ("all", "non_embedding")


def config_from_dict(cls: type, raw: dict[str, Any]) -> Any:
    """Build a config dataclass from a dict, naming unknown fields instead of a TypeError."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(raw) - names
    if unknown:
        raise InputError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    return cls(**raw)


@dataclasses.dataclass
class LayeredConfig:
    """The base of every candidate's config: per-layer configs in ``layers`` (dicts from ``config.json``
    become ``layer_config`` instances), at least one of them, a known ``count`` convention, and
    :meth:`from_dict` naming unknown fields. A subclass is a dataclass declaring ``layers``, ``count``
    and its own fields, and sets ``layer_config`` and ``family`` (a name for messages)."""

    layer_config: ClassVar[type]
    family: ClassVar[str] = "candidate"

    def __post_init__(self) -> None:
        kind = self.layer_config
        self.layers = [layer if isinstance(layer, kind) else kind(**layer) for layer in self.layers]  # type: ignore[attr-defined]
        if not self.layers:  # type: ignore[attr-defined]
            raise InputError(f"a {self.family} candidate needs at least one layer")
        check_count_convention(self.count)  # type: ignore[attr-defined]

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Any:
        """The config from its ``to_dict`` form (``config.json``)."""
        return config_from_dict(cls, raw)


def check_count_convention(count: str) -> str:
    """Raise a clear error for a parameter-count convention that is not one of ``COUNT_CONVENTIONS``."""
    if count not in COUNT_CONVENTIONS:
        raise InputError(f"unknown parameter-count convention {count!r}; use one of {COUNT_CONVENTIONS}")
    return count


class NoNorm(nn.Module):
    """MobileBERT's element-wise affine map used in place of LayerNorm."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = nn.Parameter(torch.zeros(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight + self.bias


def init_weights(module: nn.Module, seed: int | None, std: float = 0.02) -> None:
    """BERT's initialisation: N(0, std) weights, zero biases, unit norms.

    A given ``seed`` makes it reproducible without touching the global RNG. The values are drawn
    where the weights live, by that device's generator: on the CPU they are those of every earlier
    release; on a GPU a seed gives its own reproducible values (build with ``init_device="cpu"``
    for the CPU's). Every parameter must be covered, since models are allocated uninitialised
    (see :func:`allocate`).
    """
    first = next(module.parameters(), None)
    device = first.device if first is not None else torch.device("cpu")
    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    done: set[int] = set()
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.Linear, nn.Conv1d, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=std, generator=generator)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.LayerNorm, NoNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            else:
                continue
            done.update(id(p) for p in m.parameters(recurse=False))
    missed = [name for name, p in module.named_parameters() if id(p) not in done]
    if missed:
        raise RuntimeError(f"init_weights does not cover parameters {missed}")


def allocate(
    model: nn.Module, build: Callable[[], None], seed: int | None, device: str | torch.device | None = None
) -> None:
    """Run ``build`` (which creates ``model``'s submodules) on the meta device, then allocate on
    ``device`` (default CPU) and initialise there once: no default init is wasted, nothing is
    initialised on the CPU to be copied to a GPU, and the global RNG is not consumed."""
    with torch.device("meta"):
        build()
    model.to_empty(device=device if device is not None else "cpu")
    init_weights(model, seed)


def additive_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """(B, N) 1/0 mask -> (B, 1, 1, N) additive mask, or None."""
    if attention_mask is None:
        return None
    mask = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - mask) * torch.finfo(dtype).min


#: Every candidate class by its ``model_type`` (what ``config.json`` names); filled as classes are defined.
MODEL_TYPES: "Registry[type[CandidateModel]]" = Registry("model type")


class CandidateModel(nn.Module):
    """Base of the candidate encoders.

    Subclasses set ``config_class`` and ``model_type`` and define ``embeddings`` (a module)
    and ``layers`` (an ``nn.ModuleList``), plus ``ffn_input_linears()``; ``ffn_linears()``,
    ``attention_modules()``, ``is_causal`` and ``classifiable`` have defaults to override. Generic
    code (proxies, refinement, distillation) reads a candidate through these only.
    """

    config_class: ClassVar[type]
    model_type: ClassVar[str]
    #: Whether a sequence-classification head can sit on it (an encoder; a causal decoder cannot).
    classifiable: ClassVar[bool] = True
    #: Whether a token sees only the tokens before it (a decoder): gradient proxies then take the
    #: next-token loss on the text as it is, instead of a masked-LM loss.
    is_causal: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("model_type"):  # declared by this class, not inherited
            MODEL_TYPES.register_class(cls.model_type, cls, label="model_type", attribute="model_type")
            from optuna_wpca.models._auto import register_when_transformers_loads

            register_when_transformers_loads()  # its transformers classes, now or once transformers loads

    @classmethod
    def transformers_names(cls) -> dict[str, str]:
        """The names of its transformers classes (``WPCAModel``: ``WPCATransformersConfig``,
        ``WPCATransformersModel``, ``WPCAForSequenceClassification``), as ``config.json`` lists them."""
        prefix = cls.__name__.removesuffix("Model")
        return {"config": f"{prefix}TransformersConfig", "model": f"{prefix}TransformersModel",
                "classifier": f"{prefix}ForSequenceClassification"}

    config: Any
    embeddings: nn.Module
    layers: nn.ModuleList

    def ffn_input_linears(self) -> list[nn.Linear]:
        """The first linear map of each layer's FFN, in layer order (where W-PCA looks)."""
        raise NotImplementedError

    def ffn_linears(self) -> list[nn.Linear]:
        """Every linear map of the layers' feed-forward parts, in layer order (what synaptic saliency
        reads). The default: each layer's ``ffn_in`` and ``ffn_out``."""
        return [lin for layer in self.layers for lin in (layer.ffn_in, layer.ffn_out)]

    def attention_modules(self) -> list[nn.Module]:
        """The softmax attention modules (query/key/value projections; head proxies read them), in
        layer order; none in a layer that mixes tokens otherwise."""
        from optuna_wpca.models._attention import SelfAttention

        return [m for m in self.modules() if isinstance(m, SelfAttention)]

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        max_pos = self.config.max_position_embeddings
        if input_ids.dim() != 2:
            raise InputError(f"input_ids must be (batch, tokens); got shape {tuple(input_ids.shape)}")
        if input_ids.shape[1] > max_pos:
            raise InputError(
                f"sequence of {input_ids.shape[1]} tokens is longer than the model's "
                f"max_position_embeddings={max_pos}"
            )
        if input_ids.numel() == 0:
            raise InputError("empty batch: input_ids has no tokens")
        return self.encode(self.embeddings(input_ids, token_type_ids), attention_mask)

    def encode(self, x: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """The layer stack over embedded tokens (bidirectional; decoders override it)."""
        mask = additive_mask(attention_mask, x.dtype)
        for layer in self.layers:
            x = layer(x, mask)
        return x

    def num_parameters(self, count: str | None = None) -> int:  # type: ignore[override]
        """Parameters under ``count`` (default: the model's convention), from the weights themselves."""
        count = check_count_convention(count or self.config.count)
        modules = [self] if count == "all" else [self.layers]
        return sum(p.numel() for m in modules for p in m.parameters())

    # -- transformers-style persistence -------------------------------------------------------

    def save_pretrained(self, save_directory: str | os.PathLike) -> None:
        """Write ``config.json`` and ``model.safetensors`` to ``save_directory``."""
        from safetensors.torch import save_file

        path = Path(save_directory)
        path.mkdir(parents=True, exist_ok=True)
        config = {"model_type": self.model_type, **dataclasses.asdict(self.config)}
        (path / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n")
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        tmp = path / (WEIGHTS_NAME + ".tmp")
        save_file(state, str(tmp), metadata={"format": "pt"})
        os.replace(tmp, path / WEIGHTS_NAME)

    @classmethod
    def from_pretrained(
        cls, directory: str | os.PathLike, *, device: str | torch.device = "cpu"
    ) -> "CandidateModel":
        """Load a model written by :meth:`save_pretrained` (or the encoder of a saved
        student classifier, ``CandidateForSequenceClassification``); works on the base class too.

        The directory is also a transformers one: after ``import optuna_wpca``,
        ``transformers.AutoModel.from_pretrained(directory)`` loads the same weights.
        """
        from safetensors.torch import load_file

        path = Path(directory)
        target, config = read_candidate_config(path)
        if cls is not CandidateModel and not issubclass(target, cls):
            raise InputError(f"{str(path)!r} holds a {target.__name__}, not a {cls.__name__}")
        model = target(config, device=device)  # allocated where it will run; the file's values replace the draw
        weights = path / WEIGHTS_NAME
        if not weights.is_file():
            raise FileNotFoundError(f"no {WEIGHTS_NAME} in {str(path)!r}")
        state = load_file(str(weights))
        if state and all(k.startswith(("encoder.", "pooler.", "classifier.")) for k in state):
            state = {k[len("encoder."):]: v for k, v in state.items() if k.startswith("encoder.")}
        model.load_state_dict(state)
        return model.to(device).eval()


#: The model types of releases before 0.2 (transformers refuses a dot in a registered name).
_RENAMED_TYPES = {"optuna_wpca.wpca": "optuna_wpca_wpca", "optuna_wpca.flexibert": "optuna_wpca_flexibert",
                  "optuna_wpca.decoder": "optuna_wpca_decoder"}


def read_candidate_config(directory: str | os.PathLike) -> tuple[type[CandidateModel], Any]:
    """The candidate class and its config from ``directory/config.json``. Keys that are not the
    config's fields (those transformers writes: ``id2label``, ``transformers_version``, ...) are
    ignored."""
    path = Path(directory)
    config_file = path / CONFIG_NAME
    if not config_file.is_file():
        raise FileNotFoundError(f"no {CONFIG_NAME} in {str(path)!r}: not a saved optuna-wpca model")
    raw = json.loads(config_file.read_text())
    model_type = _RENAMED_TYPES.get(raw.get("model_type"), raw.get("model_type"))
    if model_type not in MODEL_TYPES:
        raise InputError(
            f"{str(path)!r} holds model_type {model_type!r}; optuna-wpca knows {sorted(MODEL_TYPES.names())}"
        )
    target = MODEL_TYPES.get(model_type)
    names = {f.name for f in dataclasses.fields(target.config_class)}
    return target, target.config_class.from_dict({k: v for k, v in raw.items() if k in names})
