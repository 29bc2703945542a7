"""Live tuning: a running pipeline adjusts its own concurrency and buffers to a stated goal.

The goal is the consumer's: it waits for data at most ``wait_target`` of the time (2% by default),
and among the settings that achieve it, the one with the fewest threads, requests in flight and
bytes of memory. tf.data's AUTOTUNE tunes towards throughput inside a RAM budget; this tunes towards
*enough* throughput, so a consumer with a long step (a GPU) gets one thread where one suffices.

Every window (a second, or long enough for a few items) the `Tuner` reads the pipeline's stats:
how long the consumer waited, each stage's busy slots and how much of that was CPU, and, where the
caller measures it, how many cores other processes hold. Then one move at most:

- The consumer waited more than the target: raise the knob of the busiest stage (one thread more
  for CPU-bound work, while cores are free; twice as many for work that waits), or, when no stage
  is busy, keep one more finished item ready (bursts). Each raise is a *trial*: it is kept only if
  the next window delivers 5% more or meets the target, and undone otherwise; an undone value is
  not tried again for a while (hysteresis), so the settings never visibly oscillate.
- With a GIL, a busy stage whose tasks take turns on it (several running, about one core busy
  between them, the process no busier: Python code) is held at one core's worth, never raised:
  more threads would only take more turns, and each one's low CPU share would read as waiting on
  I/O. A free-threaded build has no such hold (`stoker._interpreter.held_by_the_gil`). While
  other processes keep this one's threads waiting for cores, the GIL and that contention look
  alike in these figures, and the contention rules below decide.
- The consumer hardly waited for two windows, or a stage has idle slots: lower that stage's knob
  to what its measured load needs, also as a trial that is undone if the wait rises or the rate
  falls.
- The consumer waited and took nothing (its first item, an outage): no move. A wait in progress
  counts as waited (`PipelineStats.consumer_wait_seconds`), never as fed.
- Other processes hold the cores and our threads wait to run. When the consumer has data enough,
  CPU-bound stages back off to the cores left: the other processes may be this job's own trainer.
  This is a trial too: it is undone when the other processes' CPU falls with ours, because then
  they work for this job (a server or proxy on the same machine) and backing off only slows both.
  When the consumer waits for data, the opposite: the busiest CPU-bound stage goes to twice the
  cores at once (the kernel shares cores by thread, so more threads win a larger share), kept only
  if the rate rises.

Each move is a `TuningDecision`, logged on ``stoker.tune`` and kept for `stats()`. Tuning moves
only how many tasks run and how many items wait; it never changes what is delivered or in what
order, so exact resume and a deterministic order are unaffected.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from time import perf_counter
from typing import TYPE_CHECKING

from .. import _interpreter
from .._bounded import shown_logger
from ._stats import PipelineStats, TuningDecision
from ._tuning_inputs import CpuRoom, Knob, StageWindow, Window

if TYPE_CHECKING:
    from ._pipeline import Pipeline

__all__ = ["Tuner"]

_logger = shown_logger("stoker.tune")

# A raise is kept when it delivers this much more (the machines are noisy: less is not a result).
_GAIN = 1.05
# A lowering is kept unless the rate falls by more than this (when the goal is not met anyway).
_LOSS = 0.97
# Windows an undone value waits before it may be tried again.
_COOLDOWN_WINDOWS = 12
# A stage this busy (share of its slots) is a bottleneck candidate.
_BUSY = 0.75
# Items a window must see before it is judged, unless it has lasted four windows.
_MIN_ITEMS = 6
# Threads per usable core a CPU-bound stage may reach when other processes compete for the cores
# and the consumer waits for data.
_CONTENDED_THREADS_PER_CORE = 4
# Cores other processes keep busy, while this job's threads wait to run, for more threads to win
# this job a larger share (lower than what `CpuRoom.contended` asks: once threads are won, the
# others hold less, and the next doubling still pays).
_COMPETING_OTHERS = 0.3
# Cores other processes may keep busy for the machine to count as theirs no longer.
_NO_OTHERS = 0.15
# Decisions kept for stats().
_DECISIONS_KEPT = 1000


@dataclass
class _Trial:
    knob: Knob
    old: int
    new: int
    before: Window
    raising: bool
    backing_off: bool = False


class Tuner:
    """Moves ``knobs`` of a running ``pipeline`` towards the wait target (see the module notes).
    Install it with ``pipeline.add_monitor(tuner)``: it runs on the scheduler thread.

    Args:
        pipeline: The pipeline whose stats it reads.
        knobs: What it may move (leave out what the user pinned).
        wait_target: Share of the time the consumer may wait for data.
        memory_budget: Bytes the memory the knobs hold may reach (None: no cap).
        window: Least seconds between moves.
        cpu: Called once per window: the cores over that window (`CpuRoom`), or None.
        decisions: Where to append decisions (kept across epochs by the caller).
    """

    def __init__(
        self,
        pipeline: Pipeline[object],
        knobs: Sequence[Knob],
        *,
        wait_target: float = 0.02,
        memory_budget: float | None = None,
        window: float = 1.0,
        cpu: Callable[[], CpuRoom | None] | None = None,
        decisions: deque[TuningDecision] | None = None,
    ) -> None:
        self.pipeline: Pipeline[object] | None = pipeline
        self.knobs = list(knobs)
        self.wait_target = wait_target
        self.memory_budget = memory_budget
        self.window = window
        self.cpu = cpu
        self.decisions: deque[TuningDecision] = decisions if decisions is not None else deque(maxlen=_DECISIONS_KEPT)
        self._previous: PipelineStats | None = pipeline.stats()  # from its start
        self._partial: Window | None = None  # the end of the last pipeline's window
        self._began = perf_counter()
        self._trial: _Trial | None = None
        self._settle = 0
        self._calm = 0
        self._windows = 0
        self._checked = 0.0
        # knob name -> (value not to try, window number until which it holds)
        self._ceilings: dict[str, tuple[int, int]] = {}
        self._floors: dict[str, tuple[int, int]] = {}
        self._serving_until: dict[str, int] = {}  # knob name -> window until which no back-off
        if cpu is not None:
            cpu()  # the first window is measured from here

    def restart(self, pipeline: Pipeline[object] | None, knobs: Sequence[Knob]) -> None:
        """Tune a new pipeline (the next epoch's) with these ``knobs``, remembering which values
        were tried and undone; None lets go of the last one. A trial still open is judged in the
        new pipeline, after a window for its queues to fill."""
        if self.pipeline is not None and self._previous is not None:
            # The last pipeline's unfinished window counts towards the next one: epochs shorter
            # than a window are tuned too.
            part = Window.between(self._previous, self.pipeline.stats())
            self._partial = part if self._partial is None else self._partial.then(part)
        self.pipeline, self.knobs = pipeline, list(knobs)
        self._previous = pipeline.stats() if pipeline is not None else None  # from its start
        self._settle, self._calm = 1 if self._trial is not None else 0, 0
        if self._trial is not None:
            # By name: the knob of the last pipeline must not keep that pipeline alive.
            self._trial.knob = next((knob for knob in self.knobs if knob.name == self._trial.knob.name), _detached(self._trial.knob))
        if self.cpu is not None and pipeline is not None:
            self.cpu()  # the first window is measured from here

    # ---- the monitor ----------------------------------------------------------------------

    def __call__(self) -> None:
        """Read the stats; once a window is complete, judge it and make at most one move."""
        if self.pipeline is None or perf_counter() - self._checked < self.window / 4:
            return
        self._checked = perf_counter()
        stats = self.pipeline.stats()
        previous = self._previous
        if previous is None:
            self._previous = stats
            return
        window = Window.between(previous, stats)
        if self._partial is not None:
            window = self._partial.then(window)
        if window.seconds < self.window or (window.items < _MIN_ITEMS and window.seconds < 4 * self.window):
            return
        self._previous, self._partial = stats, None
        if window.items == 0 and window.wait > self.wait_target:
            # The consumer waited and got nothing: its first item (a store's first answer, a cold
            # start) or an outage. Neither fed nor a rate to judge a move by: no move.
            _logger.debug("no move: the consumer waited %s of %.1f s and took nothing", _percent(window.wait), window.seconds)
            return
        self._windows += 1
        cpu = self.cpu() if self.cpu is not None else None
        self._step(replace(window, cpu=cpu), perf_counter() - self._began)

    def memory(self) -> float:
        """Bytes the knobs hold now (each knob's value times its ``bytes_each``)."""
        return sum(knob.get() * knob.bytes_each() for knob in self.knobs)

    # ---- one move -------------------------------------------------------------------------

    def _step(self, window: Window, now: float) -> None:
        if self._settle > 0:  # the window right after a move: queues are still filling
            self._settle -= 1
            return
        if self._trial is not None:
            trial, self._trial = self._trial, None
            if not self._judge(trial, window, now):
                return
            # Kept: this window already shows the new setting, so it may ground the next move
            # (a window saved per step: the first seconds of a run are what it costs).
        # Backing off leaves the cores to the other processes: right when this job's consumer has
        # data enough (its own trainer may be what needs them), wrong when it waits for data.
        if window.cpu is not None and window.cpu.contended and window.wait <= self.wait_target and self._back_off(window, now):
            return
        if window.wait > self.wait_target:
            self._calm = 0
            if not self._try_raise(window, now):
                self._try_lower(window, now, calm=False)
        elif window.wait < self.wait_target / 2:
            self._calm += 1
            if self._calm >= 2:
                self._try_lower(window, now, calm=True)
        else:
            self._calm = 0

    def _try_raise(self, window: Window, now: float) -> bool:
        busiest = sorted(
            (knob for knob in self.knobs if knob.kind == "threads" and knob.stage in window.stages),
            key=lambda knob: -window.stages[knob.stage].utilization,  # type: ignore[index]
        )
        bottleneck = False
        for knob in busiest:
            stage = window.stages[knob.stage]  # type: ignore[index]
            if stage.utilization < _BUSY:
                continue
            bottleneck = True
            old = knob.get()
            if _held_by_the_gil(stage, window.cpu):
                # Python code taking turns on the GIL: one core's worth whatever the threads.
                _logger.debug("no raise: %s's %.1f busy tasks take turns on the GIL", knob.stage, stage.busy)
                continue
            if window.cpu_bound(stage):
                cpu = window.cpu
                if cpu is not None and cpu.others >= _COMPETING_OTHERS and cpu.waited >= 0.2:
                    # The kernel shares the cores out by thread: with other processes running,
                    # more threads win this job a larger share (2 threads against a process
                    # spinning on one of 2 cores get 1.33 cores, 4 get 1.6, 8 get 1.78). Doubling,
                    # from twice the cores, up to four times: a thread at a time would spend the
                    # first seconds of the run getting there.
                    new = min(max(old * 2, math.ceil(2 * cpu.usable)), max(old, math.ceil(_CONTENDED_THREADS_PER_CORE * cpu.usable)))
                    why = (
                        f"consumer waited {_percent(window.wait)}; {knob.stage} busy {_percent(stage.utilization)}, CPU-bound, "
                        f"and other processes keep {cpu.others:.1f} of {cpu.usable:g} cores busy: more threads for a larger share"
                    )
                elif cpu is not None and cpu.free < 0.5 * stage.cpu_share:
                    continue  # no core free for one more: this job's threads would take turns
                else:
                    new = old + 1
                    why = f"consumer waited {_percent(window.wait)}; {knob.stage} busy {_percent(stage.utilization)}, CPU-bound"
            else:
                new = old * 2
                why = f"consumer waited {_percent(window.wait)}; {knob.stage} busy {_percent(stage.utilization)}, waiting on I/O"
            if self._start(knob, new, window, now, why, raising=True):
                return True
        for knob in self.knobs:
            if knob.kind == "requests" and knob.saturated is not None and knob.saturated():
                why = f"consumer waited {_percent(window.wait)} with every allowed read in flight"
                if self._start(knob, math.ceil(knob.get() * 1.5), window, now, why, raising=True):
                    return True
        if not bottleneck:
            for knob in self.knobs:
                if knob.kind == "memory":
                    why = f"consumer waited {_percent(window.wait)} though no stage is busy (bursts)"
                    if self._start(knob, knob.get() + 1, window, now, why, raising=True):
                        return True
        return False

    def _try_lower(self, window: Window, now: float, *, calm: bool) -> bool:
        # Threads first (the dearest), then reads in flight, then memory; the last two only when
        # the consumer is the slower side, since they hold no thread.
        cpu = window.cpu
        if cpu is not None and cpu.others < _NO_OTHERS:
            # Threads won from other processes that have since gone: twice the cores are enough.
            # (Not merely "not contended": with the threads won, the others hold little.)
            enough = math.ceil(2 * cpu.usable)
            for knob in self.knobs:
                stage = window.stages.get(knob.stage or "")
                if knob.kind == "threads" and stage is not None and window.cpu_bound(stage) and knob.get() > enough:
                    why = f"no other process competes for the cores now: {enough} thread(s) for {knob.stage}, twice the cores"
                    if self._start(knob, enough, window, now, why, raising=False):
                        return True
        slack = []
        for knob in self.knobs:
            if knob.kind == "threads" and knob.stage in window.stages:
                stage = window.stages[knob.stage]
                idle = stage.concurrency - stage.busy
                if idle >= (1.0 if calm else 1.5):
                    slack.append((idle, knob, stage))
        for _idle, knob, stage in sorted(slack, key=lambda entry: -entry[0]):
            needed = max(1, math.ceil(stage.busy * 1.25 + 0.25))
            why = f"{knob.stage} used {stage.busy:.1f} of {stage.concurrency} slots; consumer waited {_percent(window.wait)}"
            if self._start(knob, min(needed, knob.get() - 1), window, now, why, raising=False):
                return True
        if not calm:
            return False
        for kind in ("requests", "memory"):
            for knob in self.knobs:
                if knob.kind == kind:
                    old = knob.get()
                    new = old // 2 if kind == "requests" else old - 1
                    why = f"consumer waited {_percent(window.wait)}, under half the {_percent(self.wait_target)} target"
                    if self._start(knob, new, window, now, why, raising=False):
                        return True
        return False

    def _back_off(self, window: Window, now: float) -> bool:
        cpu = window.cpu
        assert cpu is not None
        cores = max(1, round(cpu.usable - cpu.others))
        for knob in self.knobs:
            stage = window.stages.get(knob.stage or "")
            if knob.kind != "threads" or stage is None or not window.cpu_bound(stage):
                continue
            if self._windows < self._serving_until.get(knob.name, -1):
                continue  # the other processes were found to work for this job
            old = knob.get()
            new = max(knob.minimum, cores)
            if new < old:
                why = (
                    f"other processes keep {cpu.others:.1f} of {cpu.usable:g} cores busy and stoker's threads waited to run "
                    f"{_percent(cpu.waited)} of their time: {cores} thread(s) for {knob.stage}, not more"
                )
                self._apply(knob, old, new, now, why)
                self._trial = _Trial(knob, old, new, window, raising=False, backing_off=True)
                self._settle = 1
                return True
        return False

    # ---- trials ---------------------------------------------------------------------------

    def _start(self, knob: Knob, new: int, window: Window, now: float, why: str, *, raising: bool) -> bool:
        old = knob.get()
        new = max(knob.minimum, min(knob.maximum, new))
        if new == old:
            return False
        ceiling = self._ceilings.get(knob.name)
        if raising and ceiling is not None and self._windows < ceiling[1]:
            new = min(new, ceiling[0] - 1)
        floor = self._floors.get(knob.name)
        if not raising and floor is not None and self._windows < floor[1]:
            new = max(new, floor[0] + 1)
        if (raising and new <= old) or (not raising and new >= old):
            return False
        if raising and self.memory_budget is not None and self.memory() + (new - old) * knob.bytes_each() > self.memory_budget:
            return False
        self._apply(knob, old, new, now, why)
        self._trial = _Trial(knob, old, new, window, raising)
        self._settle = 1
        return True

    def _judge(self, trial: _Trial, window: Window, now: float) -> bool:
        """Keep or undo ``trial`` by what ``window`` shows; whether it was kept."""
        before, target = trial.before, self.wait_target
        if trial.backing_off:
            # Kept when the other processes took the cores we left (their own work); undone when
            # their CPU fell with ours: they serve this job (a local server, a proxy), and fewer
            # threads only slow both.
            others_before = before.cpu.others if before.cpu is not None else 0.0
            others_now = window.cpu.others if window.cpu is not None else others_before
            if others_now >= 0.85 * others_before:
                return True
            why = (
                f"undone: other processes' CPU fell with this job's ({others_before:.1f} -> {others_now:.1f} cores): "
                "they work for it (a local server or proxy)"
            )
            self._apply(trial.knob, trial.new, trial.old, now, why)
            # Who serves whom changes rarely: a long cooldown.
            self._serving_until[trial.knob.name] = self._windows + 5 * _COOLDOWN_WINDOWS
            self._settle = 1
            return False
        if trial.raising:
            kept = window.rate >= before.rate * _GAIN or (before.wait > target and window.wait <= target)
        elif window.wait <= target:
            # The consumer is fed with fewer threads: the goal, whatever the rate did (a fed
            # consumer sets the rate, and its own noise is no reason to restore idle threads).
            kept = True
        else:
            # Still short of the goal: kept only if it was short before too and the rate held.
            kept = before.wait > target and window.rate >= before.rate * _LOSS
        if kept:
            _logger.debug("kept %s %d (rate %.1f/s -> %.1f/s)", trial.knob.name, trial.new, before.rate, window.rate)
            return True
        why = f"undone: {window.rate:.1f} items/s against {before.rate:.1f} before, consumer waited {_percent(window.wait)}"
        self._apply(trial.knob, trial.new, trial.old, now, why)
        # No move in the same direction from the restored value for a while: the hysteresis.
        if trial.raising:
            self._ceilings[trial.knob.name] = (trial.old + 1, self._windows + _COOLDOWN_WINDOWS)
        else:
            self._floors[trial.knob.name] = (trial.old - 1, self._windows + _COOLDOWN_WINDOWS)
        self._settle = 1
        return False

    def _apply(self, knob: Knob, old: int, new: int, now: float, why: str) -> None:
        knob.set(new)
        decision = TuningDecision(round(now, 2), knob.name, old, new, why)
        self.decisions.append(decision)
        _logger.info("pipeline %s: %s", self.pipeline.name if self.pipeline is not None else "?", decision.describe())


def _held_by_the_gil(stage: StageWindow, cpu: CpuRoom | None) -> bool:
    """Whether ``stage``'s threads take turns on the GIL (`stoker._interpreter.held_by_the_gil`),
    and not on cores the kernel shares out (threads waiting to run are contention, not the GIL)."""
    if cpu is not None and cpu.waited >= 0.2:
        return False
    return _interpreter.held_by_the_gil(stage.busy, stage.busy * stage.cpu_share, cpu.used if cpu is not None else None)


def _detached(knob: Knob) -> Knob:
    """A stand-in for a knob whose pipeline ended: its name and limits, nothing to move."""
    value = knob.get()
    return Knob(knob.name, knob.kind, lambda: value, lambda _value: None, knob.minimum, knob.maximum, knob.stage)


def _percent(share: float) -> str:
    return f"{100 * share:.1f}%" if share < 0.1 else f"{100 * share:.0f}%"
