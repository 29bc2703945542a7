"""Output order: completion order by default, input order on request, and no item lost."""

from __future__ import annotations

import random
import time

import pytest

from stoker.pipeline import PipelineBuilder


def _jittery(item: int) -> int:
    time.sleep(random.Random(item).uniform(0, 0.003))
    return item


def test_input_order_is_kept_with_concurrency() -> None:
    pipeline = PipelineBuilder().add_source(range(500)).pipe(_jittery, concurrency=8, output_order="input").add_sink(3).build()
    assert list(pipeline) == list(range(500))


def test_completion_order_delivers_every_item_once_and_reorders() -> None:
    def slow_first(item: int) -> int:
        if item == 0:
            time.sleep(0.2)
        return item

    pipeline = PipelineBuilder().add_source(range(50)).pipe(slow_first, concurrency=4).add_sink(3).build()
    result = list(pipeline)
    assert sorted(result) == list(range(50))
    assert result[0] != 0, "a slow first item must not hold back the others in completion order"


def test_input_order_holds_back_items_behind_a_slow_one() -> None:
    def slow_first(item: int) -> int:
        if item == 0:
            time.sleep(0.1)
        return item

    pipeline = PipelineBuilder().add_source(range(50)).pipe(slow_first, concurrency=4, output_order="input").add_sink(3).build()
    assert list(pipeline) == list(range(50))


@pytest.mark.parametrize("order", ["input", "completion"])
def test_generator_op_in_both_orders(order: str) -> None:
    def expand(item: int):
        for part in range(item % 4):
            time.sleep(random.Random(item * 10 + part).uniform(0, 0.002))
            yield (item, part)

    pipeline = PipelineBuilder().add_source(range(200)).pipe(expand, concurrency=6, output_order=order).add_sink(2).build()
    result = list(pipeline)
    expected = [(item, part) for item in range(200) for part in range(item % 4)]
    if order == "input":
        assert result == expected
    else:
        assert sorted(result) == expected


def test_multi_stage_pipeline_with_aggregate_and_disaggregate() -> None:
    pipeline = (
        PipelineBuilder()
        .add_source(range(103))
        .pipe(_jittery, concurrency=4, output_order="input")
        .aggregate(10)
        .pipe(lambda batch: [x * 2 for x in batch], output_order="input")
        .disaggregate()
        .aggregate(7, drop_last=True)
        .add_sink(2)
        .build()
    )
    batches = list(pipeline)
    assert batches == [[x * 2 for x in range(start, start + 7)] for start in range(0, 98, 7)]


def test_aggregate_keeps_the_short_last_batch_unless_asked() -> None:
    keep = PipelineBuilder().add_source(range(7)).aggregate(3).add_sink(1).build()
    assert list(keep) == [[0, 1, 2], [3, 4, 5], [6]]
    drop = PipelineBuilder().add_source(range(7)).aggregate(3, drop_last=True).add_sink(1).build()
    assert list(drop) == [[0, 1, 2], [3, 4, 5]]


def test_empty_source() -> None:
    assert list(PipelineBuilder().add_source([]).pipe(_jittery, concurrency=3).aggregate(2).add_sink(1).build()) == []
