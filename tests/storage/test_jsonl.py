"""JSON Lines storage: every non-empty line once, named by file and line, from plain, gzip and
zstd files; blocks that cover every line; a Parquet string column read as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import StorageError
from stoker.storage import JsonlStorage, ParquetStorage, open_storage, storage_format
from stoker_testbed.data.text import write_lines


@pytest.mark.parametrize("compression, suffix", [(None, ".jsonl"), ("gzip", ".jsonl.gz"), ("zstd", ".jsonl.zst")])
def test_every_line_is_a_sample_named_by_file_and_line(tmp_path: Path, compression: str | None, suffix: str) -> None:
    lines = [json.dumps({"text": f"document {n}"}) for n in range(50)]
    lines.insert(10, "")  # blank lines are not documents, but count as lines
    lines.insert(20, "   ")
    path = write_lines(tmp_path / f"corpus{suffix}", lines, compression)
    storage = JsonlStorage(path)
    assert len(storage) == 50
    read = storage.read_indices(list(range(50)))
    assert [json.loads(line)["text"] for line in read] == [f"document {n}" for n in range(50)]  # type: ignore[arg-type]
    assert storage.sample_name(10) == f"{path}:12"  # the 11th document is on line 12, after the blank one
    assert storage_format(path) == "jsonl"
    assert isinstance(open_storage(path), JsonlStorage)


def test_a_folder_of_files_in_blocks(tmp_path: Path) -> None:
    for number in range(3):
        write_lines(tmp_path / f"part-{number}.jsonl", [json.dumps({"text": "x" * 100, "n": number * 1000 + i}) for i in range(300)])
    storage = JsonlStorage(tmp_path, block_bytes=4096)
    assert len(storage) == 900
    sizes = storage.block_sizes()
    assert sum(sizes) == 900 and len(sizes) > 3  # several blocks per file, none across files
    shuffled = list(range(900))[::-7] + list(range(900))[1::7]
    numbers = [json.loads(line)["n"] for line in storage.read_indices(shuffled)]  # type: ignore[arg-type]
    assert numbers == [(index // 300) * 1000 + index % 300 for index in shuffled]


def test_last_line_without_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "a"}\n{"text": "b"}')
    assert JsonlStorage(path).read_indices([0, 1]) == [b'{"text": "a"}', b'{"text": "b"}']


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.binary(max_size=40).filter(lambda line: b"\n" not in line), max_size=40), block_bytes=st.integers(16, 256))
def test_lines_match_any_bytes(lines: list[bytes], block_bytes: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Whatever the bytes (no JSON needed here: parsing is the tokenize stage's), the samples are
    exactly the lines that are not blank."""
    path = tmp_path_factory.mktemp("lines") / "any.jsonl"
    path.write_bytes(b"\n".join(lines))
    expected = [line for line in lines if line.strip()]
    if not expected:
        with pytest.raises(StorageError, match="no lines"):
            JsonlStorage(path)
        return
    storage = JsonlStorage(path, block_bytes=block_bytes)
    assert storage.read_indices(list(range(len(storage)))) == expected
    assert sum(storage.block_sizes()) == len(expected)


def test_a_parquet_text_column_is_read_as_utf8(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as parquet

    texts = [f"héllo {n}" for n in range(30)]
    parquet.write_table(pa.table({"id": list(range(30)), "text": texts}), tmp_path / "fineweb.parquet", row_group_size=8)
    storage = ParquetStorage(tmp_path / "fineweb.parquet", image_column="text", label_column="")
    assert [data.decode() for data in storage.read_indices(list(range(30)))] == texts  # type: ignore[union-attr]
    assert storage.block_sizes() == [8, 8, 8, 6]


def test_a_loader_over_json_lines_replaces_a_bad_line_with_a_labelless_sample(tmp_path: Path) -> None:
    import json as json_module

    from stoker import Loader
    from stoker.loader import FailurePolicy

    lines = [json_module.dumps({"text": f"line {number}"}) for number in range(12)]
    lines[5] = "not json"
    path = tmp_path / "lines.jsonl"
    path.write_text("\n".join(lines) + "\n")
    loader = Loader(
        JsonlStorage(path), batch_size=4, decode=json_module.loads, failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None)
    )
    batches = list(loader)
    assert sum(len(batch.keys) for batch in batches) == 12
    assert sum(int(batch.replaced.sum()) for batch in batches) == 1
    assert all((batch.labels == -1).all() for batch in batches), "no labels: -1, replaced slot included"
    assert [failure.sample for failure in loader.failures] == [f"{path}:6"]
