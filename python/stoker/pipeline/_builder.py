"""`PipelineBuilder`: describe the stages, then build a `Pipeline`."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterable, Callable, Iterable
from concurrent.futures import Executor
from typing import Any, Literal

from ..errors import ConfigurationError
from ._engine import _Engine
from ._pipeline import Pipeline
from ._spec import OpKind, StageKind, StageSpec, op_kind, op_name

__all__ = ["PipelineBuilder"]

_pipeline_numbers = itertools.count()
# The default pool never exceeds this; ask for more threads explicitly.
_MAX_DEFAULT_THREADS = 512


def _positive(name: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    return value


class PipelineBuilder:
    """Describes a pipeline stage by stage: a source, pipes and regroupings, then a sink.

    Examples:
        >>> pipeline = (
        ...     PipelineBuilder()
        ...     .add_source(range(10))
        ...     .pipe(lambda x: x * 2, concurrency=4, output_order="input")
        ...     .aggregate(5)
        ...     .add_sink(2)
        ...     .build()
        ... )
        >>> [batch for batch in pipeline]
        [[0, 2, 4, 6, 8], [10, 12, 14, 16, 18]]
    """

    def __init__(self) -> None:
        self._stages: list[StageSpec] = []
        self._sink_size: int | None = None

    @property
    def stages(self) -> list[StageSpec]:
        """The stages described so far (copies are not made; do not mutate)."""
        return self._stages

    def _check_open(self, adding: str) -> None:
        if self._sink_size is not None:
            raise ConfigurationError(f"cannot add {adding} after add_sink()")
        if adding != "a source" and not self._stages:
            raise ConfigurationError(f"add_source() must come before {adding}")

    def _unique_name(self, name: str) -> str:
        taken = {stage.name for stage in self._stages}
        if name not in taken:
            return name
        for number in itertools.count(1):
            if f"{name}_{number}" not in taken:
                return f"{name}_{number}"
        raise AssertionError("unreachable")

    def add_source(self, source: Iterable[Any] | AsyncIterable[Any], *, name: str = "source", buffer_size: int = 16) -> PipelineBuilder:
        """Set where items come from: any iterable (iterated in a worker thread, one item at a
        time) or async iterable (iterated on the event loop).

        Args:
            source: The iterable or async iterable.
            name: Stage name in stats and logs.
            buffer_size: Items read ahead. Source items are usually keys or paths, so reading
                ahead is cheap, and it lets the source's thread work in bursts.

        Raises:
            TypeError: ``source`` is neither iterable nor async iterable.
            ValueError: A source was already added.
        """
        if self._stages:
            raise ConfigurationError("add_source() may be called once, first")
        self._check_open("a source")
        if not (hasattr(source, "__iter__") or hasattr(source, "__aiter__")):
            raise TypeError(f"source must be an iterable or async iterable, got {type(source).__name__}")
        self._stages.append(StageSpec(name=name, kind=StageKind.SOURCE, source=source, buffer_size=_positive("buffer_size", buffer_size)))
        return self

    def pipe(
        self,
        op: Callable[[Any], Any],
        *,
        concurrency: int = 1,
        name: str | None = None,
        output_order: Literal["completion", "input"] = "completion",
        max_failures: int | None = None,
        executor: Executor | None = None,
        buffer_size: int | None = None,
    ) -> PipelineBuilder:
        """Apply ``op`` to every item.

        Args:
            op: A function (run in the pipeline's thread pool: it should release the GIL for its
                heavy part), an async function (run on the event loop), a generator or async
                generator function (each yielded value becomes an item), or any callable.
            concurrency: How many items the stage processes at once.
            name: Name in stats, logs and errors (default: the op's name).
            output_order: ``"completion"`` passes results on as they finish; ``"input"`` keeps
                the input order (a slow item then holds back the ones behind it).
            max_failures: Items the op may fail on before the pipeline stops with
                `PipelineFailureError`. None: no limit; failures are still logged and counted.
            executor: Run ``op`` there instead, e.g. a ``ProcessPoolExecutor`` for code that holds
                the GIL. ``op`` and items must then be picklable; generators are not supported.
            buffer_size: Finished items the stage's output queue holds (default: ``max(2,
                2 * concurrency)``, so the next stage finds work while this one refills it).
                Each running task also has a slot reserved for its result.

        Raises:
            ValueError: A bad argument, or no source yet.
            TypeError: ``op`` is not callable.
        """
        self._check_open("a pipe")
        if not callable(op):
            raise TypeError(f"op must be callable, got {type(op).__name__}")
        _positive("concurrency", concurrency)
        if output_order not in ("completion", "input"):
            raise ConfigurationError(f'output_order must be "completion" or "input", got {output_order!r}')
        if max_failures is not None and (not isinstance(max_failures, int) or max_failures < 0):
            raise ConfigurationError(f"max_failures must be None or a non-negative integer, got {max_failures!r}")
        kind = op_kind(op)
        if executor is not None and kind in (OpKind.GENERATOR, OpKind.ASYNC_GENERATOR):
            raise ConfigurationError("generator ops cannot run in an executor: generators cannot be pickled")
        size = _positive("buffer_size", buffer_size) if buffer_size is not None else max(2, 2 * concurrency)
        self._stages.append(
            StageSpec(
                name=self._unique_name(name or op_name(op)),
                kind=StageKind.PIPE,
                op=op,
                op_kind=kind,
                concurrency=concurrency,
                ordered=output_order == "input",
                max_failures=max_failures,
                executor=executor,
                buffer_size=size,
            )
        )
        return self

    def aggregate(self, num_items: int, *, drop_last: bool = False, name: str | None = None) -> PipelineBuilder:
        """Group items into lists of ``num_items`` (the last list may be shorter).

        Args:
            num_items: Items per list.
            drop_last: Drop the last list if it is short.
            name: Stage name (default ``aggregate_N``).
        """
        self._check_open("aggregate()")
        _positive("num_items", num_items)
        self._stages.append(
            StageSpec(
                name=self._unique_name(name or f"aggregate_{num_items}"),
                kind=StageKind.AGGREGATE,
                batch_size=num_items,
                drop_last=drop_last,
                buffer_size=2,
            )
        )
        return self

    def disaggregate(self, *, name: str | None = None) -> PipelineBuilder:
        """Split every item (an iterable) into its elements. A non-iterable item is a failure."""
        self._check_open("disaggregate()")
        self._stages.append(StageSpec(name=self._unique_name(name or "disaggregate"), kind=StageKind.DISAGGREGATE, buffer_size=2))
        return self

    def add_sink(self, buffer_size: int = 3) -> PipelineBuilder:
        """End the pipeline with a queue of ``buffer_size`` finished items for the consumer."""
        self._check_open("a sink")
        self._sink_size = _positive("buffer_size", buffer_size)
        return self

    def build(
        self,
        *,
        num_threads: int | None = None,
        name: str | None = None,
        stats_interval: float = 0.25,
        report_stats_interval: float | None = None,
    ) -> Pipeline[Any]:
        """Create the pipeline (it starts on first use).

        Args:
            num_threads: Size of the worker pool for sync ops and the sync source. Default: the
                sum of the sync stages' concurrency, so every stage gets the concurrency it asks
                for. Fewer threads cap the stages' concurrency (never a deadlock).
            name: Used in thread names and logs (default ``pipeline-N``).
            stats_interval: Seconds between timeline samples of throughput and queue lengths.
            report_stats_interval: If set, log the stats table every so many seconds.

        Raises:
            ValueError: No source, or a bad argument.
        """
        if not self._stages:
            raise ConfigurationError("add_source() must come before build()")
        sink_size = self._sink_size if self._sink_size is not None else 3
        if num_threads is None:
            wanted = sum(spec.concurrency for spec in self._stages if not spec.runs_inline and not spec.runs_on_loop)
            num_threads = max(1, min(wanted, _MAX_DEFAULT_THREADS))
        _positive("num_threads", num_threads)
        if stats_interval <= 0:
            raise ConfigurationError(f"stats_interval must be positive, got {stats_interval}")
        engine = _Engine(
            [StageSpec(**vars(spec)) for spec in self._stages],
            sink_size=sink_size,
            num_threads=num_threads,
            name=name or f"pipeline-{next(_pipeline_numbers)}",
            sample_interval=stats_interval,
            report_interval=report_stats_interval,
        )
        return Pipeline(engine)
