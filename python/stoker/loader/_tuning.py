"""What the Loader lets its live tuner move, and what each setting costs in memory.

The knobs: batches decoded at once (``decode``'s concurrency), batches read at once (``fetch``'s,
local storage) or batches of per-sample requests in flight (network storage, the prefetcher's
cap), and finished batches kept ready (the sink). A knob the user set in `Throughput` or `Reads`
is pinned and left out. The tuner's moves are written back to the Loader, so the next epoch starts
where this one ended.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..observe import CpuLimits, CpuMeter
from ..ops.batch import Transform, allocate_batch
from ..pipeline import Knob, Pipeline, Tuner, TuningDecision
from ._options import Reads, Throughput
from ._sample_prefetch import SamplePrefetch

__all__ = ["LoaderTuning", "TuningHooks", "loader_tuning"]

# Threads a stage of work that waits (I/O, a sleep) may reach; CPU-bound work stops at the cores.
_MAX_WAITING_THREADS = 64
# Batches of per-sample requests in flight at most.
_MAX_REQUEST_BATCHES = 64
# Finished batches kept ready at most.
_MAX_PREFETCH = 16
_GIB = 1 << 30


def default_memory_budget() -> int:
    """A tenth of the machine's memory, at most 4 GiB (1 GiB where it cannot be read)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return _GIB
    return int(min(4 * _GIB, total / 10))


@dataclass(frozen=True)
class TuningHooks:
    """What the tuning reaches of the Loader, as callbacks (it holds nothing else of it).

    Attributes:
        settle: Called with ``("decode" | "fetch" | "prefetch", value)`` after the running
            pipeline took a move, so the Loader's setting (and its buffer ring) follows and the
            next epoch starts there.
        fetched_batch_bytes: Mean bytes of one batch as read so far.
        requests: The per-sample prefetch whose requests in flight are the fetch knob, or None
            when batches are read by the fetch stage's threads.
    """

    settle: Callable[[str, int], None]
    fetched_batch_bytes: Callable[[], float]
    requests: Callable[[], SamplePrefetch | None]


class LoaderTuning:
    """The live tuning of one Loader, across its epochs.

    Args:
        hooks: How the moves reach the Loader's settings (`TuningHooks`).
        pinned: The knobs the user set: any of ``"decode"``, ``"fetch"``, ``"prefetch"``.
        wait_target: The tuner's goal (`Throughput.wait_target`).
        memory_budget: Bytes, or None for `default_memory_budget`.
        batch_bytes: Bytes of one decoded batch, or None when unknown (no transform).
    """

    def __init__(
        self, hooks: TuningHooks, *, pinned: set[str], wait_target: float, memory_budget: int | None, batch_bytes: int | None
    ) -> None:
        self.hooks = hooks
        self.pinned = pinned
        self.wait_target = wait_target
        self.memory_budget = memory_budget if memory_budget is not None else default_memory_budget()
        self.batch_bytes = batch_bytes
        # Appended by the tuner on the pipeline's scheduler thread, read by `stats` and
        # `snapshot` on any thread: read only through `moves` (one copy, taken whole).
        self.decisions: deque[TuningDecision] = deque(maxlen=1000)
        self.tuner: Tuner | None = None
        self.window = 1.0  # seconds between moves; shorter in tests
        self._cpu = CpuMeter()

    def moves(self) -> list[TuningDecision]:
        """The tuner's moves so far, oldest first. `deque.copy` is one call that holds the deque
        whole (its own lock on a free-threaded build; no bytecode in between under the GIL);
        iterating the deque itself while the tuner appends raises "deque mutated during
        iteration"."""
        return list(self.decisions.copy())

    def fetched_batch_bytes(self) -> float:
        """Mean bytes of one batch as read."""
        return self.hooks.fetched_batch_bytes()

    def decoded_batch_bytes(self) -> float:
        """Bytes of one decoded batch (the batch buffer), or the bytes read where unknown."""
        return float(self.batch_bytes) if self.batch_bytes is not None else self.fetched_batch_bytes()

    def attach(self, pipeline: Pipeline[Any]) -> None:
        """Tune ``pipeline`` (an epoch's) while it runs."""
        knobs = self.knobs(pipeline)
        if not knobs:
            return
        if self.tuner is not None:
            self.tuner.window = self.window
            self.tuner.restart(pipeline, knobs)
            pipeline.add_monitor(self.tuner)
            return
        self.tuner = Tuner(
            pipeline,
            knobs,
            wait_target=self.wait_target,
            memory_budget=self.memory_budget,
            window=self.window,
            cpu=self._cpu,
            decisions=self.decisions,
        )
        pipeline.add_monitor(self.tuner)

    def detach(self) -> None:
        """The epoch's pipeline ended: let it go (a cycle through it would keep its engine, and the
        storage's threads, alive until a second garbage collection)."""
        if self.tuner is not None:
            self.tuner.restart(None, [])

    def knobs(self, pipeline: Pipeline[Any]) -> list[Knob]:
        """The knobs of ``pipeline`` the user left unset."""
        settle = self.hooks.settle
        knobs: list[Knob] = []
        cores = CpuLimits.read().threads
        if "decode" not in self.pinned:

            def set_decode(value: int) -> None:
                pipeline.set_concurrency("decode", value)
                settle("decode", value)

            knobs.append(
                Knob(
                    "decode concurrency",
                    "threads",
                    lambda: pipeline.concurrency("decode"),
                    set_decode,
                    maximum=max(_MAX_WAITING_THREADS, 4 * cores),
                    stage="decode",
                    bytes_each=self.decoded_batch_bytes,
                )
            )
        if "fetch" not in self.pinned:
            prefetch = self.hooks.requests()
            if prefetch is not None:
                requests = prefetch

                def set_requests(value: int) -> None:
                    requests.max_batches = value
                    settle("fetch", value)

                knobs.append(
                    Knob(
                        "batches of requests in flight",
                        "requests",
                        lambda: requests.max_batches,
                        set_requests,
                        maximum=_MAX_REQUEST_BATCHES,
                        bytes_each=self.fetched_batch_bytes,
                        saturated=prefetch.saturated,
                    )
                )
            else:

                def set_fetch(value: int) -> None:
                    pipeline.set_concurrency("fetch", value)
                    settle("fetch", value)

                knobs.append(
                    Knob(
                        "fetch concurrency",
                        "threads",
                        lambda: pipeline.concurrency("fetch"),
                        set_fetch,
                        maximum=_MAX_WAITING_THREADS,
                        stage="fetch",
                        bytes_each=self.fetched_batch_bytes,
                    )
                )
        if "prefetch" not in self.pinned:

            def set_prefetch(value: int) -> None:
                pipeline.set_sink_size(value)
                settle("prefetch", value)

            knobs.append(
                Knob(
                    "prefetch",
                    "memory",
                    lambda: pipeline.sink_size,
                    set_prefetch,
                    maximum=_MAX_PREFETCH,
                    bytes_each=self.decoded_batch_bytes,
                )
            )
        return knobs


def loader_tuning(
    throughput: Throughput, reads: Reads, hooks: TuningHooks, *, transforms: Sequence[Transform | None], batch_size: int
) -> LoaderTuning | None:
    """The Loader's live tuning as its options ask (None without ``autotune``): the knobs the
    user set are pinned, and the memory budget is charged the largest batch of ``transforms``
    (one, or each bucket's)."""
    if not throughput.autotune:
        return None
    given = (("decode", throughput.decode_concurrency), ("fetch", reads.fetch_concurrency), ("prefetch", throughput.prefetch))
    sizes = [_batch_bytes(transform, batch_size) for transform in transforms]
    known = [size for size in sizes if size is not None]
    return LoaderTuning(
        hooks,
        pinned={name for name, value in given if value is not None},
        wait_target=throughput.wait_target,
        memory_budget=throughput.memory_budget,
        batch_bytes=max(known) if known else None,
    )


def _batch_bytes(transform: Transform | None, batch_size: int) -> int | None:
    """Bytes of one decoded batch, from the shape of an empty one (nothing allocated), or None."""
    if transform is None:
        return None
    empty = allocate_batch(transform, 0)
    return empty.itemsize * int(np.prod(empty.shape[1:])) * batch_size
