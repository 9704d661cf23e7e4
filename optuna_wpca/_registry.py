"""One registry type for everything optuna-wpca finds by name: proxies, space kinds, model types,
benchmark file formats.

Each refuses a name already taken (one line naming it), can forget a name, and lends a name for the
length of a ``with`` block, so tests and user code never edit a module's dict.
"""

from __future__ import annotations

import contextlib
from typing import Generic, Iterator, TypeVar

from optuna_wpca._errors import InputError

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one kind, in registration order.

    Example:
        >>> colours = Registry[str]("colour")
        >>> colours.register("red", "#f00")
        >>> with colours.temporarily("blue", "#00f"):
        ...     colours.names()
        ['red', 'blue']
        >>> colours.names(), "blue" in colours
        (['red'], False)
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> None:
        """Add ``entry`` under ``name``; a name already taken is refused."""
        if not isinstance(name, str) or not name:
            raise InputError(f"a {self.what} needs a non-empty name, got {name!r}")
        if name in self._entries:
            raise InputError(f"a {self.what} named {name!r} is already registered; unregister it first")
        self._entries[name] = entry

    def register_class(self, name: str, cls: T, *, label: str, attribute: str) -> None:
        """Register a class under the name it declares (a class attribute, ``attribute``): another class
        under a taken name is refused; the same class defined again (a module reloaded) replaces itself."""
        known = self._entries.get(name)
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise InputError(f"{label} {name!r} is already {known.__module__}.{known.__qualname__}; "
                             f"give {cls.__qualname__} another {attribute}")
        self._entries[name] = cls

    def unregister(self, name: str) -> T:
        """Forget ``name``; returns what it held."""
        if name not in self._entries:
            raise InputError(f"no {self.what} named {name!r} is registered")
        return self._entries.pop(name)

    @contextlib.contextmanager
    def temporarily(self, name: str, entry: T) -> Iterator[T]:
        """Register ``entry`` under ``name`` for the block, then forget it."""
        self.register(name, entry)
        try:
            yield entry
        finally:
            self._entries.pop(name, None)

    def get(self, name: str) -> T:
        """The entry of ``name``; an unknown name is named with the registered ones."""
        if name not in self._entries:
            raise InputError(f"unknown {self.what} {name!r}; registered: {', '.join(self._entries) or 'none'}")
        return self._entries[name]

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._entries)

    def values(self) -> list[T]:
        """The registered entries, in registration order."""
        return list(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)
