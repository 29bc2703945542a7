"""The trainers' adapters over bad input: a Grain record that fails is named and the rest are
read; records that are not bytes are refused with what to do; an Orbax checkpoint without the
Loader's states, or with some missing, is refused naming the folder (never a fresh start); a
saved state file too large or not JSON is refused by name, and any bytes as a state either load
or raise a named error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker import Loader
from stoker.loader import FailurePolicy, Sampling
from stoker.storage import MemoryStorage

pytest.importorskip("grain", reason="needs Grain (pip install grain)")

from stoker.jax import GrainStorage  # noqa: E402 - after the skip


def _json_children(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["version", "sampler", "ranks", "delivered"]), children, max_size=4
    )


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
    with pytest.raises(ValueError, match="not a whole Loader state: .sampler. is missing"):
        handler.restore(tmp_path, LoaderRestore(loader))


def test_a_loader_state_file_that_is_too_large_or_not_json_is_refused_by_name(tmp_path: Path) -> None:
    from stoker.distributed import MAX_STATE_FILE_BYTES, read_state_file

    huge = tmp_path / "huge.json"
    with huge.open("wb") as file:
        file.truncate(MAX_STATE_FILE_BYTES + 1)  # sparse: no disk, and only the bound is read
    with pytest.raises(ValueError, match=f"{huge}: more than .* bytes is not a loader state"):
        read_state_file(huge)
    garbled = tmp_path / "garbled.json"
    garbled.write_bytes(b'{"ranks": [\xff')
    with pytest.raises(ValueError, match=f"{garbled}: not a loader state file"):
        read_state_file(garbled)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
@given(
    content=st.one_of(
        st.binary(max_size=200),
        st.recursive(st.none() | st.integers() | st.text(max_size=8), _json_children).map(json.dumps).map(str.encode),
    )
)
def test_any_bytes_as_an_orbax_loader_state_load_or_raise_a_named_error(tmp_path: Path, content: bytes) -> None:
    pytest.importorskip("orbax.checkpoint", reason="needs Orbax (pip install orbax-checkpoint)")
    from stoker.jax import LoaderCheckpointHandler, LoaderRestore

    (tmp_path / "loader-process-0-of-1.json").write_bytes(content)
    loader = Loader(MemoryStorage({f"s{index}": b"x" for index in range(10)}), batch_size=2)
    try:
        LoaderCheckpointHandler().restore(tmp_path, LoaderRestore(loader))
    except ValueError:
        pass  # named: ConfigurationError, ProvenanceError
    assert len(list(loader)) <= 5  # the Loader still works, from wherever it was left
