"""A running pipeline's concurrency set from many threads at once to hostile values: each
value that is not a whole number of at least 1 is refused with an error naming the stage,
the rest are taken, and every item still comes out once."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from stoker.errors import ConfigurationError
from stoker.pipeline import PipelineBuilder

pytestmark = pytest.mark.usefixtures("switch_often")

ITEMS = 3_000
SETTERS = 6
# (value, taken): True equals 1, so the two are told apart here, not by `in`.
VALUES = ((0, False), (-1, False), (2.5, False), (True, False), (None, False), ("x", False), (1, True), (3, True), (64, True))


def work(item: int) -> int:
    total = 0
    for number in range(50):  # Python work: a switch is possible at every turn
        total += number
    return item


def test_hostile_concurrency_from_many_threads_is_refused_by_name_and_no_item_is_lost() -> None:
    # Once: 2.5 and True were taken (a float capacity in the stage's output queue), and None or
    # "x" raised a bare TypeError ("'<' not supported between instances of 'str' and 'int'").
    pipeline = PipelineBuilder().add_source(range(ITEMS)).pipe(work, concurrency=4, name="work").add_sink(4).build(num_threads=4)
    stop = threading.Event()
    wrong: list[str] = []

    def set_all() -> None:
        while not stop.is_set():
            for value, taken in VALUES:
                try:
                    pipeline.set_concurrency("work", value)  # type: ignore[arg-type]
                except ConfigurationError as error:
                    if taken or "'work'" not in str(error):
                        wrong.append(f"{value!r} refused: {error}")
                except BaseException as error:  # noqa: BLE001 - any other error is the finding
                    wrong.append(f"{value!r}: {type(error).__name__}: {error}")
                else:
                    if not taken:
                        wrong.append(f"{value!r} taken")

    setters = [threading.Thread(target=set_all) for _ in range(SETTERS)]
    out: list[Any] = []
    with pipeline.auto_stop():
        for setter in setters:
            setter.start()
        try:
            out.extend(pipeline)
        finally:
            stop.set()
            for setter in setters:
                setter.join(30)
    assert sorted(out) == list(range(ITEMS)), "every item once"
    assert not wrong, sorted(set(wrong))[:6]
