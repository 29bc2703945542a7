"""The global random generators a dataset's ``__getitem__`` may draw from (torch's, Python's
``random``, NumPy's legacy one), and noticing whether it drew from them.

A worker that fetches a batch's items concurrently would make those draws in whatever order its
threads run, so augmentation would change from run to run; a worker that sees its items draw keeps
fetching them one after another (see `stoker.torch._fetching`).
"""

from __future__ import annotations

import random
import sys
from typing import Any, NamedTuple

import torch

__all__ = ["GeneratorStates"]


class GeneratorStates(NamedTuple):
    """The three global generators' states at one moment."""

    torch_state: Any
    python_state: Any
    numpy_state: Any

    @classmethod
    def take(cls) -> GeneratorStates:
        """The states now (NumPy's only if NumPy is imported: otherwise nothing can draw from it)."""
        numpy = sys.modules.get("numpy")
        numpy_state = numpy.random.get_state(legacy=False) if numpy is not None else None
        return cls(torch.random.get_rng_state(), random.getstate(), numpy_state)

    def unchanged(self) -> bool:
        """Whether no generator has been drawn from (or reseeded) since these states were taken."""
        now = GeneratorStates.take()
        if not torch.equal(self.torch_state, now.torch_state) or self.python_state != now.python_state:
            return False
        if self.numpy_state is None or now.numpy_state is None:
            return self.numpy_state is now.numpy_state
        numpy = sys.modules["numpy"]
        before, after = self.numpy_state, now.numpy_state
        return (
            bool(numpy.array_equal(before["state"]["key"], after["state"]["key"]))
            and before["state"]["pos"] == after["state"]["pos"]
            and all(before[name] == after[name] for name in ("has_gauss", "gauss"))
        )
