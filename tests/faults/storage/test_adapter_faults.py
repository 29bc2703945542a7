"""The trainers' adapters over bad input: a Grain record that fails is named and the rest are
read; records that are not bytes are refused with what to do; an Orbax checkpoint without the
Loader's states, or with some missing, is refused naming the folder (never a fresh start)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.loader import FailurePolicy, Sampling
from stoker.storage import MemoryStorage

pytest.importorskip("grain", reason="needs Grain (pip install grain)")

from stoker.jax import GrainStorage  # noqa: E402 - after the skip


def test_a_grain_record_that_fails_is_named_and_the_rest_are_read() -> None:
    class Flaky:
        def __len__(self) -> int:
            return 20

        def __getitem__(self, index: int) -> bytes:
            if index == 13:
                raise OSError("disk read error")
            return np.int64(index).tobytes()

    loader = Loader(GrainStorage(Flaky(), name="flaky source"), batch_size=5, failure_policy=FailurePolicy(on_error="skip"))
    values = sorted(int(np.frombuffer(item, np.int64)[0]) for batch in loader for item in batch.data)
    assert 13 not in values and len(values) == 20  # replaced by another sample, as "skip" does
    (failure,) = loader.failures
    assert failure.sample == "00000013" and "flaky source" in failure.error and "OSError: disk read error" in failure.error


def test_records_that_are_not_bytes_need_a_conversion() -> None:
    loader = Loader(GrainStorage([1, 2, 3]), batch_size=3)
    with pytest.raises(Exception, match="not bytes: give GrainStorage\\(to_bytes=...\\)"):
        list(loader)
    converted = Loader(GrainStorage([1, 2, 3], to_bytes=lambda record: bytes([record])), batch_size=3, sampling=Sampling(shuffle="none"))
    assert [bytes(item) for batch in converted for item in batch.data] == [b"\x01", b"\x02", b"\x03"]


def test_an_orbax_checkpoint_without_complete_loader_states_is_refused_by_folder(tmp_path: Path) -> None:
    pytest.importorskip("orbax.checkpoint", reason="needs Orbax (pip install orbax-checkpoint)")
    from stoker.jax import LoaderCheckpointHandler, LoaderRestore

    loader = Loader(MemoryStorage({f"s{index}": b"x" for index in range(10)}), batch_size=2)
    handler = LoaderCheckpointHandler()
    with pytest.raises(ValueError, match="no stoker Loader state"):
        handler.restore(tmp_path, LoaderRestore(loader))
    (tmp_path / "loader-process-1-of-2.json").write_text(json.dumps(loader.state_dict()))
    (tmp_path / "loader-process-x-of-2.json").write_text("{}")  # not a name stoker writes: ignored
    with pytest.raises(ValueError, match="the Loader states are incomplete"):
        handler.restore(tmp_path, LoaderRestore(loader))
    (tmp_path / "loader-process-0-of-2.json").write_text(json.dumps({"version": 1}))
    with pytest.raises(ValueError, match="not a Loader state"):
        handler.restore(tmp_path, LoaderRestore(loader))
