"""Registering the candidates with transformers' Auto classes without importing transformers early.

``import optuna_wpca`` stays light: when transformers is already imported the classes are registered
at once; otherwise a finder on ``sys.meta_path`` registers them right after transformers' own import
completes, the first time anything imports it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any


def _register() -> None:
    # Importing the module registers every candidate class known then; a candidate class defined
    # later is registered by the call below (the module's import is a no-op the second time). While
    # the module is itself being imported (it imports transformers first), it registers at its end.
    register = getattr(importlib.import_module("optuna_wpca.models._transformers"), "register_auto_classes", None)
    if register is not None:
        register()


class _AfterTransformersImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of ``transformers`` so that registration follows it."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "transformers":
            return None
        sys.meta_path.remove(self)  # once, and so that the lookup below finds the real package
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_then_register(module: Any) -> None:
            run(module)
            _register()

        spec.loader.exec_module = exec_then_register  # type: ignore[method-assign]
        return spec


def register_when_transformers_loads() -> None:
    """Register now if transformers is imported, else right after its import."""
    if "transformers" in sys.modules:
        _register()
    elif not any(isinstance(f, _AfterTransformersImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterTransformersImport())
