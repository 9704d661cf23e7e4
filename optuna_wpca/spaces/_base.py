"""The search-space abstraction: an architecture as a dict of Optuna parameters (integer or categorical genes)."""

from __future__ import annotations

import abc
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import optuna
from optuna.distributions import BaseDistribution

from optuna_wpca._errors import InputError
from optuna_wpca._registry import Registry
from optuna_wpca.models import CandidateModel
from optuna_wpca.models._base import check_count_convention
from optuna_wpca.spaces import _genes


#: The deepest model a space may describe: beyond it a "search" is a typo, not a plan.
MAX_LAYERS = 64


def size(name: str, value: Any, *, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an int for a size setting; a clear error for a fraction, a bool, a string or a
    value out of range (``num_layers: 2.7`` is refused, not truncated).

    Example:
        >>> size("num_layers", 12.0)
        12
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or value != int(value):
        raise InputError(f"{name} must be a whole number, got {value!r}")
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise InputError(f"{name} must be {bound}, got {value}")
    return value


def sizes(name: str, values: Sequence[Any], *, maximum: int | None = None) -> tuple[int, ...]:
    """A non-empty list of sizes (see :func:`size`)."""
    out = tuple(size(name, v, maximum=maximum) for v in values)
    if not out:
        raise InputError(f"{name} must not be empty")
    return out


@dataclass(frozen=True)
class Architecture:
    """One candidate: a hidden size and one layer config per layer (hashable, JSON-able)."""

    hidden_size: int
    layers: tuple[Any, ...]

    @property
    def num_layers(self) -> int:
        """The number of layers."""
        return len(self.layers)

    def to_dict(self) -> dict[str, Any]:
        """The architecture as plain JSON types."""
        return {"hidden_size": self.hidden_size, "layers": [dataclasses.asdict(layer) for layer in self.layers]}


def layer_name(index: int, gene: str) -> str:
    """The Optuna parameter name of one layer's gene: ``layer_03_block``."""
    return f"layer_{index:02d}_{gene}"


#: Every space type by its ``kind``; filled as the classes are defined.
SPACES: "Registry[type[SearchSpace]]" = Registry("search-space type")


class SearchSpace(abc.ABC):
    """A space of candidate encoders, expressed as Optuna distributions.

    One gene per layer per choice (``layer_03_block``, ``layer_03_ffn_mult``, ...), so any Optuna
    sampler can search it and the genome has a fixed length (NSGA-II only evolves parameters every
    trial has). A gene whose values are an evenly stepped integer range is an
    :class:`~optuna.distributions.IntDistribution` (Optuna's samplers then use its order), any other a
    :class:`~optuna.distributions.CategoricalDistribution`; ``integer_genes=False`` makes every gene
    categorical, as before 0.3 (a study searched then resumes that way).
    """

    #: Short name used in files, study attributes and the CLI; a subclass that sets it is registered
    #: under it when its class is defined, so ``space_from_dict({"type": kind, ...})`` finds it.
    kind: str = ""
    #: ``"encoder"`` or ``"decoder"``: which trained benchmark's evidence chose the search's default
    #: objective for this space (``optuna_wpca.proxies.DEFAULT_OBJECTIVES``).
    family: str = "encoder"
    #: The block types a layer may be, by the name :meth:`block_kind` gives: ``(display name, colour)``,
    #: for optuna-dashboard's pictures and legends.
    block_kinds: Mapping[str, tuple[str, str]] = {"layer": ("layer", "#8172B3")}
    #: The longest sequence a candidate takes (its position table); the objective refuses longer minibatches.
    max_position_embeddings: int = 512

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.kind or cls.__dict__.get("kind") is None:
            return  # abstract helpers, and subclasses that keep their parent's type
        SPACES.register_class(cls.kind, cls, label="search-space type", attribute="kind")

    def block_kind(self, layer: Any) -> str:
        """Which of :attr:`block_kinds` ``layer`` is."""
        return next(iter(self.block_kinds))

    def __init__(self, *, count: str, integer_genes: bool = True) -> None:
        self.count = check_count_convention(count)
        if not isinstance(integer_genes, bool):
            raise InputError(f"integer_genes must be true or false, got {integer_genes!r}")
        self.integer_genes = integer_genes

    def gene(self, values: Sequence[Any]) -> BaseDistribution:
        """The distribution of a gene taking ``values`` under this space's encoding (see the class doc)."""
        return _genes.gene(values, self.integer_genes)

    def _genes_config(self) -> dict[str, Any]:
        # Left out at the default, so a space recorded before the choice existed reads back the same.
        return {} if self.integer_genes else {"integer_genes": False}

    def __eq__(self, other: object) -> bool:
        # Two spaces are the same search when they describe themselves the same way (what a study records).
        return isinstance(other, SearchSpace) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        import json

        return hash(json.dumps(self.to_dict(), sort_keys=True))

    @abc.abstractmethod
    def distributions(self) -> dict[str, BaseDistribution]:
        """Parameter name -> distribution (see :meth:`gene`), in a fixed order."""

    @abc.abstractmethod
    def from_params(self, params: Mapping[str, Any]) -> Architecture:
        """Turn trial parameters into an architecture; raises ``ValueError`` naming a bad key."""

    @abc.abstractmethod
    def to_params(self, arch: Architecture) -> dict[str, Any]:
        """The parameters that :meth:`from_params` maps back to ``arch``."""

    #: The candidate class this space builds; with :meth:`model_config` it is the whole of :meth:`build`.
    model_class: ClassVar[type[CandidateModel] | None] = None

    def model_config(self, arch: Architecture, seed: int | None = 0) -> Any:
        """The config of :attr:`model_class` that builds ``arch`` (checking that ``arch`` is in the space)."""
        raise NotImplementedError(f"{type(self).__name__} sets no model_class with a model_config; override build")

    def build(
        self, arch: Architecture, *, seed: int | None = 0, device: Any = "cpu", init_device: Any = None
    ) -> CandidateModel:
        """Instantiate the randomly initialised candidate, in eval mode, allocated on ``device``.

        The weights are drawn on ``device`` by its own generator (no CPU initialisation then
        copy): on the CPU a seed gives the values of every earlier release, on a GPU its own
        reproducible ones. ``init_device="cpu"`` draws them on the CPU and moves the model, so
        that a GPU build holds exactly the CPU's values.
        """
        if self.model_class is None:
            raise NotImplementedError(f"{type(self).__name__} sets no model_class; override build")
        return self.model_class(self.model_config(arch, seed), device=init_device or device).to(device).eval()

    @abc.abstractmethod
    def num_params(self, arch: Architecture, count: str | None = None) -> int:
        """Parameters of ``build(arch)`` under a counting convention, without building it."""

    @abc.abstractmethod
    def config(self) -> dict[str, Any]:
        """Constructor arguments, so that ``type(space)(**space.config())`` rebuilds it."""

    def suggest(self, trial: optuna.trial.BaseTrial) -> Architecture:
        """Draw an architecture through ``trial`` (one ``suggest_int`` or ``suggest_categorical`` per gene)."""
        params = {name: _genes.suggest(trial, name, dist) for name, dist in self._gene_distributions().items()}
        return self.from_params(params)

    def sample(self, rng: np.random.Generator | int | None = None) -> Architecture:
        """A uniformly random architecture, without Optuna."""
        rng = np.random.default_rng(rng)
        params = {}
        for name, dist in self._gene_distributions().items():
            values = _genes.values_of(dist)
            params[name] = values[int(rng.integers(len(values)))]
        return self.from_params(params)

    def check_budget(self, max_params: float | None, min_params: float | None = None) -> None:
        """Raise a clear error when no candidate of this space fits ``max_params`` (or the band
        ``min_params``-``max_params``)."""
        if min_params is not None and max_params is not None and min_params > max_params:
            raise InputError(f"parameter band is empty: min_params {min_params:,.0f} > max_params {max_params:,.0f}")
        if max_params is None:
            return
        smallest = self.min_params()
        if max_params < smallest:
            raise InputError(
                f"parameter budget {max_params:,.0f} is below the smallest candidate of this space "
                f"({smallest:,} parameters, counted as {self.count!r})"
            )

    def min_params(self, count: str | None = None) -> int:
        """The smallest parameter count of any candidate (for budget checks)."""
        return min(self.num_params(arch, count) for arch in self._smallest_candidates())

    def max_params(self, count: str | None = None) -> int | None:
        """The largest parameter count of any candidate (``None`` for a space that does not say)."""
        counts = [self.num_params(arch, count) for arch in self._largest_candidates()]
        return max(counts) if counts else None

    def _largest_candidates(self) -> Sequence[Architecture]:
        """Candidates among which the largest one lies (none: the space does not say)."""
        return ()

    @abc.abstractmethod
    def widest_ffn(self) -> int:
        """The widest FFN any candidate has (a PCA over fewer tokens than this is capped by them)."""

    @abc.abstractmethod
    def _smallest_candidates(self) -> Sequence[Architecture]:
        """Candidates among which the smallest one lies."""

    def describe(self, arch: Architecture) -> list[str]:
        """One short human-readable line per layer."""
        return [str(layer) for layer in arch.layers]

    def summary(self, arch: Architecture) -> str:
        """The architecture in one short line (the ``architecture`` attribute of a trial)."""
        return " | ".join(" ".join(line.split()) for line in self.describe(arch))

    def to_dict(self) -> dict[str, Any]:
        """The space as JSON types (``type`` plus ``config()``), read back by ``space_from_dict``."""
        return {"type": self.kind, **self.config()}

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__.pop("_built_genes", None)  # a changed setting changes the genes
        super().__setattr__(name, value)

    def _gene_distributions(self) -> dict[str, BaseDistribution]:
        """:meth:`distributions`, built once until a setting of the space changes (read it, do not modify it).

        distributions() rebuilds every gene (a decoder's 16 FFN genes of 1,537 widths each, checked for even
        steps); suggest, sample and every from_params read them, and the sampler's budget fill calls
        from_params some 200 times per child.
        """
        genes = self.__dict__.get("_built_genes")
        if genes is None:
            genes = self.__dict__["_built_genes"] = self.distributions()
        return genes

    def _check_params(self, params: Mapping[str, Any], names: Sequence[str]) -> None:
        if not isinstance(params, Mapping):
            raise InputError(f"architecture parameters must be a mapping, got {type(params).__name__}")
        dists = self._gene_distributions()
        missing = [n for n in names if n not in params]
        if missing:
            raise InputError(f"architecture is missing parameter(s) {missing} of the {self.kind} space")
        for name in names:
            value = params[name]
            if not _genes.holds(dists[name], value):
                raise InputError(f"parameter {name}={value!r} is not one of {_genes.describe(dists[name])}")


def space_from_dict(raw: Mapping[str, Any]) -> SearchSpace:
    """Rebuild a space from :meth:`SearchSpace.to_dict` output (or a hand-written file)."""
    if not isinstance(raw, Mapping) or not raw:
        raise InputError("search-space description is empty or not a JSON object")
    kind = raw.get("type")
    if kind not in SPACES:
        raise InputError(f"search-space 'type' must be one of {sorted(SPACES.names())}, got {kind!r}")
    args = {k: v for k, v in raw.items() if k != "type"}
    try:
        return SPACES.get(kind)(**args)
    except TypeError as err:
        raise InputError(f"malformed {kind} search space: {err}") from None


def load_space(path: str | Path) -> SearchSpace:
    """Read a search space from a JSON file written by :meth:`SearchSpace.to_dict`."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"search-space file {str(path)!r} is a directory, not a JSON file")
    if not path.is_file():
        raise FileNotFoundError(f"search-space file {str(path)!r} does not exist")
    try:
        text = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise InputError(f"search-space file {str(path)!r} is not UTF-8 text") from None
    if not text:
        raise InputError(f"search-space file {str(path)!r} is empty")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"search-space file {str(path)!r} is not valid JSON: {err}") from None
    return space_from_dict(raw)


__all__ = ["Architecture", "SearchSpace", "layer_name", "load_space", "space_from_dict"]
