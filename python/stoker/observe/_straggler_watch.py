"""`StragglerWatch`: the straggler of a synchronous job named while it runs, from every rank's
figures gathered over the job's own process group.

Wrap the Loader the training loop consumes on every rank::

    for batch in StragglerWatch(loader):
        step(batch)

Each rank measures its data wait (time inside ``next()``, as `DataWaitMeter` does), its
Loader's per-stage figures and how much of the cores it may run on other processes used. At agreed steps every rank sends its
figures to all (two all-gathers of bytes over a gloo group of the watch's own), and rank 0 logs
`straggler_verdict` on the ``stoker.straggler`` logger: a warning naming the rank, its host and
the cause when one rank holds the others back, an info line otherwise. It does so every
``interval`` seconds and at the end of each epoch, for the whole epoch. The epoch's first
gathering (step ``first_check``) only measures the pace: it covers the pipelines' filling, which
the epoch's verdict leaves out too.

Why steps, not a timer: a collective must be called by every rank at the same point. All ranks
of a synchronous job take the same steps, so the watch gathers at step numbers every rank
computes alike from the figures of the last gathering (the interval over the ranks' median
seconds per step), and at the epoch's end, which every rank reaches at the same step when the
loaders yield equal numbers of batches (the Loader's sharding does; a `TokenLoader` with
``equal_steps``). A rank that stops early (a ``break``) is not waited for forever: after
``timeout`` seconds the others' gathering fails, the watch says so once and stops watching.

The figures travel as JSON, never pickled, and are checked on arrival (`RankFigures.from_json`).
"""

from __future__ import annotations

import socket
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from time import perf_counter
from typing import Any, Generic, TypeVar

from .._bounded import shown_logger
from ..distributed import process_group
from ._host_cpu import cores_busy_seconds, others_share, process_cpu_seconds, reads_from, usable_cores
from ._snapshot import LiveSnapshot
from ._straggler import MAX_FIGURES_BYTES, RankFigures, StageFigures, straggler_verdict

__all__ = ["StragglerWatch"]

T = TypeVar("T")
logger = shown_logger("stoker.straggler")


@dataclass
class _Mark:
    """Counters at the start of an interval or an epoch."""

    at: float
    wait_seconds: float
    steps: int
    stages: dict[str, tuple[int, float]]
    cores_busy: float | None  # seconds the cores this rank may run on were busy (all processes)
    own_cpu: float  # this process's CPU seconds


class StragglerWatch(Generic[T]):
    """Iterate ``loader`` as the training loop does, and name the rank that holds a synchronous
    job back (see the module notes).

    Made on every rank in the same order: with an initialized ``torch.distributed`` process group
    of several ranks it creates a gloo group (a collective call). Without one it only measures
    (one rank holds no one back), and `figures` still tells this rank's.

    Args:
        loader: What the training loop iterates (a `Loader`: its per-stage figures and where its
            storage reads go enter the verdict; any iterable: the data wait alone).
        interval: Seconds between verdicts within an epoch (about: gatherings fall on steps).
        first_check: The step of an epoch's first gathering, which measures the step's time
            (no verdict: it covers the pipeline's filling).
        timeout: Seconds a gathering waits for the slowest rank before the watch gives up.

    Attributes:
        verdicts: On rank 0, every verdict logged (None where no rank stood out).
        figures: The last gathering's figures of every rank (this rank's alone without a group).
    """

    def __init__(self, loader: Iterable[T], *, interval: float = 60.0, first_check: int = 20, timeout: float = 300.0) -> None:
        self._loader = loader
        self.interval = interval
        self.first_check = max(1, first_check)
        self.verdicts: list[str | None] = []
        self.figures: list[RankFigures] = []
        self._host = socket.gethostname()
        self._reads_from = reads_from(loader)
        self._distributed: Any = process_group()
        self._group: Any = None
        self._rank, self._world = 0, 1
        if self._distributed is not None:
            self._rank, self._world = self._distributed.get_rank(), self._distributed.get_world_size()
            if self._world > 1:
                self._group = self._distributed.new_group(backend="gloo", timeout=timedelta(seconds=timeout))
        self._wait_seconds = 0.0
        self._steps = 0
        self._epoch = -1

    def __iter__(self) -> Iterator[T]:
        self._epoch += 1
        iterator = iter(self._loader)
        epoch_mark: _Mark | None = None
        interval_mark: _Mark | None = None
        next_check = self._steps + self.first_check
        finished = filled = False
        while True:
            asked = perf_counter()
            try:
                item = next(iterator)
            except StopIteration:
                finished = True
                break
            if epoch_mark is None:
                # The first batch's wait is start-up (workers, first reads), not a rank's pace.
                epoch_mark = interval_mark = self._mark()
            else:
                self._wait_seconds += perf_counter() - asked
            self._steps += 1
            if self._steps == next_check and interval_mark is not None:
                # The epoch's first gathering covers its pipeline's filling (a rank whose queues
                # fill later looks like a straggler for a second): it sets the pace, unjudged.
                span = f"steps {interval_mark.steps + 1}-{self._steps}"
                step_seconds = self._check(interval_mark, span, judge=filled)
                interval_mark = self._mark()
                if not filled:
                    epoch_mark, filled = interval_mark, True  # the epoch's verdict leaves the filling out too
                next_check = self._steps + max(1, round(self.interval / step_seconds)) if step_seconds > 0 else next_check + 1000
            yield item
        if finished and epoch_mark is not None:
            self._check(epoch_mark, f"epoch {self._epoch}")

    def _mark(self) -> _Mark:
        take: Any = getattr(self._loader, "snapshot", None)
        snapshot: LiveSnapshot | None = take() if callable(take) else None
        stages = snapshot.stage_totals() if isinstance(snapshot, LiveSnapshot) else {}
        return _Mark(perf_counter(), self._wait_seconds, self._steps, stages, cores_busy_seconds(), process_cpu_seconds())

    def _check(self, mark: _Mark, span: str, judge: bool = True) -> float:
        """Gather every rank's figures since ``mark``; rank 0 logs the verdict. Returns the ranks'
        median seconds per step (the same on every rank: it comes from the gathered figures)."""
        if self._world > 1 and self._group is None:
            return 0.0  # the watch stopped: a gathering failed
        now = self._mark()
        # Counters only grow; max() keeps a float's rounding (-1e-19) from reading as negative.
        stages = tuple(
            StageFigures(name, max(0, items - mark.stages.get(name, (0, 0.0))[0]), max(0.0, busy - mark.stages.get(name, (0, 0.0))[1]))
            for name, (items, busy) in now.stages.items()
        )
        mine = RankFigures(
            rank=self._rank,
            host=self._host,
            seconds=max(0.0, now.at - mark.at),
            wait_seconds=max(0.0, now.wait_seconds - mark.wait_seconds),
            steps=now.steps - mark.steps,
            stages=stages,
            others_cpu_share=_others_share(mark, now),
            reads_from=self._reads_from,
        )
        everyone = self._gather(mine) if self._group is not None else [mine]
        if everyone is None:
            return 0.0
        self.figures = everyone
        if self._rank == 0 and self._world > 1 and judge:
            verdict = straggler_verdict(everyone)
            self.verdicts.append(verdict)
            if verdict is not None:
                logger.warning("stoker straggler (%s): %s", span, verdict)
            else:
                shares = sorted(figures.wait_share for figures in everyone)
                logger.info(
                    "stoker straggler (%s): none; the %d ranks wait for data %.0f%%-%.0f%% of their steps",
                    span, len(everyone), 100 * shares[0], 100 * shares[-1],
                )  # fmt: skip
        paces = [figures.seconds / figures.steps for figures in everyone if figures.steps > 0]
        return statistics.median(paces) if paces else 0.0

    def _gather(self, mine: RankFigures) -> list[RankFigures] | None:
        """Every rank's figures, in rank order; None (and the watch stops) when a rank does not
        join in time or sends what is not figures."""
        import torch

        distributed, group = self._distributed, self._group
        data = mine.to_json()
        try:
            sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self._world)]
            distributed.all_gather(sizes, torch.tensor([len(data)], dtype=torch.int64), group=group)
            longest = max(int(size.item()) for size in sizes)
            if longest > MAX_FIGURES_BYTES or min(int(size.item()) for size in sizes) < 0:
                raise ValueError(f"a rank sent {longest} bytes of figures (at most {MAX_FIGURES_BYTES})")
            padded = torch.zeros(longest, dtype=torch.uint8)
            padded[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            received = [torch.zeros(longest, dtype=torch.uint8) for _ in range(self._world)]
            distributed.all_gather(received, padded, group=group)
            return [RankFigures.from_json(bytes(buffer[: int(size.item())].numpy())) for buffer, size in zip(received, sizes, strict=True)]
        except (RuntimeError, ValueError) as error:
            logger.warning("stoker straggler: stopped watching; rank %d could not gather every rank's figures: %s", self._rank, error)
            self._group = None
            return None


def _others_share(start: _Mark, end: _Mark) -> float | None:
    """Share of this rank's cores other processes used between two marks."""
    if start.cores_busy is None or end.cores_busy is None:
        return None
    return others_share(end.cores_busy - start.cores_busy, end.own_cpu - start.own_cpu, end.at - start.at, usable_cores())
