"""The pipeline engine under many threads switching between almost any two bytecodes: no item lost
or repeated, every count exact, and what a reader sees never torn by a writer in between."""

from __future__ import annotations

import threading

import pytest

from stoker.pipeline import PipelineBuilder

pytestmark = pytest.mark.usefixtures("switch_often")

ITEMS = 10_000
THREADS = 16


def test_every_item_once_and_the_cpu_seconds_of_every_task_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    # Once: each worker thread added its task's CPU seconds to the stage's total without the
    # engine's lock (`+=` on an attribute: a load, a call, a store), and with 16 threads switching
    # that often, updates were lost. Each thread's CPU clock here ticks one second a reading, so
    # every task takes exactly one second and the total is exact.
    clock = threading.local()

    def ticking_thread_time() -> float:
        clock.seconds = getattr(clock, "seconds", 0.0) + 1.0
        return float(clock.seconds)

    monkeypatch.setattr("stoker.pipeline._engine.thread_time", ticking_thread_time)

    def work(item: int) -> int:
        total = 0
        for number in range(200):  # Python work: a switch is possible at every turn of the loop
            total += number
        return item

    pipeline = (
        PipelineBuilder().add_source(range(ITEMS)).pipe(work, concurrency=THREADS, name="work").add_sink(4).build(num_threads=THREADS)
    )
    with pipeline.auto_stop():
        delivered = list(pipeline)
    stats = pipeline.stats()
    assert sorted(delivered) == list(range(ITEMS)), "every item exactly once"
    work_stage = stats.stages[1]
    assert (work_stage.items_in, work_stage.items_out, work_stage.task_time.count, stats.items_consumed) == (ITEMS,) * 4
    assert work_stage.task_cpu_seconds == ITEMS, "one second a task, none lost"


def test_the_sink_size_read_while_the_last_stage_changes_concurrency_is_never_torn() -> None:
    # Once: `sink_size` read the sink's capacity and the last stage's concurrency without the lock,
    # and `set_concurrency` changes the first before the second: a reader in between saw the sink
    # size off by the change.
    release = threading.Event()

    def held(item: int) -> int:
        release.wait(30)
        return item

    pipeline = PipelineBuilder().add_source(range(ITEMS)).pipe(held, concurrency=2, name="held").add_sink(3).build(num_threads=THREADS)
    seen: set[int] = set()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.add(pipeline.sink_size)

    with pipeline.auto_stop():
        pipeline.start()
        readers = [threading.Thread(target=read) for _ in range(4)]
        for reader in readers:
            reader.start()
        for round_number in range(20_000):
            pipeline.set_concurrency("held", 1 + round_number % 8)
        done.set()
        for reader in readers:
            reader.join(30)
        release.set()
        delivered = list(pipeline)
    assert seen == {3}, sorted(seen)
    assert sorted(delivered) == list(range(ITEMS))
