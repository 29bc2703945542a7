"""Stats on pipelines with known sleeps: counts, task times, and who waits on whom."""

from __future__ import annotations

import json
import logging
import time

import pytest

from stoker.pipeline import PipelineBuilder


def _sleep_10ms(item: int) -> int:
    time.sleep(0.01)
    return item


def _fast(item: int) -> int:
    return item


def test_counts_and_task_times() -> None:
    pipeline = PipelineBuilder().add_source(range(40)).pipe(_sleep_10ms, concurrency=4).pipe(_fast).add_sink(2).build()
    assert sorted(pipeline) == list(range(40))
    stats = pipeline.stats()
    source, slow, fast = stats.stages
    assert (source.items_out, slow.items_in, slow.items_out, fast.items_out) == (40, 40, 40, 40)
    assert stats.items_consumed == 40
    # time.sleep(0.01) never returns early; the histogram's buckets are 5% wide.
    assert slow.task_time.count == 40
    assert slow.task_time.mean >= 0.01
    assert 0.0095 <= slow.task_time.p50 and slow.task_time.p50 <= slow.task_time.p90 <= slow.task_time.p99 <= slow.task_time.maximum
    assert fast.task_time.mean < slow.task_time.mean
    # The slow stage starves the fast one: the fast one waits on its input, not its output.
    assert fast.wait_input_seconds > fast.wait_output_seconds
    assert slow.busy_tasks_mean > fast.busy_tasks_mean


def test_slow_consumer_shows_as_stages_waiting_on_output() -> None:
    pipeline = PipelineBuilder().add_source(range(30)).pipe(_fast, concurrency=2).add_sink(2).build()
    with pipeline.auto_stop():
        for _ in range(30):
            pipeline.get()
            time.sleep(0.01)
    stage = pipeline.stats().stages[1]
    assert stage.wait_output_seconds > stage.wait_input_seconds
    assert stage.queue_length_mean > 1.0  # the sink stays nearly full
    assert stage.queue_length_mean <= stage.queue_capacity, "a queue's mean never exceeds what it can hold"


def test_stats_are_plain_data_and_a_table() -> None:
    pipeline = PipelineBuilder().add_source(range(10)).pipe(_sleep_10ms, concurrency=2).aggregate(5).add_sink(2).build(stats_interval=0.01)
    assert len(list(pipeline)) == 2
    stats = pipeline.stats()
    data = json.loads(json.dumps(stats.as_dict()))
    assert [stage["name"] for stage in data["stages"]] == ["source", "_sleep_10ms", "aggregate_5"]
    assert data["timeline"], "the timeline is sampled while the pipeline runs"
    assert len(data["timeline"][-1]["items_out"]) == 3
    table = stats.format_table()
    assert "_sleep_10ms" in table and "aggregate_5" in table


def test_stats_can_be_logged_periodically(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="stoker.pipeline")
    pipeline = PipelineBuilder().add_source(range(30)).pipe(_sleep_10ms).add_sink(2).build(stats_interval=0.02, report_stats_interval=0.05)
    assert len(list(pipeline)) == 30
    assert sum("wait out" in record.getMessage() for record in caplog.records) >= 1
