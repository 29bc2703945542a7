"""Exact resume through the wrappers that read ahead of the training loop: `to_device` (one batch
ahead) and `to_jax` (``ahead`` batches). A checkpoint taken at any batch, in the loop or from
another thread, resumes with every sample delivered exactly once; a wrapper that stops early
gives back what it read ahead, so the same Loader continues with it. A bucketed epoch (batches of
several shapes) resumes the same way."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from stoker import Loader
from stoker.device import to_device, to_jax
from stoker.loader import Sampling
from stoker.storage import MemoryStorage

COUNT = 300


def _storage() -> MemoryStorage:
    return MemoryStorage({f"k{index:03d}": index.to_bytes(4, "little") for index in range(COUNT)})


def _loader() -> Loader:
    # Fixed-size arrays, as a transform gives: the wrappers move numpy batches.
    return Loader(_storage(), batch_size=10, decode=lambda data: np.frombuffer(data, np.int32), sampling=Sampling(seed=3, pad=False))


def _keys_of(moved: Any) -> list[str]:
    host = moved.host if hasattr(moved, "host") else moved[2]
    return [key for key, valid in zip(host.keys, host.valid.tolist()) if valid]


def _through_torch(loader: Loader) -> Iterator[Any]:
    return to_device(_stacked(loader), "cpu")


def _through_jax(loader: Loader) -> Iterator[Any]:
    return to_jax(_stacked(loader), ahead=3)


class _stacked:
    """The Loader with its per-sample arrays stacked into one (what a transform would give),
    keeping the Loader's hold and release for the wrapper."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.hold_deliveries = loader.hold_deliveries
        self.release = loader.release

    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            batch.data = np.stack(batch.data)
            yield batch


WRAPPERS: dict[str, Callable[[Loader], Iterator[Any]]] = {"to_device": _through_torch, "to_jax": _through_jax}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("stop_after", [1, 7, 29])
def test_a_checkpoint_at_any_batch_resumes_exactly(wrapper: str, stop_after: int) -> None:
    if wrapper == "to_jax":
        pytest.importorskip("jax")
    else:
        pytest.importorskip("torch")
    first = _loader()
    seen: Counter[str] = Counter()
    state = None
    for number, moved in enumerate(WRAPPERS[wrapper](first), start=1):
        seen.update(_keys_of(moved))
        if number == stop_after:
            state = first.state_dict()  # the loop has trained on exactly `number` batches
            break
    assert state is not None
    resumed = _loader()
    resumed.load_state_dict(state)
    for moved in WRAPPERS[wrapper](resumed):
        seen.update(_keys_of(moved))
    assert sorted(seen) == sorted(f"k{index:03d}" for index in range(COUNT)), "a sample was lost"
    assert set(seen.values()) == {1}, f"delivered twice: {[key for key, count in seen.items() if count > 1]}"


def test_batches_read_ahead_and_dropped_come_again_in_the_same_loader() -> None:
    pytest.importorskip("torch")
    loader = _loader()
    seen: Counter[str] = Counter()
    for number, moved in enumerate(to_device(_stacked(loader), "cpu"), start=1):
        seen.update(_keys_of(moved))
        if number == 5:
            break
    # The wrapper had read batch 6; it was never delivered, so the epoch goes on with it.
    for batch in loader:
        seen.update(key for key, valid in zip(batch.keys, batch.valid.tolist()) if valid)
    assert len(seen) == COUNT and set(seen.values()) == {1}


def test_without_a_wrapper_the_batch_in_hand_counts_as_delivered() -> None:
    loader = _loader()
    for number, _batch in enumerate(loader, start=1):
        if number == 3:
            state = loader.state_dict()
            break
    assert sum(end - start for start, end in state["sampler"]["delivered"]) == 30


def _bucketed() -> Loader:
    from stoker.ops import ImageTransform
    from stoker.sampling import Buckets
    from stoker_testbed.data.images import jpeg

    sizes = [(96, 64), (64, 96), (80, 80)]
    storage = MemoryStorage({f"k{index:03d}": jpeg(*sizes[index % 3], seed=index) for index in range(90)})
    buckets = Buckets([(48, 64), (64, 48), (56, 56)], crop="random")
    return Loader(storage, batch_size=4, transform=ImageTransform(), sampling=Sampling(seed=5, buckets=buckets))


@pytest.mark.parametrize("wrapper", ["to_device", "to_jax"])
def test_a_bucketed_epoch_resumes_exactly_through_a_wrapper(wrapper: str) -> None:
    pytest.importorskip("jax" if wrapper == "to_jax" else "torch")
    move: Callable[[Loader], Iterator[Any]] = (
        (lambda loader: to_jax(loader, ahead=3)) if wrapper == "to_jax" else (lambda loader: to_device(loader, "cpu"))
    )  # noqa: E731
    whole = _bucketed()
    expected = Counter(key for batch in whole for key in batch.keys)
    whole.close()
    first = _bucketed()
    seen: Counter[str] = Counter()
    shapes = set()
    for number, moved in enumerate(move(first), start=1):
        seen.update(_keys_of(moved))
        shapes.add(tuple((moved.host if hasattr(moved, "host") else moved[2]).data.shape[1:3]))
        if number == 6:  # some buckets' batches delivered, others not yet
            state = first.state_dict()
            break
    first.close()
    resumed = _bucketed()
    resumed.load_state_dict(state)
    for moved in move(resumed):
        seen.update(_keys_of(moved))
    resumed.close()
    assert seen == expected, "every sample of the bucketed epoch once, across the resume"
    assert len(shapes) > 1


def _ranked(rank: int, world: int) -> Loader:
    return Loader(
        _storage(),
        batch_size=10,
        decode=lambda data: np.frombuffer(data, np.int32),
        sampling=Sampling(seed=3, in_order=True, rank=rank, world_size=world),
    )


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize(("world", "resume_on"), [(1, 2), (2, 3), (3, 1)])
def test_keys_left_out_while_the_wrappers_read_ahead_stay_out_and_the_rest_is_read_once(wrapper: str, world: int, resume_on: int) -> None:
    # Every rank's loop through the wrapper, in step; the keys are given at step 4 (the batches
    # the wrappers read ahead stay as they are), the loop stops at step 9 with batches still
    # held (handed back), and every rank's states resume the epoch on another world.
    pytest.importorskip("jax" if wrapper == "to_jax" else "torch")
    loaders = [_ranked(rank, world) for rank in range(world)]
    streams = [WRAPPERS[wrapper](loader) for loader in loaders]
    bad = [f"k{index:03d}" for index in range(0, COUNT, 7)]
    seen: Counter[str] = Counter()
    for step in range(10):
        for stream in streams:
            seen.update(_keys_of(next(stream)))
        if step == 4:
            for loader in loaders:
                loader.exclude(keys=bad)
    states = [loader.state_dict() for loader in loaders]
    for stream in streams:
        stream.close()
    assert all(loader.step == 10 for loader in loaders)
    resumed = [_ranked(rank, resume_on) for rank in range(resume_on)]
    steps = []
    for loader in resumed:
        loader.load_state_dict(states)
        batches = list(loader)
        steps.append(len(batches))
        seen.update(key for batch in batches for key, padding in zip(batch.keys, batch.padding.tolist()) if not padding)
    proof = resumed[0].verify_epoch([loader.state_dict() for loader in resumed])
    left_out = set(bad) - set(seen)
    assert set(seen.values()) == {1}, f"delivered twice: {[key for key, count in seen.items() if count > 1][:5]}"
    assert sorted(set(seen) | left_out) == sorted(f"k{index:03d}" for index in range(COUNT)), "a sample was lost"
    assert 0 < len(left_out) < len(bad), "the keys read by step 4 (and those read ahead) stay; the rest go"
    assert len(set(steps)) == 1, "every rank takes the same steps"
    assert proof == {"epoch": 0, "samples": COUNT, "delivered": COUNT - len(left_out), "excluded": len(left_out), "removed": 0, "added": 0}
