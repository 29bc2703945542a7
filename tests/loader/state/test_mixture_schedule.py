"""A curriculum by step (`Loader.set_mixture_schedule`): each point applies at its step, exactly as
the same change made by hand there; the schedule is part of the state, so a run killed between
points resumes it (not given again) with the same stream as the run that went on, at 2 and 3
ranks, and `verify_epoch` holds; a schedule in a state is checked like any input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import Batch, Loader
from stoker.errors import ConfigurationError
from stoker.storage import MemoryStorage

MIXTURE = textwrap.dedent(
    """
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.storage import MemoryStorage, MixedStorage

    SCHEDULE = {0: {"big": 0.7, "small": 0.3}, 10: {"big": 0.2, "small": 0.8}, 25: {"big": 0.5, "small": 0.5}}

    def loader(rank=0, world=1, schedule=True):
        big = MemoryStorage({f"b{index}": b"big" for index in range(5000)})
        small = MemoryStorage({f"s{index}": b"small" for index in range(800)})
        mixture = MixedStorage({"big": big, "small": small}, {"big": 0.7, "small": 0.3}, num_samples=4000, seed=5)
        made = Loader(mixture, batch_size=40, sampling=Sampling(seed=2, in_order=True, rank=rank, world_size=world))
        if schedule:
            made.set_mixture_schedule(SCHEDULE)
        return made
    """
)
namespace: dict[str, Any] = {}
exec(MIXTURE, namespace)
loader, SCHEDULE = namespace["loader"], namespace["SCHEDULE"]


def share_of_small(batches: list[list[str]]) -> float:
    counts = Counter(key.split("/")[0] for keys in batches for key in keys)
    return counts["small"] / sum(counts.values())


def test_each_point_applies_at_its_step_as_the_same_change_by_hand() -> None:
    scheduled = [batch.keys for batch in loader()]
    by_hand = loader(schedule=False)
    stream = iter(by_hand)
    manual = []
    for step in range(100):
        if step in SCHEDULE:
            by_hand.set_mixture_weights(SCHEDULE[step])
        try:
            manual.append(next(stream).keys)
        except StopIteration:
            break
    assert scheduled == manual
    assert share_of_small(scheduled[:10]) == pytest.approx(0.3, abs=0.07)
    assert share_of_small(scheduled[10:25]) == pytest.approx(0.8, abs=0.07)
    assert share_of_small(scheduled[25:]) == pytest.approx(0.5, abs=0.07)


# Ranks in lockstep in one process; each rank's state saved at step 15 (between the points at
# 10 and 25), the job killed at step 18: the resumed run is not given the schedule again.
RUN = MIXTURE + textwrap.dedent(
    """
    import json, os, signal, sys
    world, out = int(sys.argv[1]), sys.argv[2]
    loaders = [loader(rank, world) for rank in range(world)]
    streams = [iter(made) for made in loaders]
    for step in range(18):
        for stream in streams:
            next(stream)
        if step == 14:
            with open(out, "w") as file:
                json.dump([made.state_dict() for made in loaders], file)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)

RESUME = MIXTURE + textwrap.dedent(
    """
    import json, sys
    world, states = int(sys.argv[1]), json.load(open(sys.argv[2]))
    loaders = [loader(rank, world, schedule=False) for rank in range(world)]
    streams = []
    for rank, made in enumerate(loaders):
        made.load_state_dict(states[rank])  # the same world: each rank its own state
        streams.append([list(batch.keys) for batch in made])
    print(json.dumps({"streams": streams, "proof": loaders[0].verify_epoch([made.state_dict() for made in loaders])}))
    """
)


@pytest.mark.parametrize("world", [2, 3])
def test_a_run_killed_between_points_resumes_the_schedule_with_the_same_stream(tmp_path: Path, world: int) -> None:
    saved = tmp_path / "states.json"
    killed = subprocess.run([sys.executable, "-c", RUN, str(world), str(saved)], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert all(state["mixture_schedule"]["applied_through"] == 10 for state in json.loads(saved.read_text()))
    resumed = subprocess.run([sys.executable, "-c", RESUME, str(world), str(saved)], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    for rank in range(world):
        went_on = [list(batch.keys) for batch in loader(rank, world)]
        assert result["streams"][rank] == went_on[15:], f"rank {rank}: the same stream as the run that went on"
    assert result["proof"]["delivered"] == 4000


def test_a_new_schedule_after_a_resume_replaces_the_rest_and_passed_points_stay_applied() -> None:
    first = loader()
    stream = iter(first)
    for _ in range(12):
        next(stream)
    state = first.state_dict()
    stream.close()
    resumed = loader(schedule=False)
    resumed.load_state_dict(state)
    resumed.set_mixture_schedule({0: {"big": 0.9, "small": 0.1}, 20: {"big": 0.1, "small": 0.9}})
    rest = [batch.keys for batch in resumed]
    assert share_of_small(rest[:8]) == pytest.approx(0.8, abs=0.08), "step 0's point was passed: not applied again"
    assert share_of_small(rest[8:]) == pytest.approx(0.9, abs=0.07)
    assert resumed.verify_epoch()["delivered"] == 4000


def test_a_schedule_needs_a_mixture_and_valid_points() -> None:
    with pytest.raises(ConfigurationError, match="needs a MixedStorage"):
        Loader(MemoryStorage({"a": b"1"}), batch_size=1).set_mixture_schedule({0: {"a": 1.0}})
    for points, message in [
        ({-1: {"big": 1.0, "small": 1.0}}, "whole numbers >= 0"),
        ({5: {"big": 1.0}}, "step 5"),
        ({5: {"big": "heavy", "small": 1.0}}, "step 5"),
        ({}, "at least one step"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            loader(schedule=False).set_mixture_schedule(points)


@pytest.mark.parametrize(
    "part",
    [
        "not a schedule",
        {"points": [[1, {"big": 1.0, "small": 1.0}]]},
        {"points": [["1", {"big": 1.0, "small": 1.0}]], "applied_through": -1},
        {"points": [[1, {"big": -1.0, "small": 1.0}]], "applied_through": -1},
        {"points": [[1, {"big": 1.0, "small": 1.0}], [1, {"big": 1.0, "small": 1.0}]], "applied_through": -1},
        {"points": [[1, {"big": 1.0, "small": 1.0}]], "applied_through": True},
        {"points": [[1, {"big": 1.0, "small": 1.0}]] * 70000, "applied_through": -1},
    ],
)
def test_a_damaged_schedule_in_a_state_is_refused_by_name(part: object) -> None:
    first = loader()
    stream = iter(first)
    next(stream)
    state = first.state_dict()
    stream.close()
    state["mixture_schedule"] = part
    with pytest.raises(ConfigurationError, match="mixture_schedule|mixture schedule"):
        loader(schedule=False).load_state_dict(state)


def read_ahead(made: Loader) -> Iterator[Batch]:
    """A wrapper that reads one batch ahead, as `stoker.device.to_device` does."""
    with made.hold_deliveries():
        stream = iter(made)
        ahead = next(stream, None)
        while ahead is not None:
            current, ahead = ahead, next(stream, None)
            made.release(current)
            yield current


def test_a_read_ahead_wrapper_sees_each_point_at_its_step() -> None:
    direct = [list(batch.keys) for batch in loader()]
    wrapped = [list(batch.keys) for batch in read_ahead(loader())]
    assert wrapped == direct, "the batch read ahead is counted as the step it will be"
