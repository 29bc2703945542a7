"""`stoker inspect` gives every storage kind's size as stored, or says why it cannot, and sums up
its labels as they are: a histogram by value or class name, a range for numbers with fractions,
and "none" for a corpus without labels (JSON Lines and Parquet once read "0 B", a text corpus
"(none) 100%")."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from stoker.cli import main
from stoker.ingest import convert_storage, format_report, inspect_storage
from stoker.storage import MemoryStorage
from stoker_testbed.availability import started
from stoker_testbed.data.peer_formats import jpeg_samples, write_array_record, write_hf_disk, write_lance, write_mds, write_tfrecords
from stoker_testbed.servers.http_server import HttpFileServer

SAMPLES = jpeg_samples(24, classes=4)
LABELS = {str(label): sum(1 for _, other in SAMPLES if other == label) for label in range(4)}
PAYLOAD_BYTES = sum(len(payload) for payload, _ in SAMPLES)


def _files(root: Path, pattern: str) -> int:
    return sum(path.stat().st_size for path in root.glob(pattern) if path.is_file())


def _converted(to: str) -> Callable[[Path], tuple[Path, int]]:
    def make(tmp_path: Path) -> tuple[Path, int]:
        source = MemoryStorage(
            {f"{index:03d}.jpg": payload for index, (payload, _) in enumerate(SAMPLES)},
            {f"{index:03d}.jpg": label for index, (_, label) in enumerate(SAMPLES)},
        )
        destination = tmp_path / ("data.lmdb" if to == "lmdb" else "data")
        convert_storage(source, destination, to=to, progress=False, decode_check=False)
        stored = {"parquet": "*.parquet", "shards": "*.tar", "lmdb": "data.mdb"}[to]
        return destination, _files(destination, stored)

    return make


def _jsonl(tmp_path: Path) -> tuple[Path, int]:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "part-0.jsonl").write_text("".join(json.dumps({"text": f"document {index}"}) + "\n" for index in range(24)))
    return folder, _files(folder, "*.jsonl")


def _mds(tmp_path: Path) -> tuple[Path, int]:
    pytest.importorskip("streaming")  # MosaicML's writer (it imports torch: not on 3.14t)
    write_mds(tmp_path / "mds", SAMPLES)
    return tmp_path / "mds", _files(tmp_path / "mds", "*.mds")


def _tfrecord(tmp_path: Path) -> tuple[Path, int]:
    pytest.importorskip("tfrecord")  # the writer's package (a dev-group sdist, not in the free-threaded venv)
    (tmp_path / "records").mkdir()
    write_tfrecords(tmp_path / "records", SAMPLES)
    return tmp_path / "records", _files(tmp_path / "records", "*.tfrecord*")


def _datasets(tmp_path: Path) -> tuple[Path, int]:
    pytest.importorskip("datasets")
    write_hf_disk(tmp_path / "hf", SAMPLES, classes=4)
    return tmp_path / "hf", _files(tmp_path / "hf", "*.arrow")


def _array_record(tmp_path: Path) -> tuple[Path, int]:
    pytest.importorskip("array_record")
    write_array_record(tmp_path / "records", SAMPLES)
    return tmp_path / "records", _files(tmp_path / "records", "*.array_record*")


def _lance(tmp_path: Path) -> tuple[Path, int]:
    pytest.importorskip("lance")
    write_lance(tmp_path / "data.lance", SAMPLES)
    return tmp_path / "data.lance", -1  # its data files' bytes, as Lance counts them: checked against the payloads


KINDS: dict[str, Callable[[Path], tuple[Path, int]]] = {
    "shards": _converted("shards"),
    "lmdb": _converted("lmdb"),
    "parquet": _converted("parquet"),
    "jsonl": _jsonl,
    "mds": _mds,
    "tfrecord": _tfrecord,
    "datasets": _datasets,
    "array_record": _array_record,
    "lance": _lance,
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_gives_its_size_as_stored_and_its_labels(kind: str, tmp_path: Path) -> None:
    path, stored = KINDS[kind](tmp_path)
    report = inspect_storage(path)
    assert report["samples"] == (24 if kind == "jsonl" else len(SAMPLES)) and "bytes_unknown" not in report
    if stored >= 0:
        assert report["bytes"] == stored, report
    else:
        assert PAYLOAD_BYTES <= report["bytes"] < 2 * PAYLOAD_BYTES, report
    if kind == "jsonl":
        assert report["labels"] == {}
        assert "labels: none (no sample carries a label)" in format_report(report) and "(none)" not in format_report(report)
    else:
        names = {f"c{label}": count for label, count in LABELS.items()}  # save_to_disk's ClassLabel names
        assert report["labels"] == (names if kind == "datasets" else LABELS), report


def test_numbers_with_fractions_are_a_range_and_samples_without_a_label_are_counted(tmp_path: Path) -> None:
    targets = [0.25 * index if index % 5 else None for index in range(20)]
    storage = MemoryStorage(
        {f"{index:03d}.bin": b"x" * (index + 1) for index in range(20)}, dict(zip((f"{index:03d}.bin" for index in range(20)), targets))
    )
    convert_storage(storage, tmp_path / "targets", progress=False, decode_check=False)
    report = inspect_storage(tmp_path / "targets")
    known = [target for target in targets if target is not None]
    assert report["label_range"] == {"min": min(known), "max": max(known), "mean": float(np.mean(known))}
    assert report["labels"] == {"(none)": 4}
    assert "labels: numbers from 0.25 to 4.75, mean 2.5" in format_report(report)


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpFileServer]:
    server = started(HttpFileServer(), "the HTTP test server (aiohttp: pip install aiohttp)")
    yield server
    server.close()


def test_objects_on_a_web_server_are_sized_by_their_listing(http_server: HttpFileServer, capsys: pytest.CaptureFixture[str]) -> None:
    for index, (payload, _) in enumerate(SAMPLES[:4]):
        http_server.put(f"objects/{index}.jpg", payload)
    url = http_server.url("objects/{0..3}.jpg")
    assert main(["inspect", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["bytes"] == sum(len(payload) for payload, _ in SAMPLES[:4]) and report["labels"] == {}


def test_a_parquet_text_corpus_is_inspected_by_its_text_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # As pandas writes one (FineWeb's layout: a string column "text", no column of bytes): the
    # Loader never guesses a text column to be the samples, so inspect refused it, advising an
    # image_column= that `stoker inspect` has no option for.
    pandas = pytest.importorskip("pandas")
    texts = [f"document {index} " * (index + 1) for index in range(30)]
    (tmp_path / "corpus").mkdir()
    pandas.DataFrame({"text": texts, "url": ["https://example.org"] * 30}).to_parquet(tmp_path / "corpus" / "part-0.parquet")
    for path in (tmp_path / "corpus" / "part-0.parquet", tmp_path / "corpus"):
        assert main(["inspect", str(path)]) == 0
        said = capsys.readouterr().out
        assert inspect_storage(path)["bytes"] == (tmp_path / "corpus" / "part-0.parquet").stat().st_size
        assert ": parquet, 30 samples, " in said and " 0 B" not in said, said
        assert "text: column 'text' (no column of bytes: a text corpus)" in said and "labels: none" in said, said
    pandas.DataFrame({"body": texts}).to_parquet(tmp_path / "other.parquet")
    with pytest.raises(Exception, match="no column of bytes"):
        inspect_storage(tmp_path / "other.parquet")  # no column called text: the storage's own refusal stands
