"""Lifecycle: every way a loop can end leaves no thread behind and never hangs."""

from __future__ import annotations

import _thread
import gc
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from stoker.pipeline import PipelineBuilder, PipelineStoppedError


def _slow(item: int) -> int:
    time.sleep(0.002)
    return item


def _alive(pipeline) -> list[threading.Thread]:
    return [thread for thread in pipeline.threads() if thread.is_alive()]


def _endless_pipeline():
    def endless():
        number = 0
        while True:
            yield number
            number += 1

    return PipelineBuilder().add_source(endless()).pipe(_slow, concurrency=4).aggregate(3).add_sink(2).build()


def test_exhausted_loop_stops_the_threads() -> None:
    pipeline = PipelineBuilder().add_source(range(20)).pipe(_slow, concurrency=4).add_sink(2).build()
    assert sorted(pipeline) == list(range(20))
    assert pipeline.threads() and not _alive(pipeline)


def test_break_stops_the_threads() -> None:
    pipeline = _endless_pipeline()
    for index, _ in enumerate(pipeline):
        if index == 5:
            break
    assert not _alive(pipeline)


def test_exception_in_the_consumer_stops_the_threads() -> None:
    pipeline = _endless_pipeline()
    with pytest.raises(ZeroDivisionError):
        for _ in pipeline:
            _ = 1 / 0
    gc.collect()
    assert not _alive(pipeline)


def test_auto_stop_with_manual_next() -> None:
    pipeline = _endless_pipeline()
    with pipeline.auto_stop():
        first = next(pipeline)
        second = pipeline.get(timeout=10)
    assert len(first) == 3 and len(second) == 3
    assert not _alive(pipeline)


def test_stop_is_idempotent_and_iterating_again_is_an_error() -> None:
    pipeline = PipelineBuilder().add_source(range(5)).pipe(_slow).add_sink(2).build()
    assert sorted(pipeline) == list(range(5))
    pipeline.stop()
    pipeline.stop()
    with pytest.raises(PipelineStoppedError, match="one pass"):
        iter(pipeline)
    # An exhausted iterator keeps saying so (the iterator protocol).
    with pytest.raises(StopIteration):
        next(pipeline)


def test_next_after_a_stop_mid_pass_is_an_error() -> None:
    pipeline = _endless_pipeline()
    next(pipeline)
    pipeline.stop()
    with pytest.raises(PipelineStoppedError, match="stopped"):
        next(pipeline)


def test_items_waiting_in_the_sink_are_not_handed_out_after_a_stop() -> None:
    pipeline = PipelineBuilder().add_source(range(100)).add_sink(2).build()
    next(pipeline)
    waited = 0
    while pipeline.stats().stages[-1].queue_length == 0 and waited < 3000:  # the sink refills
        time.sleep(0.01)
        waited += 1
    assert pipeline.stats().stages[-1].queue_length > 0
    pipeline.stop()
    with pytest.raises(PipelineStoppedError, match="stopped"):
        next(pipeline)


def test_stop_before_start_never_starts() -> None:
    pipeline = _endless_pipeline()
    pipeline.stop()
    assert pipeline.threads() == []
    with pytest.raises(PipelineStoppedError):
        pipeline.start()


def test_stop_from_another_thread_wakes_the_consumer(caplog: pytest.LogCaptureFixture) -> None:
    release, entered = threading.Event(), threading.Event()

    def stuck(item: int) -> None:
        entered.set()
        release.wait(30)

    pipeline = PipelineBuilder().add_source(range(3)).pipe(stuck).add_sink(2).build()
    pipeline.start()

    def stop_once_stuck() -> None:  # an event, not a guess at how long starting takes
        entered.wait(30)
        pipeline.stop(timeout=0.2)

    stopper = threading.Thread(target=stop_once_stuck)
    stopper.start()
    with pytest.raises(PipelineStoppedError):
        pipeline.get()
    stopper.join()
    # An op stuck in user code cannot be interrupted: stop() says so and leaves its thread to
    # end with the op.
    assert "still inside an op" in caplog.text
    release.set()
    for thread in pipeline.threads():
        thread.join(5)
    assert not _alive(pipeline)


def test_get_timeout() -> None:
    pipeline = PipelineBuilder().add_source(range(3)).pipe(lambda x: time.sleep(5)).add_sink(2).build()
    with pipeline.auto_stop(), pytest.raises(TimeoutError):
        pipeline.get(timeout=0.1)


def test_keyboard_interrupt_while_iterating_stops_the_threads() -> None:
    entered = threading.Event()

    def slow(item: int) -> None:
        entered.set()
        time.sleep(0.5)

    pipeline = PipelineBuilder().add_source(range(1000)).pipe(slow, concurrency=2).add_sink(2).build()

    def interrupt_once_running() -> None:
        entered.wait(30)
        _thread.interrupt_main()

    timer = threading.Thread(target=interrupt_once_running)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in pipeline:  # blocked waiting for the first item when the interrupt lands
            pass
    timer.join()
    assert not _alive(pipeline)


def test_abandoned_pipeline_is_stopped_when_collected() -> None:
    pipeline = _endless_pipeline()
    next(pipeline)
    threads = pipeline.threads()
    assert any(thread.is_alive() for thread in threads)
    del pipeline
    gc.collect()
    for thread in threads:
        thread.join(5)
    assert not any(thread.is_alive() for thread in threads)


def _run_script(body: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(body)
    # The timeout only guards against a hang; the script ends in well under a second.
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_interpreter_exits_with_an_abandoned_running_pipeline() -> None:
    result = _run_script(
        """
        import time
        from stoker.pipeline import PipelineBuilder
        def stuck(item):
            time.sleep(3600)
        pipeline = PipelineBuilder().add_source(range(100)).pipe(stuck, concurrency=4).add_sink(2).build()
        pipeline.start()
        time.sleep(0.2)
        print("leaving")
        """
    )
    assert result.returncode == 0, result.stderr
    assert "leaving" in result.stdout


def test_keyboard_interrupt_in_a_real_process_exits_cleanly() -> None:
    result = _run_script(
        """
        import os, signal, threading, time
        from stoker.pipeline import PipelineBuilder
        running = threading.Event()
        def slow(item):
            running.set()
            time.sleep(0.05)
            return item
        pipeline = PipelineBuilder().add_source(range(10**9)).pipe(slow, concurrency=4).add_sink(2).build()
        def interrupt():
            running.wait(30)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=interrupt, daemon=True).start()
        try:
            for item in pipeline:
                pass
        except KeyboardInterrupt:
            alive = [t.name for t in pipeline.threads() if t.is_alive()]
            print("interrupted, alive:", alive)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "interrupted, alive: []" in result.stdout
