"""Faults around provenance and resume: a ledger that cannot be written stops the run with the
batch not delivered; damaged ledgers and hostile ledger contents (buckets among them) give named
errors before any large allocation; damaged Loader states are refused by name; a busy metrics port says so."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker import Loader
from stoker.bench import iter_jpegs
from stoker.errors import ProvenanceError, StorageError
from stoker.loader import Sampling, replay
from stoker.observe import ledger_metadata, read_ledger, serve_metrics
from stoker.ops import ImageTransform
from stoker.sampling import Buckets
from stoker.storage import MemoryStorage, MixedStorage

TRANSFORM = ImageTransform(random_resized_crop=16, flip_probability=0.5)


def images(root: Path, count: int = 24) -> Path:
    for index, data in enumerate(iter_jpegs(count, 40, 30, 5)):
        (root / f"class_{index % 2}").mkdir(parents=True, exist_ok=True)
        (root / f"class_{index % 2}" / f"{index:03d}.jpg").write_bytes(data)
    return root


def recorded(tmp_path: Path) -> tuple[Path, Path]:
    """A folder of images and a ledger of its epoch (batches of 4)."""
    folder = images(tmp_path / "images")
    loader = Loader(folder, batch_size=4, transform=TRANSFORM)
    loader.record_provenance(tmp_path / "ledger")
    for _ in loader:
        pass
    loader.close()
    return folder, tmp_path / "ledger"


def rewrite(ledger: Path, change_metadata: Any = None, *, table: pa.Table | None = None) -> None:
    """Write the ledger's file again, its metadata changed by ``change_metadata`` or its rows replaced."""
    path = ledger / "rank-00000-0000.arrows"
    with open(path, "rb") as file:
        reader = pa.ipc.open_stream(file)
        schema, rows = reader.schema, reader.read_all()
    metadata = json.loads(schema.metadata[b"stoker"])
    if change_metadata is not None:
        change_metadata(metadata)
    rows = table if table is not None else rows
    schema = rows.schema.with_metadata({"stoker": json.dumps(metadata)})
    with pa.ipc.new_stream(str(path), schema) as writer:
        writer.write_table(rows.cast(schema))


def test_a_ledger_that_cannot_be_written_stops_the_run_and_the_batch_is_not_delivered(tmp_path: Path) -> None:
    folder = images(tmp_path / "images")
    loader = Loader(folder, batch_size=4, transform=TRANSFORM, sampling=Sampling(seed=1))
    ledger = loader.record_provenance(tmp_path / "ledger")
    got: list[str] = []
    batches = iter(loader)
    got += next(batches).keys
    got += next(batches).keys
    # The disk fills: every later write fails as on a full disk.
    ledger._file = open("/dev/full", "wb")  # noqa: SIM115 - closed by the ledger
    ledger._writer = pa.ipc.new_stream(ledger._file, ledger._schema)
    with pytest.raises(StorageError, match=r"cannot write the provenance ledger .*rank-00000-0000\.arrows.*not delivered"):
        next(batches)
    state = loader.state_dict()
    assert state["step"] == 2
    resumed = Loader(folder, batch_size=4, transform=TRANSFORM, sampling=Sampling(seed=1))
    resumed.load_state_dict(state)
    rest = [key for batch in resumed for key in batch.keys]
    assert sorted(got + rest) == sorted(resumed.storage.keys), "the unwritten batch comes again; nothing lost or repeated"
    assert read_ledger(tmp_path / "ledger").column("step").to_pylist() == [0] * 4 + [1] * 4


def test_a_torn_or_damaged_ledger_reads_up_to_the_damage(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, ledger = recorded(tmp_path)
    path = ledger / "rank-00000-0000.arrows"
    whole = path.read_bytes()
    steps = read_ledger(ledger).column("step").to_pylist()
    path.write_bytes(whole[:-50])  # killed while writing the last record
    assert read_ledger(ledger).column("step").to_pylist() == steps[:-4]
    damaged = bytearray(whole)
    markers = [at for at in range(len(whole) - 4) if whole[at : at + 4] == b"\xff\xff\xff\xff"]
    third = markers[3]  # the third record's message: its length made absurd
    damaged[third + 4 : third + 8] = (0x7FFFFFF0).to_bytes(4, "little")
    path.write_bytes(bytes(damaged))
    with caplog.at_level(logging.WARNING, logger="stoker.observe"):
        rows = read_ledger(ledger).num_rows
    assert rows < len(steps) and "then a torn or damaged one" in caplog.text and "left out" in caplog.text
    path.write_bytes(b"not a ledger at all")
    assert read_ledger(ledger).num_rows == 0
    with pytest.raises(ProvenanceError, match="ledger: rank 0 recorded no step 0"):
        replay(ledger, 0, trust_ledger_source=True)
    with pytest.raises(StorageError, match="rank-00000-0000.arrows: not a readable stoker provenance ledger"):
        ledger_metadata(ledger)


def test_a_ledger_with_other_columns_is_named(tmp_path: Path) -> None:
    _, ledger = recorded(tmp_path)
    rewrite(ledger, table=pa.table({"something": [1, 2, 3]}))
    with pytest.raises(StorageError, match="not a stoker provenance ledger"):
        read_ledger(ledger)


def test_hostile_ledger_contents_are_refused_before_any_large_allocation(tmp_path: Path) -> None:
    folder, ledger = recorded(tmp_path)

    def huge_crop(metadata: dict[str, Any]) -> None:
        metadata["transform"]["arguments"]["random_resized_crop"] = [60_000, 60_000]
        metadata.pop("sample_shape")

    rewrite(ledger, huge_crop)
    with pytest.raises(ProvenanceError, match="would take .* bytes, over max_batch_bytes"):
        replay(ledger, 0, trust_ledger_source=True)

    def other_shape(metadata: dict[str, Any]) -> None:
        metadata["transform"]["arguments"]["random_resized_crop"] = [20, 20]
        metadata["sample_shape"] = [16, 16, 3]

    rewrite(ledger, other_shape)
    with pytest.raises(ProvenanceError, match=r"samples of shape \[20, 20, 3\], but it records \[16, 16, 3\]"):
        replay(ledger, 0, trust_ledger_source=True)
    rewrite(ledger, lambda metadata: metadata.update(transform={"type": "ImageTransform", "arguments": {"no_such": 1}}))
    with pytest.raises(ProvenanceError, match="transform cannot be built again"):
        replay(ledger, 0, trust_ledger_source=True)
    rewrite(ledger, lambda metadata: metadata.update(source=str(tmp_path / "gone")))
    with pytest.raises(StorageError, match="the run's storage .*gone.* cannot be opened"):
        replay(ledger, 0, trust_ledger_source=True)


def test_a_ledger_naming_samples_outside_the_storage_is_refused(tmp_path: Path) -> None:
    _, ledger = recorded(tmp_path)
    table = read_ledger(ledger)
    index = table.schema.get_field_index("index")
    rewrite(ledger, table=table.set_column(index, "index", pa.array([10**9] * table.num_rows, type=pa.int64())))
    with pytest.raises(ProvenanceError, match="outside the storage's 24"):
        replay(ledger, 0, trust_ledger_source=True)


def test_damaged_strings_in_a_record_are_caught_as_damage(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Found by the fuzz suite: a string column's offsets damaged made pyarrow raise SystemError
    # ("Negative size passed to PyUnicode_New") when the rows were read; each record is now
    # validated as it is read, and reading stops at the damaged one.
    _, ledger = recorded(tmp_path)
    path = ledger / "rank-00000-0000.arrows"
    keys = read_ledger(ledger).column("key").to_pylist()[:4]
    offsets = np.cumsum([0] + [len(key.encode()) for key in keys]).astype("<i4").tobytes()
    data = bytearray(path.read_bytes())
    at = data.find(offsets)
    assert at > 0, "the first record's key offsets are in the file"
    data[at + 8 : at + 12] = (-5000).to_bytes(4, "little", signed=True)
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="stoker.observe"):
        table = read_ledger(ledger)
    assert table.num_rows == 0 and "then a torn or damaged one" in caplog.text
    with pytest.raises(ProvenanceError, match="recorded no step 0"):
        replay(ledger, 0, trust_ledger_source=True)


STATE_PARTS = st.sampled_from(["fingerprint", "step", "delivered_digest", "mixture"])
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2)), max_size=4),
)


@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(part=STATE_PARTS, junk=JUNK)
def test_a_damaged_state_is_refused_by_name_or_loaded(part: str, junk: Any) -> None:
    data = MixedStorage(
        {"a": MemoryStorage({f"a{index}": b"a" for index in range(40)}), "b": MemoryStorage({f"b{index}": b"b" for index in range(40)})},
        {"a": 1.0, "b": 1.0},
        num_samples=40,
    )
    loader = Loader(data, batch_size=4)
    state = loader.state_dict()
    state[part] = junk
    try:
        Loader(data, batch_size=4).load_state_dict(state)
    except (ValueError, ProvenanceError) as error:
        assert str(error)
    except Exception as error:  # anything else is a bug in reading states
        raise AssertionError(f"{part}={junk!r}: {type(error).__name__}: {error}") from error


def test_a_busy_metrics_port_is_named() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            serve_metrics(Loader(MemoryStorage({"k": b"x"}), batch_size=1), port=port)


@pytest.mark.parametrize(
    "buckets",
    [{"type": "Pails"}, {"type": "Buckets", "shapes": [[0, 5]], "crop": "center"}, {"type": "Buckets"}, [[48, 64]], "Buckets"],
)
def test_a_ledger_whose_buckets_were_tampered_with_is_refused_by_name(buckets: object, tmp_path: Path) -> None:
    storage = MemoryStorage({f"{index:03d}.jpg": data for index, data in enumerate(iter_jpegs(16, 64, 48, 5))})
    loader = Loader(storage, batch_size=4, transform=ImageTransform(), sampling=Sampling(seed=1, buckets=Buckets([(48, 64), (64, 48)])))
    loader.record_provenance(tmp_path / "ledger")
    next(iter(loader))
    loader.close()
    assert replay(tmp_path / "ledger", 0, storage=storage).data.shape == (4, 48, 64, 3)
    rewrite(tmp_path / "ledger", lambda metadata: metadata.update(buckets=buckets))
    with pytest.raises(ProvenanceError, match="buckets cannot be built again"):
        replay(tmp_path / "ledger", 0, storage=storage)
