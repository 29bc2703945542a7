"""A verifiable resume: a state knows what its positions mean (dataset, sampling, batching,
transform) and is refused, with what differs, by a Loader over something else; and a finished
epoch proves it delivered each sample exactly once, across resumes and world-size changes."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from stoker import Loader
from stoker.errors import ProvenanceError
from stoker.loader import Sampling
from stoker.storage import MemoryStorage


def store(count: int = 500) -> MemoryStorage:
    samples = {f"k{index}": index.to_bytes(4, "little") for index in range(count)}
    return MemoryStorage(samples)


def halfway(loader: Loader, batches: int) -> dict[str, Any]:
    for number, _ in enumerate(loader):
        if number == batches:
            return loader.state_dict()
    raise AssertionError("the epoch ended first")


def test_a_state_is_refused_by_a_loader_over_another_dataset_or_configuration() -> None:
    state = halfway(Loader(store(), batch_size=10, sampling=Sampling(seed=1)), 5)
    with pytest.raises(ProvenanceError) as refused:
        Loader(store(499), batch_size=10, sampling=Sampling(seed=2)).load_state_dict(state)
    message = str(refused.value)
    assert "dataset.samples: 500 then, 499 now" in message
    assert "dataset.keys_and_labels_hash" in message
    assert "sampling.seed: 1 then, 2 now" in message
    assert "allow_changes=True" in message
    # Another batch size is carried over (tests/faults/runs/test_rebatch_kill_resume.py), except
    # where it changes which samples the epoch holds: with drop_last, the last short batch.
    dropping = halfway(Loader(store(), batch_size=10, drop_last=True, sampling=Sampling(seed=1)), 5)
    with pytest.raises(ProvenanceError, match="batch_size: 10 then, 20 now"):
        Loader(store(), batch_size=20, drop_last=True, sampling=Sampling(seed=1)).load_state_dict(dropping)
    with pytest.raises(ProvenanceError, match="transform: None then, 'bytes' now"):
        Loader(store(), batch_size=10, decode=bytes, sampling=Sampling(seed=1)).load_state_dict(state)


def test_a_deliberate_change_is_allowed_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    state = halfway(Loader(store(), batch_size=10, sampling=Sampling(seed=1)), 5)
    resumed = Loader(store(), batch_size=10, decode=bytes, sampling=Sampling(seed=1))
    with caplog.at_level(logging.WARNING, logger="stoker.loader"):
        resumed.load_state_dict(state, allow_changes=True)
    assert "resuming with changes (allow_changes=True): transform: None then, 'bytes' now" in caplog.text
    keys = [key for batch in resumed for key in batch.keys]
    assert len(keys) == 500 - 60


def test_another_batch_size_resumes_the_epoch_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    state = halfway(Loader(store(), batch_size=10, sampling=Sampling(seed=1)), 5)
    resumed = Loader(store(), batch_size=20, sampling=Sampling(seed=1))
    with caplog.at_level(logging.INFO, logger="stoker.loader"):
        resumed.load_state_dict(state)
    assert "with another batch size (batch_size: 10 then, 20 now)" in caplog.text
    assert "allow_changes" not in caplog.text
    sizes = [len(batch.keys) for batch in resumed]
    assert sum(sizes) == 500 - 60 and sizes[0] == 20
    assert resumed.verify_epoch()["delivered"] == 500


def test_a_resumed_epoch_proves_each_sample_was_delivered_exactly_once() -> None:
    state = halfway(Loader(store(), batch_size=16, sampling=Sampling(seed=3)), 11)
    resumed = Loader(store(), batch_size=16, sampling=Sampling(seed=3))
    resumed.load_state_dict(state)
    for _ in resumed:
        pass
    assert resumed.verify_epoch() == {"epoch": 0, "samples": 500, "delivered": 500, "excluded": 0, "removed": 0, "added": 0}


def test_the_proof_holds_across_a_change_of_world_size() -> None:
    data = store(503)
    first = [Loader(data, batch_size=8, sampling=Sampling(seed=5, rank=rank, world_size=2)) for rank in range(2)]
    states = [halfway(loader, 9) for loader in first]
    second = [Loader(data, batch_size=8, sampling=Sampling(seed=5, rank=rank, world_size=3)) for rank in range(3)]
    for loader in second:
        loader.load_state_dict(states)
        for _ in loader:
            pass
    final = [loader.state_dict() for loader in second]
    assert second[0].verify_epoch(final)["delivered"] == 503


def test_a_gap_or_a_repeat_fails_the_proof() -> None:
    loaders = [Loader(store(), batch_size=10, sampling=Sampling(rank=rank, world_size=2)) for rank in range(2)]
    for loader in loaders:
        for _ in loader:
            pass
    states = [loader.state_dict() for loader in loaders]
    assert loaders[0].verify_epoch(states)["delivered"] == 500
    with pytest.raises(ProvenanceError, match="250 more than once"):
        loaders[0].verify_epoch([*states, states[1]])
    cut_short = Loader(store(), batch_size=10)
    halfway(cut_short, 4)
    with pytest.raises(ProvenanceError, match="450 missing"):
        cut_short.verify_epoch()


def test_a_label_column_computed_when_asked_is_hashed_by_its_values_the_same_in_every_process() -> None:
    # A storage with no labels keeps them as a column computed when asked (an HTTP list of image
    # files, JSON Lines): its dataset digest is that of a list of None (-1 each), in any process,
    # never a hash of the addresses of Python objects (a state saved by one process refused by the next).
    import subprocess
    import sys

    from stoker.loader.state import dataset_digest
    from stoker.storage import label_array
    from stoker.storage._labels import NoLabels

    script = (
        "from stoker.loader.state import dataset_digest; from stoker.storage._labels import NoLabels; "
        "print(dataset_digest([f'k{index}' for index in range(70_000)], NoLabels(70_000)))"
    )
    there = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    keys = [f"k{index}" for index in range(70_000)]
    assert dataset_digest(keys, NoLabels(70_000)) == there == dataset_digest(keys, label_array([None] * 70_000))
