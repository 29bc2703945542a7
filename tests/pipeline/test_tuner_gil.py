"""The live tuner knows whether there is a GIL: with one, a stage of Python code taking turns on it
(several tasks running, one core busy between them) is held where it is; on a free-threaded build
the same figures are raised like any other. The interpreter's answer is injected
(`stoker._interpreter.gil_enabled`), and the pipeline's figures are given, not measured."""

from __future__ import annotations

from typing import Any, cast

import pytest

from stoker import _interpreter
from stoker.pipeline import CpuRoom, Knob, Pipeline, PipelineStats, StageStats, TaskTimeSummary, Tuner

WINDOW = 1.0
# A 2-core machine where this process keeps one core busy and nothing else runs.
ONE_CORE_OF_TWO = CpuRoom(usable=2.0, used=1.0, others=0.0, waited=0.0)


class RecordedPipeline:
    """A pipeline as its stats read, one window after another: ``busy`` of the stage's slots
    running all the time, each task on the CPU ``cpu_share`` of its time, the consumer waiting
    half the time. The stage's concurrency is what the tuner set."""

    name = "recorded"

    def __init__(self, *, busy: float, cpu_share: float, concurrency: int) -> None:
        self.busy, self.cpu_share, self.concurrency = busy, cpu_share, concurrency
        self.elapsed = 0.0

    def stats(self) -> PipelineStats:
        elapsed, self.elapsed = self.elapsed, self.elapsed + WINDOW
        count = int(100 * elapsed)
        times = TaskTimeSummary(count, 0.01, 0.01, 0.01, 0.01, 0.01, self.busy * elapsed)
        stage = StageStats(
            name="transform", kind="pipe", concurrency=self.concurrency, items_in=count, items_out=count, failures=0,
            task_time=times, task_cpu_seconds=self.busy * self.cpu_share * elapsed, busy_tasks_mean=self.busy,
            wait_input_seconds=0.0, wait_output_seconds=0.0, queue_capacity=8, queue_length=0, queue_length_mean=0.0,
            elapsed_seconds=elapsed,
        )  # fmt: skip
        return PipelineStats(stages=[stage], elapsed_seconds=elapsed, consumer_wait_seconds=0.5 * elapsed, items_consumed=count)

    def knob(self) -> Knob:
        return Knob("transform concurrency", "threads", lambda: self.concurrency, self.set, stage="transform")

    def set(self, value: int) -> None:
        self.concurrency = value


def first_moves(pipeline: RecordedPipeline, cpu: CpuRoom) -> list[tuple[int, int, str]]:
    """The tuner's moves after one window of ``pipeline``."""
    tuner = Tuner(cast(Pipeline[Any], pipeline), [pipeline.knob()], window=WINDOW, cpu=lambda: cpu)
    tuner()
    return [(move.old, move.new, move.reason) for move in tuner.decisions]


# Python code in threads: 4 tasks on the CPU a quarter of their time each, or 2 half of theirs.
PYTHON_STAGES = [pytest.param(4, 0.25, id="4-tasks-a-quarter-each"), pytest.param(2, 0.5, id="2-tasks-half-each")]


@pytest.mark.parametrize(("tasks", "cpu_share"), PYTHON_STAGES)
def test_with_a_gil_a_stage_taking_turns_on_one_core_is_not_raised(monkeypatch: pytest.MonkeyPatch, tasks: int, cpu_share: float) -> None:
    # Once: 4 Python threads, each on the CPU a quarter of the time (the rest waiting for the
    # GIL), read as "waiting on I/O" and were doubled to 8, and so on: more turns, no more work.
    monkeypatch.setattr(_interpreter, "gil_enabled", lambda: True)
    pipeline = RecordedPipeline(busy=float(tasks), cpu_share=cpu_share, concurrency=tasks)
    assert first_moves(pipeline, ONE_CORE_OF_TWO) == []
    assert pipeline.concurrency == tasks


@pytest.mark.parametrize(("tasks", "cpu_share"), PYTHON_STAGES)
def test_on_a_free_threaded_build_the_same_stage_is_raised(monkeypatch: pytest.MonkeyPatch, tasks: int, cpu_share: float) -> None:
    monkeypatch.setattr(_interpreter, "gil_enabled", lambda: False)
    pipeline = RecordedPipeline(busy=float(tasks), cpu_share=cpu_share, concurrency=tasks)
    moves = first_moves(pipeline, ONE_CORE_OF_TWO)
    assert len(moves) == 1 and moves[0][0] == tasks and moves[0][1] > tasks, moves
    assert "GIL" not in moves[0][2]
    assert pipeline.concurrency > tasks


def test_with_a_gil_a_stage_that_keeps_several_cores_busy_is_still_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    # Native work that releases the GIL (decode): 2 tasks on the CPU all their time, 2 cores of 4.
    monkeypatch.setattr(_interpreter, "gil_enabled", lambda: True)
    pipeline = RecordedPipeline(busy=2.0, cpu_share=0.95, concurrency=2)
    moves = first_moves(pipeline, CpuRoom(usable=4.0, used=1.9, others=0.0, waited=0.0))
    assert [(old, new) for old, new, _reason in moves] == [(2, 3)], moves
    assert "CPU-bound" in moves[0][2]


def test_with_a_gil_threads_waiting_for_cores_are_contention_not_the_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    # Other processes hold the cores and the threads wait to run: the tuner's contention rule, which
    # wins this job a larger share with more threads while the consumer waits.
    monkeypatch.setattr(_interpreter, "gil_enabled", lambda: True)
    pipeline = RecordedPipeline(busy=2.0, cpu_share=0.5, concurrency=2)
    moves = first_moves(pipeline, CpuRoom(usable=2.0, used=1.0, others=1.0, waited=0.5))
    assert [(old, new) for old, new, _reason in moves] == [(2, 4)], moves
    assert "other processes keep 1.0 of 2 cores busy" in moves[0][2]


def test_the_interpreter_answers_from_sys_where_it_can(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys._is_gil_enabled", lambda: False, raising=False)
    assert _interpreter.gil_enabled() is False
    monkeypatch.setattr("sys._is_gil_enabled", lambda: True, raising=False)
    assert _interpreter.gil_enabled() is True
    monkeypatch.delattr("sys._is_gil_enabled", raising=False)
    assert _interpreter.gil_enabled() is True, "an interpreter that cannot say has a GIL (every one before 3.13)"
