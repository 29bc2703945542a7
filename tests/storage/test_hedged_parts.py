"""A stalled request is sent again and the first answer wins; a failure waits for the other copy."""

from __future__ import annotations

import asyncio

import pytest

from stoker.storage._block_reads import PartLatency, first_of_two


def test_a_stalled_request_is_sent_again_and_the_slow_copy_cancelled() -> None:
    calls: list[str] = []
    cancelled: list[int] = []

    async def make() -> str:
        number = len(calls)
        calls.append("call")
        try:
            await asyncio.sleep(5.0 if number == 0 else 0.01)
        except asyncio.CancelledError:
            cancelled.append(number)
            raise
        return f"copy {number}"

    latency = PartLatency()
    assert asyncio.run(first_of_two(make, 0.05, latency)) == "copy 1"
    assert len(calls) == 2 and cancelled == [0]


def test_a_prompt_answer_sends_no_copy_and_a_failed_copy_waits_for_the_other() -> None:
    calls: list[int] = []

    async def prompt() -> int:
        calls.append(1)
        return 7

    assert asyncio.run(first_of_two(prompt, 1.0)) == 7 and calls == [1]

    async def flaky() -> int:
        number = len(calls)
        calls.append(number)
        await asyncio.sleep(0.2 if number == 1 else 0.02)  # the copy fails first
        if number == 2:
            raise ConnectionError("reset")
        return number

    calls.clear()
    calls.append(0)  # numbering: the first copy is 1 (slow, good), the second 2 (fails)
    assert asyncio.run(first_of_two(flaky, 0.01)) == 1

    async def broken() -> int:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        asyncio.run(first_of_two(broken, 0.01))
