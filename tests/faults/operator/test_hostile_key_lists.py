"""A key list is input: `Loader.exclude(keys=...)` takes any iterable of keys (a generator was
consumed by its check and excluded nothing), and a key that is not one (a null above all, which a
key list file turned into a sample silently pushed out of its epoch) is refused by name with its
position, in memory, in a key list file and in a ledger."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stoker import Loader
from stoker.errors import ConfigurationError, ProvenanceError, StorageError
from stoker.loader import Sampling
from stoker.observe import ledger_keys
from stoker.storage import MemoryStorage

KEYS = [f"k{index:03d}" for index in range(40)]


def _loader(keys: list[str] = KEYS) -> Loader:
    return Loader(MemoryStorage({key: key.encode() for key in keys}), batch_size=4, decode=bytes, sampling=Sampling(seed=7, in_order=True))


def _delivered(loader: Loader) -> list[str]:
    return [key for batch in loader for key, valid in zip(batch.keys, batch.valid) if valid]


def _generator(keys: list[str]) -> Iterator[str]:
    yield from keys


@pytest.mark.parametrize(
    "make",
    [_generator, tuple, set, np.array, lambda keys: (key.encode() for key in keys), lambda keys: dict.fromkeys(keys)],
    ids=["generator", "tuple", "set", "numpy", "utf-8 bytes", "dict"],
)
def test_exclude_takes_any_iterable_of_keys_and_reads_it_once(make: Any) -> None:
    left_out = ["k003", "k017", "k029"]
    loader = _loader()
    try:
        loader.exclude(keys=make(left_out))
        delivered = _delivered(loader)
    finally:
        loader.close()
    assert sorted(delivered) == sorted(set(KEYS) - set(left_out))


def test_exclude_while_the_loop_runs_takes_a_generator_too() -> None:
    loader = _loader()
    try:
        batches = iter(loader)
        first = next(batches)
        later = [key for key in KEYS if key not in first.keys][:5]
        loader.exclude(keys=_generator(later))
        rest = [key for batch in batches for key, valid in zip(batch.keys, batch.valid) if valid]
    finally:
        loader.close()
    assert sorted(list(first.keys) + rest) == sorted(set(KEYS) - set(later))


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("k001", "takes an iterable of keys"),
        (b"k001", "takes an iterable of keys"),
        (7, "takes an iterable of keys"),
        (None, "exclude takes steps= or keys="),
        (["k001", None], "key 1 is null"),
        ([None], "key 0 is null"),
        (["k001", "k002", float("nan")], "key 2 is null"),
        (["k001", 5], "key 1 is int 5"),
        (["k001", ["k002"]], "key 1 is list"),
        ([b"\xff\xfe"], "key 0 is not UTF-8"),
        (count(), "key 0 is int"),
        (iter(lambda: "k001", None), "more than 40 keys"),
    ],
    ids=["str", "bytes", "int", "none", "null", "only null", "nan", "number", "nested", "not utf-8", "endless numbers", "endless keys"],
)
def test_what_is_not_a_list_of_keys_is_refused_by_name_and_leaves_the_epoch_whole(keys: Any, message: str) -> None:
    loader = _loader()
    try:
        with pytest.raises(ConfigurationError, match=message):
            loader.exclude(keys=keys)
        assert sorted(_delivered(loader)) == KEYS
    finally:
        loader.close()


def test_a_null_in_a_key_list_file_is_refused_by_name_not_taken_for_a_removed_sample(tmp_path: Path) -> None:
    first = _loader()
    batches = iter(first)
    delivered = list(next(batches).keys) + list(next(batches).keys)
    state = first.state_dict()
    path = first.save_keys(tmp_path)
    first.close()
    table = pq.read_table(path)
    keys = table.column("key").to_pylist()
    victim = next(key for key in KEYS if key not in delivered)
    keys[KEYS.index(victim)] = None
    pq.write_table(pa.table({"key": pa.array(keys, pa.large_string())}, schema=table.schema), path)
    resumed = _loader([*KEYS, "k-new"])  # the dataset changed: the key list is read
    try:
        with pytest.raises(ProvenanceError, match=rf"{path}: key {KEYS.index(victim)} is null"):
            resumed.load_state_dict(state, keys_before=path)
    finally:
        resumed.close()


def test_a_null_key_in_a_ledger_is_refused_by_name(tmp_path: Path) -> None:
    loader = _loader()
    loader.record_provenance(tmp_path / "ledger")
    for _ in loader:
        pass
    loader.close()
    (file,) = sorted((tmp_path / "ledger").glob("rank-*.arrows"))
    with pa.ipc.open_stream(file.read_bytes()) as reader:  # in memory: the file is written again below
        table = reader.read_all()
    keys = table.column("key").to_pylist()
    keys[5] = None
    table = table.set_column(table.schema.get_field_index("key"), "key", pa.array(keys, table.schema.field("key").type))
    with pa.ipc.new_stream(file, table.schema) as writer:
        writer.write_table(table)
    with pytest.raises(StorageError, match="key 5 is null"):
        ledger_keys(tmp_path / "ledger", steps=range(0, 10))
