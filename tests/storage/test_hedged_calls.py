"""`HedgedCalls`: a call that outlasts the patience is sent once more and the first answer is
used; the loser runs on; copies stay within the budget; errors only when every copy failed."""

from __future__ import annotations

import asyncio

import pytest

from stoker.storage.policies._hedged import HedgedCalls


def test_a_slow_call_is_sent_again_and_the_first_answer_wins() -> None:
    finished: list[str] = []

    async def main() -> None:
        hedged = HedgedCalls(first_patience=0.05)

        async def fetch(copy: int) -> str:
            name = f"copy {copy}"
            await asyncio.sleep(1.0 if copy == 0 else 0.01)  # the first lands on a slow connection
            finished.append(name)
            return name

        assert await hedged.call(fetch) == "copy 1"
        assert (hedged.copies, hedged.copies_won) == (1, 1)
        await asyncio.sleep(1.1)
        assert finished == ["copy 1", "copy 0"], "the loser was left to finish, not cut off"

    asyncio.run(main())


def test_a_call_within_the_patience_is_never_copied() -> None:
    async def main() -> None:
        hedged = HedgedCalls(first_patience=0.5)

        async def fetch(copy: int) -> int:
            await asyncio.sleep(0.001)
            return 7

        assert [await hedged.call(fetch) for _ in range(20)] == [7] * 20
        assert hedged.copies == 0
        assert hedged.patience() < 0.5, "the patience follows the calls' own times once there are some"

    asyncio.run(main())


def test_copies_stay_within_the_budget() -> None:
    async def main() -> HedgedCalls:
        hedged = HedgedCalls(budget=0.1, spare=2, first_patience=0.001, least_patience=0.001)

        async def fetch(copy: int) -> None:
            await asyncio.sleep(0.01)  # every call outlasts the patience

        await asyncio.gather(*(hedged.call(fetch) for _ in range(50)))
        return hedged

    hedged = asyncio.run(main())
    assert 0 < hedged.copies <= 0.1 * 50 + 2


def test_an_error_is_raised_only_when_every_copy_failed() -> None:
    async def main() -> None:
        hedged = HedgedCalls(first_patience=0.01)

        async def first_fails_slowly(copy: int) -> str:
            if copy == 0:
                await asyncio.sleep(0.05)
                raise ConnectionError("slow, then reset")
            await asyncio.sleep(0.2)
            return "second"

        assert await hedged.call(first_fails_slowly) == "second", "a failed copy waits for the other"

        async def always_fails(copy: int) -> str:
            await asyncio.sleep(0.05)
            raise ConnectionError("down")

        with pytest.raises(ConnectionError, match="down"):
            await hedged.call(always_fails)

    asyncio.run(main())
