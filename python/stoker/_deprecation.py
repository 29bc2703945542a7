"""Old spellings that keep working for one release, each with a `DeprecationWarning` that says the
new one: names moved out of a package (`moved_names`) and keywords that became option objects
(see `stoker.loader._options`)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["REMOVED_IN", "moved_names", "warn_deprecated"]

REMOVED_IN = "0.3"
"""The release that drops the old spellings."""


def warn_deprecated(message: str, *, stacklevel: int = 3) -> None:
    """Warn that an old spelling was used; ``message`` says the new one."""
    warnings.warn(f"{message} (the old spelling goes in stoker {REMOVED_IN})", DeprecationWarning, stacklevel=stacklevel)


def moved_names(package: str, moved: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for names that moved: ``{old name: "module:new name"}``.

    Example::

        __getattr__ = moved_names(__name__, {"BadSample": "stoker.failures:Failure"})
    """

    def __getattr__(name: str) -> Any:
        target = moved.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, new_name = target.partition(":")
        warn_deprecated(f"{package}.{name} is now {module}.{new_name}")
        return getattr(importlib.import_module(module), new_name)

    return __getattr__
