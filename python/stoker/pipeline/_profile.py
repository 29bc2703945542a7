"""Find each stage's best concurrency by running it alone (SPDL's profile_pipeline idea).

A whole pipeline's throughput is its slowest stage's; to tune one stage you have to see it
without the others. The profiler takes the first items from the source, then for every pipe
stage replays that stage's inputs through a one-stage pipeline at several concurrency values
and reports items/s for each. The outputs at the best value feed the next stage.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ._spec import StageKind, StageSpec

if TYPE_CHECKING:
    from ._builder import PipelineBuilder

__all__ = ["ProfileResult", "profile_pipeline"]


@dataclass(frozen=True)
class ProfileResult:
    """One stage's throughput at each concurrency tried.

    Attributes:
        stage: The stage's name.
        items_per_second: ``{concurrency: items/s}``.
        failures: ``{concurrency: items the op failed on}``.
        best_concurrency: The smallest concurrency within 5% of the best throughput (more
            threads than that buy nothing and cost memory).
    """

    stage: str
    items_per_second: dict[int, float]
    failures: dict[int, int]
    best_concurrency: int

    def format(self) -> str:
        """One line per concurrency value, the best marked."""
        lines = [f"stage {self.stage!r}:"]
        for concurrency, rate in self.items_per_second.items():
            mark = "  <- best" if concurrency == self.best_concurrency else ""
            failed = f", {self.failures[concurrency]} failed" if self.failures[concurrency] else ""
            lines.append(f"  concurrency {concurrency:>3}: {rate:>10.1f} items/s{failed}{mark}")
        return "\n".join(lines)


def _run_alone(spec: StageSpec, inputs: Sequence[Any], concurrency: int) -> tuple[float, list[Any], int]:
    from ._builder import PipelineBuilder

    builder = PipelineBuilder().add_source(inputs)
    builder.pipe(
        spec.op,  # type: ignore[arg-type]
        concurrency=concurrency,
        name=spec.name,
        executor=spec.executor,
        output_order="input",
    )
    pipeline = builder.add_sink(max(3, concurrency)).build()
    started = perf_counter()
    outputs = list(pipeline)
    seconds = perf_counter() - started
    failures = pipeline.stats().stages[1].failures
    return (len(inputs) / seconds if seconds > 0 else float("inf")), outputs, failures


def _regroup(spec: StageSpec, items: list[Any]) -> list[Any]:
    if spec.kind == StageKind.AGGREGATE:
        size = spec.batch_size
        groups = [items[start : start + size] for start in range(0, len(items), size)]
        if groups and spec.drop_last and len(groups[-1]) < size:
            groups.pop()
        return groups
    return [piece for item in items for piece in item]


def profile_pipeline(
    builder: PipelineBuilder,
    *,
    num_items: int = 1000,
    concurrencies: Iterable[int] = (1, 2, 4, 8, 16, 32),
) -> list[ProfileResult]:
    """Measure every pipe stage of ``builder`` alone at each concurrency in ``concurrencies``.

    Args:
        builder: A described pipeline (a sync iterable source; it is read once, up to
            ``num_items`` items).
        num_items: Source items to replay through the stages.
        concurrencies: Concurrency values to try for every pipe stage.

    Returns:
        One `ProfileResult` per pipe stage, in pipeline order.

    Raises:
        TypeError: The source is async (the profiler replays a list of items).
        ValueError: The builder has no source or ``concurrencies`` is empty.
    """
    values = sorted(set(concurrencies))
    if not values:
        raise ConfigurationError("concurrencies is empty")
    stages = builder.stages
    if not stages:
        raise ConfigurationError("the builder has no source")
    source = stages[0].source
    if not hasattr(source, "__iter__"):
        raise TypeError("profile_pipeline needs a sync iterable source")
    items = list(itertools.islice(source, num_items))
    results = []
    for spec in stages[1:]:
        if spec.kind in (StageKind.AGGREGATE, StageKind.DISAGGREGATE):
            items = _regroup(spec, items)
            continue
        assert spec.kind == StageKind.PIPE
        rates: dict[int, float] = {}
        failures: dict[int, int] = {}
        outputs_at: dict[int, list[Any]] = {}
        for concurrency in values:
            rates[concurrency], outputs_at[concurrency], failures[concurrency] = _run_alone(spec, items, concurrency)
        top = max(rates.values())
        best = min(c for c, rate in rates.items() if rate >= 0.95 * top)
        results.append(ProfileResult(spec.name, rates, failures, best))
        items = outputs_at[best]
    return results
