"""One registry, one signature: ``proxy(model, batch, **options) -> ProxyResult``."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from optuna_wpca._text import TextBatch
from optuna_wpca.models import CandidateModel


@dataclass(frozen=True)
class ProxyResult:
    """A proxy's score and the parts it was made of (per-layer PCA dims, counts, ...)."""

    value: float
    parts: dict[str, Any] = field(default_factory=dict)


ProxyFn = Callable[..., ProxyResult]


@dataclass(frozen=True)
class ProxySpec:
    """A registered proxy: its function, whether it needs gradients, and which way it is read."""

    name: str
    fn: ProxyFn
    needs_grad: bool
    description: str
    #: The study direction that prefers what the proxy predicts to be better ("minimize" for costs).
    direction: str = "maximize"
    #: False for a proxy that needs something trained first (the supernet): left out of "all".
    zero_cost: bool = True

    @property
    def options(self) -> tuple[str, ...]:
        """The keyword-only options the proxy takes, with their defaults."""
        params = inspect.signature(self.fn).parameters.values()
        return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)


_REGISTRY: dict[str, ProxySpec] = {}


def register_proxy(
    name: str, *, needs_grad: bool, description: str, direction: str = "maximize", zero_cost: bool = True
) -> Callable[[ProxyFn], ProxyFn]:
    """Register ``fn(model, batch, *, option=...) -> ProxyResult`` under ``name``; ``direction`` is
    ``"minimize"`` for a proxy where lower is better (latency, memory).

    Example:
        >>> @register_proxy("depth_doc_example", needs_grad=False, description="layers")
        ... def depth(model, batch):
        ...     return ProxyResult(float(len(model.layers)))
        >>> "depth_doc_example" in list_proxies()
        True
    """

    def decorate(fn: ProxyFn) -> ProxyFn:
        if name in _REGISTRY:
            raise ValueError(f"a proxy named {name!r} is already registered")
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
        _REGISTRY[name] = ProxySpec(name, fn, needs_grad, description, direction, zero_cost)
        return fn

    return decorate


def list_proxies() -> list[str]:
    """Names of the registered proxies, in registration order."""
    return list(_REGISTRY)


def get_proxy(name: str) -> ProxySpec:
    """The registered proxy ``name``; a clear error naming the registered ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown proxy {name!r}; registered proxies: {', '.join(_REGISTRY)}") from None


def compute_proxy(name: str, model: CandidateModel, batch: TextBatch, **options: Any) -> ProxyResult:
    """Score ``model`` with proxy ``name``; options the proxy does not take are ignored, so one
    option set (``eta``, ``count``, ...) can be passed to every proxy in a loop."""
    spec = get_proxy(name)
    accepted = {k: v for k, v in options.items() if k in spec.options}
    return spec.fn(model, batch, **accepted)
