"""Failures: logged with traceback and item, counted, dropped; a budget; a failing source."""

from __future__ import annotations

import logging

import pytest

from stoker.pipeline import AbortPipeline, PipelineBuilder, PipelineFailureError


def _reject_multiples_of_ten(item: int) -> int:
    if item % 10 == 0:
        raise ValueError(f"cannot take {item}")
    return item


def test_failed_items_are_dropped_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="stoker.pipeline")
    pipeline = PipelineBuilder().add_source(range(100)).pipe(_reject_multiples_of_ten, concurrency=4).add_sink(3).build()
    assert sorted(pipeline) == [x for x in range(100) if x % 10]
    stage = pipeline.stats().stages[1]
    assert stage.failures == 10
    assert stage.items_in == 100 and stage.items_out == 90
    logged = [record for record in caplog.records if "cannot take" in record.getMessage()]
    assert len(logged) == 10
    # The full traceback is logged, pointing at the line that raised.
    assert all(record.exc_info is not None for record in logged)
    text = caplog.text
    assert "_reject_multiples_of_ten" in text and "raise ValueError" in text
    # The item is named: its position and its repr.
    assert "item #" in logged[0].getMessage() and "'_reject_multiples_of_ten'" in logged[0].getMessage()


def test_max_failures_stops_the_pipeline_with_one_clear_error() -> None:
    pipeline = (
        PipelineBuilder()
        .add_source(range(1000))
        .pipe(_reject_multiples_of_ten, concurrency=2, max_failures=3, output_order="input")
        .add_sink(3)
        .build()
    )
    received = []
    with pytest.raises(PipelineFailureError) as caught:
        for item in pipeline:
            received.append(item)
    error = caught.value
    assert error.stage == "_reject_multiples_of_ten"
    assert error.failure_count == 4 and len(error.failures) == 4
    assert "max_failures=3" in str(error)
    assert "cannot take 0" in str(error) and "cannot take 30" in str(error)
    assert "raise ValueError" in error.failures[0].traceback
    assert len(received) < 1000
    assert pipeline.threads() == [] or not any(thread.is_alive() for thread in pipeline.threads())


def test_zero_failure_budget_stops_at_the_first_failure() -> None:
    pipeline = PipelineBuilder().add_source([1, 2, 10, 3]).pipe(_reject_multiples_of_ten, max_failures=0).add_sink(1).build()
    with pytest.raises(PipelineFailureError, match="cannot take 10"):
        list(pipeline)


def test_failing_source_delivers_what_it_read_then_raises_its_error() -> None:
    def broken_source():
        yield from range(5)
        raise OSError("disk went away at item 5")

    pipeline = PipelineBuilder().add_source(broken_source()).pipe(lambda x: x, concurrency=2).add_sink(3).build()
    received = []
    with pytest.raises(OSError, match="disk went away"):
        for item in pipeline:
            received.append(item)
    assert sorted(received) == list(range(5))


def test_failing_generator_keeps_what_it_yielded() -> None:
    def partial(item: int):
        yield item
        if item == 2:
            raise RuntimeError("broke mid-way")
        yield item + 100

    pipeline = PipelineBuilder().add_source(range(4)).pipe(partial, output_order="input").add_sink(2).build()
    assert list(pipeline) == [0, 100, 1, 101, 2, 3, 103]
    assert pipeline.stats().stages[1].failures == 1


def test_disaggregate_of_a_non_iterable_is_a_failure() -> None:
    pipeline = PipelineBuilder().add_source([[1, 2], 3, [4]]).disaggregate().add_sink(2).build()
    assert list(pipeline) == [1, 2, 4]
    assert pipeline.stats().stages[1].failures == 1


def test_an_exception_in_user_repr_does_not_hide_the_failure(caplog: pytest.LogCaptureFixture) -> None:
    class BadRepr:
        def __repr__(self) -> str:
            raise RuntimeError("repr broke")

    def reject(item: object) -> object:
        raise ValueError("rejected")

    pipeline = PipelineBuilder().add_source([BadRepr()]).pipe(reject).add_sink(1).build()
    assert list(pipeline) == []
    assert "failing repr" in caplog.text and "rejected" in caplog.text


class _Verdict(Exception):
    pass


def _abort_at_twenty(item: int) -> int:
    if item == 20:
        raise AbortPipeline(_Verdict("the run cannot go on"))
    return item


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_op_can_abort_the_run_with_its_error(caplog: pytest.LogCaptureFixture, asynchronous: bool) -> None:
    caplog.set_level(logging.ERROR, logger="stoker.pipeline")

    async def async_op(item: int) -> int:
        return _abort_at_twenty(item)

    op = async_op if asynchronous else _abort_at_twenty
    pipeline = PipelineBuilder().add_source(range(1000)).pipe(op, concurrency=2, max_failures=None).add_sink(2).build()
    taken = []
    with pytest.raises(_Verdict, match="cannot go on"):
        for item in pipeline:
            taken.append(item)
    assert 20 not in taken and len(taken) < 1000
    assert pipeline.stats().stages[1].failures == 0  # a verdict, not a failed item
    assert not [record for record in caplog.records if "cannot go on" in record.getMessage()]


def test_a_source_can_abort_the_run() -> None:
    def source():  # type: ignore[no-untyped-def]
        yield from range(5)
        raise AbortPipeline(_Verdict("storage is gone"))

    pipeline = PipelineBuilder().add_source(source()).add_sink(10).build()
    with pytest.raises(_Verdict, match="storage is gone"):
        list(pipeline)
