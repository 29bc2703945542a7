"""What the builder records for each stage, before anything runs."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from enum import Enum
from typing import Any


class OpKind(str, Enum):
    """How an op is called, decided once when the stage is added."""

    FUNCTION = "function"
    ASYNC_FUNCTION = "async function"
    GENERATOR = "generator"
    ASYNC_GENERATOR = "async generator"

    @property
    def is_generator(self) -> bool:
        """The op yields any number of outputs per input."""
        return self in (OpKind.GENERATOR, OpKind.ASYNC_GENERATOR)


class StageKind(str, Enum):
    """What a stage does (its value is what stats and reports show)."""

    SOURCE = "source"
    PIPE = "pipe"
    AGGREGATE = "aggregate"
    DISAGGREGATE = "disaggregate"


def op_kind(op: Callable[..., Any]) -> OpKind:
    """Classify an op as a function, async function, generator or async generator.

    Callable objects are classified by their ``__call__``; ``functools.partial`` is unwrapped.
    """
    # The object, then its __call__ method (for callable instances); getattr, not callable():
    # the method itself is what gets classified.
    for candidate in (op, getattr(op, "__call__", None)):  # noqa: B004
        if candidate is None:
            continue
        if inspect.isasyncgenfunction(candidate):
            return OpKind.ASYNC_GENERATOR
        if inspect.iscoroutinefunction(candidate):
            return OpKind.ASYNC_FUNCTION
        if inspect.isgeneratorfunction(candidate):
            return OpKind.GENERATOR
    return OpKind.FUNCTION


def op_name(op: Callable[..., Any]) -> str:
    """A readable default stage name for an op."""
    name = getattr(op, "__name__", None) or getattr(getattr(op, "func", None), "__name__", None)
    return name or type(op).__name__


@dataclass
class StageSpec:
    """One stage as the user described it.

    Attributes:
        name: Unique name, used in stats, logs and errors.
        kind: StageKind.SOURCE, StageKind.PIPE, StageKind.AGGREGATE or StageKind.DISAGGREGATE.
        op: The op for a StageKind.PIPE stage.
        op_kind: How ``op`` is called (OpKind.FUNCTION, OpKind.ASYNC_FUNCTION, OpKind.GENERATOR, OpKind.ASYNC_GENERATOR).
        concurrency: Tasks the stage may run at once.
        ordered: Whether outputs keep input order.
        max_failures: Failures tolerated before the pipeline stops (None: unlimited).
        executor: Where a StageKind.PIPE op runs, when not in the pipeline's own thread pool.
        buffer_size: Finished items the stage's output queue holds.
        source: The iterable or async iterable of a StageKind.SOURCE stage.
        batch_size: Items per list of an StageKind.AGGREGATE stage.
        drop_last: Whether an StageKind.AGGREGATE stage drops its last, short list.
    """

    name: str
    kind: StageKind
    op: Callable[..., Any] | None = None
    op_kind: OpKind = OpKind.FUNCTION
    concurrency: int = 1
    ordered: bool = False
    max_failures: int | None = None
    executor: Executor | None = None
    buffer_size: int = 2
    source: Any = None
    batch_size: int = 0
    drop_last: bool = False

    @property
    def runs_inline(self) -> bool:
        """AGGREGATE and StageKind.DISAGGREGATE only move items; they run inside the engine's lock."""
        return self.kind in (StageKind.AGGREGATE, StageKind.DISAGGREGATE)

    @property
    def runs_on_loop(self) -> bool:
        """Async ops, async sources and executor stages are driven by the event loop."""
        if self.kind == StageKind.SOURCE:
            return hasattr(self.source, "__aiter__")
        return self.executor is not None or self.op_kind in (OpKind.ASYNC_FUNCTION, OpKind.ASYNC_GENERATOR)
