"""Rank discovery (arguments, process group, torchrun's environment) and the loader's DCP entry
in one process: clear errors for bad configuration, exact resume through a DCP checkpoint."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.distributed import LoaderCheckpoint, discover_world
from stoker.loader import Sampling
from stoker.storage import MemoryStorage


def samples(count: int = 103) -> MemoryStorage:
    return MemoryStorage({f"s{index:03d}": index.to_bytes(2, "little") for index in range(count)})


@pytest.fixture
def no_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def process_group() -> Iterator[None]:
    """A one-rank gloo group over an in-memory store (no port opened)."""
    distributed = pytest.importorskip("torch.distributed")
    distributed.init_process_group("gloo", rank=0, world_size=1, store=distributed.HashStore())
    try:
        yield
    finally:
        distributed.destroy_process_group()


def test_a_single_process_is_rank_0_of_1(no_launcher: None) -> None:
    assert tuple(discover_world()) == (0, 1, "single process")


def test_torchruns_environment_shards_the_loader(no_launcher: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert tuple(discover_world()) == (2, 3, "environment")
    loader = Loader(samples(), batch_size=4, sampling=Sampling(seed=1))
    assert (loader.sampler.rank, loader.sampler.world_size) == (2, 3)
    assert sum(len(batch.keys) for batch in loader) == 35, "a third of 103, padded to equal counts"


@pytest.mark.parametrize(
    "environment, message",
    [
        ({"RANK": "1"}, "RANK and WORLD_SIZE must be set together"),
        ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not an integer"),
        ({"RANK": "3", "WORLD_SIZE": "3"}, "rank 3 is not within a world of 3 .from the environment"),
    ],
)
def test_a_bad_environment_is_named(no_launcher: None, monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], message: str) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        Loader(samples(), batch_size=4)


def test_half_given_arguments_are_refused(no_launcher: None) -> None:
    with pytest.raises(ValueError, match="give both rank and world_size or neither"):
        Loader(samples(), batch_size=4, sampling=Sampling(rank=1))


def test_the_process_group_wins_over_the_environment_and_must_agree_with_arguments(
    no_launcher: None, monkeypatch: pytest.MonkeyPatch, process_group: None
) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert tuple(discover_world()) == (0, 1, "process group")
    with pytest.raises(ValueError, match=r"disagree with the initialized process group \(rank 0 of 1\)"):
        Loader(samples(), batch_size=4, sampling=Sampling(rank=1, world_size=2))


def test_several_ranks_without_a_process_group_cannot_be_checkpointed(no_launcher: None) -> None:
    loader = Loader(samples(), batch_size=4, sampling=Sampling(rank=0, world_size=2))
    with pytest.raises(RuntimeError, match="one of 2 ranks, but no torch.distributed process group is initialized"):
        LoaderCheckpoint(loader).state_dict()


def test_a_dcp_checkpoint_resumes_exactly(no_launcher: None, process_group: None, tmp_path: Path) -> None:
    checkpoint = pytest.importorskip("torch.distributed.checkpoint")
    storage = samples()
    loader = Loader(storage, batch_size=4, sampling=Sampling(seed=5))
    seen: Counter[str] = Counter()
    for count, batch in enumerate(loader, start=1):
        seen.update(batch.keys)
        if count == 9:
            break
    checkpoint.save({"loader": LoaderCheckpoint(loader)}, checkpoint_id=str(tmp_path / "step-9"))
    resumed = Loader(storage, batch_size=4, sampling=Sampling(seed=5))
    checkpoint.load({"loader": LoaderCheckpoint(resumed)}, checkpoint_id=str(tmp_path / "step-9"))
    seen.update(key for batch in resumed for key in batch.keys)
    assert seen == Counter(storage.keys)


def test_an_entry_that_is_not_a_loaders_is_named(no_launcher: None) -> None:
    with pytest.raises(ValueError, match="not a stoker loader checkpoint entry"):
        LoaderCheckpoint(Loader(samples(), batch_size=4)).load_state_dict({"model": 1})


def test_equal_steps_without_a_process_group_is_an_error_or_a_warning(
    no_launcher: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from stoker import TokenLoader
    from stoker.storage import open_tokens

    np.arange(100, dtype=np.uint32).tofile(tmp_path / "tokens.bin")
    np.save(tmp_path / "tokens.bin.offsets.npy", np.array([0, 30, 100]))
    source = open_tokens(tmp_path / "tokens.bin", dtype="uint32")
    with pytest.raises(RuntimeError, match="an agreed last step needs an initialized torch.distributed process group"):
        TokenLoader(source, context_length=16, batch_size=2, rank=0, world_size=2, equal_steps=True)
    TokenLoader(source, context_length=16, batch_size=2, rank=0, world_size=2)
    assert "ranks may yield different numbers of batches" in caplog.text
