"""The profiler measures each stage alone at several concurrency values."""

from __future__ import annotations

import time

import pytest

from stoker.pipeline import PipelineBuilder, profile_pipeline


def _sleep_2ms(item: int) -> int:
    time.sleep(0.002)
    return item


def _double(batch: list[int]) -> list[int]:
    return [x * 2 for x in batch]


def test_profile_reports_every_pipe_stage() -> None:
    builder = PipelineBuilder().add_source(range(10_000)).pipe(_sleep_2ms).aggregate(4).pipe(_double).add_sink(2)
    results = profile_pipeline(builder, num_items=64, concurrencies=[1, 8])
    assert [result.stage for result in results] == ["_sleep_2ms", "_double"]
    sleeper = results[0]
    assert set(sleeper.items_per_second) == {1, 8}
    # Eight sleeping ops at once move more items than one; sleeping is not CPU-bound.
    assert sleeper.items_per_second[8] > sleeper.items_per_second[1]
    assert sleeper.best_concurrency == 8
    assert "items/s" in sleeper.format()


def test_profile_refuses_empty_concurrencies() -> None:
    with pytest.raises(ValueError):
        profile_pipeline(PipelineBuilder().add_source(range(3)).pipe(_sleep_2ms), concurrencies=[])
