"""One verdict per run, from recorded stats: each verdict of the diagnosis on stats recorded
the way real runs produced them (including the runs that once contradicted themselves), plus the
facts a real `run_loader` reports. No timing threshold: the numbers are given, not measured."""

from __future__ import annotations

import pytest

from stoker import _interpreter
from stoker.bench import run_loader
from stoker.observe import DataWaitMeter, DataWaitReport, diagnose
from stoker.pipeline import PipelineStats, StageStats, TaskTimeSummary
from stoker.storage import MemoryStorage

ELAPSED = 20.0


def stage(name: str, *, kind: str = "pipe", concurrency: int, busy: float, cpu_share: float | None, mean_ms: float = 10.0,
          wait_in: float = 0.0, wait_out: float = 0.0) -> StageStats:  # fmt: skip
    """A stage as a 20 s run recorded it: ``busy`` slots on average, ``cpu_share`` of its task
    time on the CPU (None: an async stage, not measured), waits as shares of the run."""
    count = int(busy * ELAPSED / (mean_ms / 1e3))
    total = count * mean_ms / 1e3
    summary = TaskTimeSummary(
        count=count, mean=mean_ms / 1e3, p50=mean_ms / 1e3, p90=mean_ms / 1e3, p99=mean_ms / 1e3, maximum=mean_ms / 1e3, total=total
    )
    return StageStats(
        name=name, kind=kind, concurrency=concurrency, items_in=count, items_out=count, failures=0, task_time=summary,
        task_cpu_seconds=0.0 if cpu_share is None else cpu_share * total, busy_tasks_mean=busy,
        wait_input_seconds=wait_in * ELAPSED, wait_output_seconds=wait_out * ELAPSED, queue_capacity=8, queue_length=0,
        queue_length_mean=1.0, elapsed_seconds=ELAPSED,
    )  # fmt: skip


def loader_stats(fetch: StageStats, decode: StageStats, *, consumer_wait: float = 0.5) -> PipelineStats:
    return PipelineStats(stages=[fetch, decode], elapsed_seconds=ELAPSED, consumer_wait_seconds=consumer_wait * ELAPSED, items_consumed=100)


def meter(wait: float, steps: int = 100) -> DataWaitReport:
    return DataWaitReport(steps=steps, wait_seconds=wait * ELAPSED, compute_seconds=(1 - wait) * ELAPSED)


def test_a_loop_that_hardly_waits_is_compute_bound() -> None:
    stats = loader_stats(stage("fetch", concurrency=4, busy=1.0, cpu_share=0.1), stage("decode", concurrency=2, busy=0.6, cpu_share=0.95))
    verdict = diagnose(stats, cpu_fraction=0.3, cores=2, meter=meter(0.02))
    assert (verdict.bottleneck, verdict.kind) == ("training loop", "compute")
    assert "model side" in verdict.message


def test_without_a_training_step_the_loop_is_never_the_bottleneck() -> None:
    # Once: plain `stoker bench` (no step) said "compute-bound ... the model side" in one run.
    stats = loader_stats(stage("fetch", concurrency=4, busy=0.5, cpu_share=0.1), stage("decode", concurrency=4, busy=3.9, cpu_share=0.97))
    for report in (meter(0.0, steps=1), meter(0.02), meter(0.97)):
        verdict = diagnose(stats, cpu_fraction=0.99, cores=2, meter=report, training_step=False)
        assert verdict.bottleneck == "decode" and verdict.kind == "cpu", verdict.message
        assert "model side" not in verdict.message and "training loop waits" not in verdict.message


def test_a_computing_stage_on_saturated_cores_is_cpu_bound_and_concurrency_will_not_help() -> None:
    stats = loader_stats(
        stage("fetch", concurrency=4, busy=0.3, cpu_share=0.1), stage("decode", concurrency=2, busy=1.95, cpu_share=0.95, wait_in=0.0)
    )
    verdict = diagnose(stats, cpu_fraction=0.97, cores=2, meter=meter(0.6))
    assert (verdict.bottleneck, verdict.kind) == ("decode", "cpu")
    assert "More concurrency will not help" in verdict.message and "95% of their time on the CPU" in verdict.message


def test_a_computing_stage_with_free_cores_is_told_to_use_them() -> None:
    stats = loader_stats(stage("fetch", concurrency=4, busy=0.3, cpu_share=0.1), stage("decode", concurrency=1, busy=0.99, cpu_share=0.96))
    verdict = diagnose(stats, cpu_fraction=0.5, cores=4, meter=meter(0.7))
    assert (verdict.bottleneck, verdict.kind) == ("decode", "cpu")
    assert "cores to spare" in verdict.message and "Raise decode concurrency to 4" in verdict.message
    assert "will not help" not in verdict.message


def test_a_stage_that_waits_with_its_slots_full_is_latency_bound() -> None:
    # Once: "decode is CPU-bound: its tasks compute 36% of the time they run". A third of the
    # time on the CPU is mostly waiting.
    stats = loader_stats(stage("fetch", concurrency=4, busy=0.5, cpu_share=0.1), stage("decode", concurrency=2, busy=1.9, cpu_share=0.36))
    verdict = diagnose(stats, cpu_fraction=0.3, cores=2, meter=meter(0.8))
    assert (verdict.bottleneck, verdict.kind) == ("decode", "latency"), verdict.message
    assert "raise decode concurrency (try 4)" in verdict.message and "CPU-bound" not in verdict.message


# Python code in threads with a GIL, as a 2-core run records it: 4 slots busy, each task on the CPU
# a quarter of its time (the rest waiting for the GIL), the process using half of 2 cores.
PYTHON_TAKING_TURNS = {"concurrency": 4, "busy": 3.9, "cpu_share": 0.25}


def test_with_a_gil_python_threads_taking_turns_are_said_to_be_held_by_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Once: "transform is latency-bound ... raise transform concurrency (try 8)": more threads,
    # more turns on the same core.
    monkeypatch.setattr(_interpreter, "gil_enabled", lambda: True)
    stats = loader_stats(stage("fetch", concurrency=4, busy=0.3, cpu_share=0.1), stage("transform", **PYTHON_TAKING_TURNS))
    verdict = diagnose(stats, cpu_fraction=0.5, cores=2, meter=meter(0.6))
    assert (verdict.bottleneck, verdict.kind) == ("transform", "gil"), verdict.message
    assert "transform is held by the GIL" in verdict.message and "keep only 1.0 core busy" in verdict.message
    assert "More concurrency will not help" in verdict.message and "free-threaded Python" in verdict.message
    assert "raise transform concurrency" not in verdict.message


def test_on_a_free_threaded_build_the_diagnosis_names_no_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    # No GIL to take turns on: threads on the CPU a quarter of their time wait on something else.
    monkeypatch.setattr(_interpreter, "gil_enabled", lambda: False)
    stats = loader_stats(stage("fetch", concurrency=4, busy=0.3, cpu_share=0.1), stage("transform", **PYTHON_TAKING_TURNS))
    verdict = diagnose(stats, cpu_fraction=0.5, cores=2, meter=meter(0.6))
    assert (verdict.bottleneck, verdict.kind) == ("transform", "latency"), verdict.message
    assert "GIL" not in verdict.message and "raise transform concurrency (try 8)" in verdict.message


def test_with_a_gil_native_work_on_several_cores_is_not_blamed_on_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_interpreter, "gil_enabled", lambda: True)
    stats = loader_stats(stage("fetch", concurrency=4, busy=0.3, cpu_share=0.1), stage("decode", concurrency=4, busy=3.9, cpu_share=0.95))
    verdict = diagnose(stats, cpu_fraction=0.97, cores=4, meter=meter(0.6))
    assert verdict.kind == "cpu" and "GIL" not in verdict.message, verdict.message


def test_a_slow_source_is_latency_bound_and_told_to_read_further_ahead() -> None:
    stats = loader_stats(
        stage("fetch", kind="source", concurrency=1, busy=0.98, cpu_share=None, mean_ms=80),
        stage("decode", concurrency=2, busy=0.2, cpu_share=0.9, wait_in=0.9),
    )
    verdict = diagnose(stats, cpu_fraction=0.1, cores=2, meter=meter(0.9))
    assert (verdict.bottleneck, verdict.kind) == ("fetch", "latency")
    assert "read further ahead" in verdict.message and "decode waits for its output" in verdict.message


def test_no_stage_near_its_capacity_is_starved() -> None:
    stats = loader_stats(stage("fetch", concurrency=8, busy=2.0, cpu_share=0.05), stage("decode", concurrency=4, busy=1.5, cpu_share=0.3))
    verdict = diagnose(stats, cpu_fraction=0.2, cores=2, meter=meter(0.5))
    assert verdict.kind == "starved" and verdict.bottleneck == "decode"


def test_storage_and_bad_samples_are_said_in_plain_words() -> None:
    stats = loader_stats(stage("fetch", concurrency=4, busy=3.9, cpu_share=0.05), stage("decode", concurrency=2, busy=0.5, cpu_share=0.9))
    stats = PipelineStats(
        stats.stages, stats.elapsed_seconds, stats.consumer_wait_seconds, stats.items_consumed, sample_failures={"decode: replaced": 3}
    )
    verdict = diagnose(stats, cpu_fraction=0.2, cores=2, meter=meter(0.5), storage_facts={"bytes_read": 303e6, "bytes_delivered": 3748e6})
    assert "read 303 MB from storage to deliver 3,748 MB of decoded batches" in verdict.message
    assert "Bad samples: 3 (decode: replaced 3)" in verdict.message


@pytest.mark.parametrize("wait", [0.0, 0.05, 0.5, 1.0])
def test_one_verdict_whatever_the_wait(wait: float) -> None:
    stats = loader_stats(stage("fetch", concurrency=4, busy=0.5, cpu_share=0.1), stage("decode", concurrency=2, busy=1.9, cpu_share=0.9))
    verdict = diagnose(stats, cpu_fraction=0.95, cores=2, meter=meter(wait))
    expected = ("training loop", "compute") if wait < 0.1 else ("decode", "cpu")
    assert (verdict.bottleneck, verdict.kind) == expected


def test_the_meter_prints_its_verdict_when_the_loop_ends(capsys: pytest.CaptureFixture[str]) -> None:
    for _ in DataWaitMeter(range(5)):
        pass
    assert capsys.readouterr().err.startswith("data wait: ")
    for _ in DataWaitMeter(range(5), verbose=False):
        pass
    assert capsys.readouterr().err == ""
    for index in DataWaitMeter(range(100)):
        if index == 3:
            break
    assert "data wait:" in capsys.readouterr().err


def test_run_loader_reports_storage_facts() -> None:
    from stoker.bench import image_folder
    from stoker.storage import FileStorage

    result = run_loader(FileStorage(image_folder(64)), duration=1.0, progress=False)
    assert result.images >= 32 and result.first_batch_seconds > 0
    assert result.diagnosis["facts"]["bytes_read"] > 0
    assert result.stats["timeline"], "the timeline spans the run"


def test_bad_samples_reach_the_diagnosis() -> None:
    from stoker_testbed.data.images import jpeg

    samples = {f"k{index}": jpeg(40, 30, seed=index) for index in range(40)}
    samples["k7"] = b"not an image"
    result = run_loader(MemoryStorage(samples), duration=0.5, progress=False)
    assert result.diagnosis["facts"]["sample_failures"] == {"decode: replaced": result.stats["sample_failures"]["decode: replaced"]}
    assert "Bad samples:" in result.diagnosis["message"] and "loader.failures" in result.diagnosis["message"]


def test_windowed_rates_smooth_a_steady_stream() -> None:
    from stoker.observe._report import windowed_rate

    times = [index * 0.1 for index in range(51)]  # a batch of 32 every 100 ms, for 5 s
    totals = [32 * index for index in range(51)]
    out_times, rates = windowed_rate(times, totals)
    assert out_times[0] >= 1.0 and out_times[-1] == times[-1]
    assert all(abs(rate - 320) < 1e-6 for rate in rates), "no spikes from batch granularity"
