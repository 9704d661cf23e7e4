"""One registry, one signature: ``proxy(model, batch, **options) -> ProxyResult``."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from optuna_wpca._errors import InputError
from optuna_wpca._registry import Registry
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
    #: The proxies a combination is made of (empty for a plain proxy); see ``proxies._combined``.
    parts: tuple[str, ...] = ()
    #: The unit of the value ("ms", "MiB"), empty for a unitless score; shown wherever the value is.
    unit: str = ""
    #: Options the proxy cannot score without (``supernet`` needs ``supernet=DIR``): an objective
    #: given the proxy without them is refused before any study is touched.
    required: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The name with its unit, as axes and tables show it: ``latency (ms)``."""
        return f"{self.name} ({self.unit})" if self.unit else self.name

    @property
    def requires(self) -> tuple[str, ...]:
        """The options this proxy (a combination: any of its parts) cannot score without."""
        own = list(self.required)
        for part in self.parts:
            own += get_proxy(part).requires
        return tuple(dict.fromkeys(own))

    @property
    def option_defaults(self) -> dict[str, Any]:
        """The default of each keyword-only option that has one (a combination: its parts' too)."""
        out = {p.name: p.default for p in inspect.signature(self.fn).parameters.values()
               if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty}
        for part in self.parts:
            for name, value in get_proxy(part).option_defaults.items():
                out.setdefault(name, value)
        return out

    @property
    def options(self) -> tuple[str, ...]:
        """The names of the keyword-only options the proxy takes (a combination: its parts' and
        ``reference``)."""
        params = inspect.signature(self.fn).parameters.values()
        own = tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)
        if not self.parts:
            return own
        return tuple(dict.fromkeys([*own, *(o for part in self.parts for o in get_proxy(part).options)]))


#: The registered proxies and named combinations (``register_proxy``, ``register_combination``).
PROXIES: Registry[ProxySpec] = Registry("proxy")
#: Combinations named ad hoc ("a+b"), made on first use by the factory that ``_combined`` installs.
_COMBINATIONS: dict[str, ProxySpec] = {}
_combination_factory: Callable[[str], ProxySpec] | None = None


def set_combination_factory(factory: Callable[[str], ProxySpec]) -> None:
    """Install what turns a name ``"a+b"`` into a combination's spec (``proxies._combined``)."""
    global _combination_factory
    _combination_factory = factory


def register_proxy(
    name: str, *, needs_grad: bool, description: str, direction: str = "maximize", zero_cost: bool = True,
    unit: str = "", requires: tuple[str, ...] = (),
) -> Callable[[ProxyFn], ProxyFn]:
    """Register ``fn(model, batch, *, option=...) -> ProxyResult`` under ``name``; ``direction`` is
    ``"minimize"`` for a proxy where lower is better (latency, memory); ``requires`` names the
    keyword options it cannot score without.

    Example:
        >>> @register_proxy("depth_doc_example", needs_grad=False, description="layers")
        ... def depth(model, batch):
        ...     return ProxyResult(float(len(model.layers)))
        >>> "depth_doc_example" in list_proxies()
        True
    """

    def decorate(fn: ProxyFn) -> ProxyFn:
        if name in PROXIES:
            raise InputError(f"a proxy named {name!r} is already registered; unregister_proxy({name!r}) first")
        if direction not in ("maximize", "minimize"):
            raise InputError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
        spec = ProxySpec(name, fn, needs_grad, description, direction, zero_cost, unit=unit, required=tuple(requires))
        unknown = [o for o in spec.required if o not in spec.options]
        if unknown:
            raise InputError(f"proxy {name!r} requires {', '.join(unknown)}, which its function does not take")
        PROXIES.register(name, spec)
        return fn

    return decorate


def register_combination(name: str, parts: str, *, description: str | None = None) -> ProxySpec:
    """Register the combination ``parts`` (``"a+b"``) under a short ``name`` (see ``proxies._combined``)."""
    if name in PROXIES or "+" in name:
        raise InputError(f"a proxy named {name!r} is already registered, or the name contains '+'")
    spec = get_proxy(parts)
    PROXIES.register(name, ProxySpec(name, spec.fn, spec.needs_grad, description or spec.description,
                                     spec.direction, spec.zero_cost, spec.parts))
    return PROXIES.get(name)


def unregister_proxy(name: str) -> None:
    """Forget a registered proxy or named combination (and the combinations made of it)."""
    PROXIES.unregister(name)
    for combined in [c for c in _COMBINATIONS if name in c.split("+")]:
        del _COMBINATIONS[combined]


def list_proxies() -> list[str]:
    """Names of the registered proxies, in registration order (named combinations included)."""
    return PROXIES.names()


def list_base_proxies() -> list[str]:
    """Names of the registered proxies that are not combinations."""
    return [spec.name for spec in PROXIES.values() if not spec.parts]


def get_proxy(name: str) -> ProxySpec:
    """The registered proxy ``name``, or the combination a name ``"a+b"`` spells; a clear error
    naming the registered ones otherwise."""
    if name in PROXIES:
        return PROXIES.get(name)
    if "+" in name and _combination_factory is not None:
        if name not in _COMBINATIONS:
            _COMBINATIONS[name] = _combination_factory(name)
        return _COMBINATIONS[name]
    raise InputError(f"unknown proxy {name!r}; registered proxies: {', '.join(PROXIES.names())} (or a combination "
                     "of them joined by '+')")


def missing_options(name: str, options: dict[str, Any]) -> list[str]:
    """The options proxy ``name`` cannot score without that ``options`` leaves out (or sets to None)."""
    return [o for o in get_proxy(name).requires if options.get(o) is None]


def compute_proxy(name: str, model: CandidateModel, batch: TextBatch, **options: Any) -> ProxyResult:
    """Score ``model`` with proxy ``name``; options the proxy does not take are ignored, so one
    option set (``eta``, ``count``, ...) can be passed to every proxy in a loop."""
    spec = get_proxy(name)
    if spec.parts:  # each part takes what it accepts
        return spec.fn(model, batch, **options)
    accepted = {k: v for k, v in options.items() if k in spec.options}
    return spec.fn(model, batch, **accepted)
