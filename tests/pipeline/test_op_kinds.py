"""Every kind of op: function, async function, generator, async generator, callable, process."""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import pytest

from stoker.pipeline import PipelineBuilder


def _square(item: int) -> int:
    return item * item


def _pid_and_square(item: int) -> tuple[int, int]:
    return os.getpid(), item * item


def _fail_on_three(item: int) -> int:
    if item == 3:
        raise ValueError(f"three is bad: {item}")
    return item


async def _async_square(item: int) -> int:
    await asyncio.sleep(0.001)
    return item * item


async def _async_repeat(item: int):
    for _ in range(item % 3):
        await asyncio.sleep(0)
        yield item


class _Multiplier:
    def __init__(self, factor: int) -> None:
        self.factor = factor

    def __call__(self, item: int) -> int:
        return item * self.factor


class _AsyncMultiplier:
    async def __call__(self, item: int) -> int:
        await asyncio.sleep(0)
        return item * 3


def _run(builder: PipelineBuilder) -> list:
    return sorted(builder.add_sink(3).build())


def test_async_function() -> None:
    assert _run(PipelineBuilder().add_source(range(30)).pipe(_async_square, concurrency=8)) == [x * x for x in range(30)]


def test_async_generator() -> None:
    expected = sorted(x for x in range(30) for _ in range(x % 3))
    assert _run(PipelineBuilder().add_source(range(30)).pipe(_async_repeat, concurrency=4)) == expected


def test_async_generator_in_input_order() -> None:
    pipeline = PipelineBuilder().add_source(range(30)).pipe(_async_repeat, concurrency=4, output_order="input").add_sink(2).build()
    assert list(pipeline) == [x for x in range(30) for _ in range(x % 3)]


def test_callable_objects_and_partials() -> None:
    assert _run(PipelineBuilder().add_source(range(5)).pipe(_Multiplier(2))) == [0, 2, 4, 6, 8]
    assert _run(PipelineBuilder().add_source(range(5)).pipe(_AsyncMultiplier())) == [0, 3, 6, 9, 12]
    assert _run(PipelineBuilder().add_source(range(5)).pipe(functools.partial(pow, exp=2))) == [0, 1, 4, 9, 16]


def test_async_source() -> None:
    async def numbers():
        for number in range(20):
            await asyncio.sleep(0)
            yield number

    assert _run(PipelineBuilder().add_source(numbers()).pipe(_square, concurrency=2)) == [x * x for x in range(20)]


def test_process_stage_runs_in_other_processes() -> None:
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver")) as executor:
        pipeline = (
            PipelineBuilder()
            .add_source(range(40))
            .pipe(_pid_and_square, concurrency=4, executor=executor, output_order="input")
            .add_sink(3)
            .build()
        )
        results = list(pipeline)
    assert [square for _, square in results] == [x * x for x in range(40)]
    assert os.getpid() not in {pid for pid, _ in results}


def test_process_stage_errors_come_back() -> None:
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver")) as executor:
        pipeline = PipelineBuilder().add_source(range(6)).pipe(_fail_on_three, concurrency=2, executor=executor).add_sink(3).build()
        assert sorted(pipeline) == [0, 1, 2, 4, 5]
        record = pipeline.stats().stages[1]
    assert record.failures == 1


def test_generator_ops_are_refused_with_an_executor() -> None:
    def gen(item: int):
        yield item

    with (
        ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")) as executor,
        pytest.raises(ValueError, match="generator"),
    ):
        PipelineBuilder().add_source(range(3)).pipe(gen, executor=executor)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda b: b.pipe(_square, concurrency=0), ValueError),
        (lambda b: b.pipe(_square, output_order="random"), ValueError),
        (lambda b: b.pipe(42), TypeError),
        (lambda b: b.pipe(_square, max_failures=-1), ValueError),
        (lambda b: b.aggregate(0), ValueError),
        (lambda b: b.add_sink(0), ValueError),
        (lambda b: b.add_source(range(3)), ValueError),
    ],
)
def test_bad_arguments_are_refused(call, error) -> None:
    with pytest.raises(error):
        call(PipelineBuilder().add_source(range(3)))


def test_source_must_come_first_and_be_iterable() -> None:
    with pytest.raises(ValueError, match="add_source"):
        PipelineBuilder().pipe(_square)
    with pytest.raises(TypeError, match="iterable"):
        PipelineBuilder().add_source(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="after add_sink"):
        PipelineBuilder().add_source(range(3)).add_sink(2).pipe(_square)


def test_stage_names_are_unique() -> None:
    pipeline = PipelineBuilder().add_source(range(3)).pipe(_square).pipe(_square).add_sink(1).build()
    assert [stage.name for stage in pipeline.stats().stages] == ["source", "_square", "_square_1"]
    pipeline.stop()
