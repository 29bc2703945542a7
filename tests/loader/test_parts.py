"""The Loader's parts on their own: its live snapshot (what metrics and reports read instead of
its fields) and its tuning, which reaches the Loader only through the hooks it is given."""

from __future__ import annotations

import dataclasses

import pytest

from stoker import Loader
from stoker.loader import FailurePolicy, Sampling
from stoker.loader._tuning import LoaderTuning, TuningHooks
from stoker.pipeline import PipelineBuilder
from stoker.storage import MemoryStorage


def loader(count: int = 40, **options: object) -> Loader:
    store = MemoryStorage({f"k{index:03d}": bytes([index % 256]) * 8 for index in range(count)})
    return Loader(store, batch_size=4, decode=bytes, sampling=Sampling(seed=1), **options)  # type: ignore[arg-type]


def test_the_snapshot_follows_the_run_and_is_not_changed_by_it() -> None:
    data = loader()
    before = data.snapshot()
    assert (before.step, before.running, before.stages, before.totals.batches) == (0, None, (), 0)
    seen = []
    for _ in data:
        seen.append(data.snapshot())
        if len(seen) == 4:  # batches may come out of order: count them, not their numbers
            break
    assert [snapshot.step for snapshot in seen] == [1, 2, 3, 4]
    assert all(snapshot.running is not None for snapshot in seen), "inside an epoch the running stats are shown"
    assert {stage.name for stage in seen[-1].stages} >= {"fetch", "decode"}
    for _ in data:
        pass
    after = data.snapshot()
    assert after.running is None and after.totals.batches == 10 and after.step == 10, "the epoch went on where the loop left it"
    assert {stage.name for stage in after.stages} >= {"fetch", "decode"}, "between epochs: the last epoch's stages"
    assert seen[-1].totals.batches == 0, "a snapshot keeps its own copy of the totals"
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.step = 0  # type: ignore[misc]


def test_the_snapshot_counts_bad_samples_by_stage_and_action() -> None:
    def decode(data: bytes) -> bytes:
        if data[0] == 7:
            raise ValueError("sample 7 does not decode")
        return data

    data = Loader(
        MemoryStorage({f"k{index:03d}": bytes([index]) * 8 for index in range(40)}),
        batch_size=4,
        decode=decode,
        sampling=Sampling(seed=1),
        failure_policy=FailurePolicy(on_error="skip", max_bad_samples=5),
    )
    for _ in data:
        pass
    assert data.snapshot().bad_samples == {"decode: replaced": 1}
    assert data.snapshot().rank == 0


def test_the_tuning_moves_a_knob_in_the_pipeline_and_tells_the_loader_through_its_hook() -> None:
    settled: list[tuple[str, int]] = []
    hooks = TuningHooks(settle=lambda knob, value: settled.append((knob, value)), fetched_batch_bytes=lambda: 1000.0, requests=lambda: None)
    tuning = LoaderTuning(hooks, pinned={"fetch"}, wait_target=0.05, memory_budget=1 << 30, batch_bytes=None)
    pipeline = PipelineBuilder().add_source(range(100)).pipe(lambda item: item, concurrency=2, name="decode").add_sink(2).build()
    knobs = tuning.knobs(pipeline)
    assert [knob.name for knob in knobs] == ["decode concurrency", "prefetch"], "a pinned knob is left out"
    knobs[0].set(3)
    knobs[1].set(5)
    assert (pipeline.concurrency("decode"), pipeline.sink_size) == (3, 5)
    assert settled == [("decode", 3), ("prefetch", 5)]
    assert tuning.decoded_batch_bytes() == 1000.0, "with no transform, a batch weighs what was read"
