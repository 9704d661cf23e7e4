"""A parameter budget: the bounds a search's candidates must fit, under the space's counting convention."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from optuna_wpca._errors import InputError

if TYPE_CHECKING:
    from optuna_wpca.spaces import SearchSpace


@dataclass(frozen=True)
class Budget:
    """A parameter budget: at most ``max_params`` and at least ``min_params`` (``None``: no bound),
    counted under the space's convention.

    Example:
        >>> Budget(max_params=10e6).contains(9_000_000)
        True
    """

    max_params: float | None = None
    min_params: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_params", "min_params"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
                float("inf"), float("-inf")
            ):
                raise InputError(f"{name} must be a finite number of parameters or None, got {value!r}")
            if value < 0:
                raise InputError(f"{name} must be >= 0, got {value:,.0f}")
            object.__setattr__(self, name, float(value))

    @property
    def is_set(self) -> bool:
        """Whether either bound is set."""
        return self.max_params is not None or self.min_params is not None

    def check(self, space: SearchSpace) -> Budget:
        """Raise a clear error when no candidate of ``space`` fits; return ``self``.

        The answer is kept per space description, so a budget handed from the CLI to the sampler, the
        objective and the study record is checked once.
        """
        key = (self.max_params, self.min_params, space)
        if key not in _CHECKED:
            space.check_budget(self.max_params, self.min_params)
            _CHECKED.add(key)
        return self

    def contains(self, num_params: int) -> bool:
        """Whether ``num_params`` lies within the bounds."""
        return (self.max_params is None or num_params <= self.max_params) and (
            self.min_params is None or num_params >= self.min_params
        )

    def constraints(self, num_params: int) -> dict[str, float]:
        """Optuna constraint values (``<= 0`` when satisfied), one per bound that is set."""
        out = {}
        if self.max_params is not None:
            out["max_params"] = float(num_params - self.max_params)
        if self.min_params is not None:
            out["min_params"] = float(self.min_params - num_params)
        return out

    def violation(self, num_params: int) -> str:
        """Why ``num_params`` does not fit, as a phrase."""
        if self.max_params is not None and num_params > self.max_params:
            return f"{num_params:,} parameters exceed the budget of {self.max_params:,.0f}"
        return f"{num_params:,} parameters fall below the lower bound of {self.min_params:,.0f}"

    def describe(self) -> str:
        """The bounds as a phrase (``<= 15,700,000 parameters``), ``none`` when unset."""
        if not self.is_set:
            return "none"
        if self.min_params is None:
            return f"<= {self.max_params:,.0f} parameters"
        if self.max_params is None:
            return f">= {self.min_params:,.0f} parameters"
        return f"{self.min_params:,.0f}-{self.max_params:,.0f} parameters"


#: (bounds, space) pairs already checked in this process (spaces compare by their description).
_CHECKED: set[tuple] = set()
