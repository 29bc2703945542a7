"""A JSON Lines corpus opened again reads each file's kept line index (its header; the lines of
a file when one is read), is indexed again where a file changed, and holds per line arrays only
for the files its reads touched. Asserted on traced memory and on which files are read, never on
the clock."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from stoker.storage import JsonlStorage
from stoker.storage.local import _jsonl

MB = 1 << 20


def write_corpus(folder: Path, files: int, lines: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(files):
        body = b"".join(b'{"text": "%d-%d"}\n' % (number, line) for line in range(lines))
        (folder / f"part-{number:03d}.jsonl").write_bytes(body)
    return folder


def test_a_second_opening_reads_the_kept_index_not_the_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=3, lines=1000)
    first = JsonlStorage(corpus)
    expected = first.read_many(list(first.keys))
    assert sorted(path.name for path in corpus.glob("*.stoker-lines")) == [f"part-{number:03d}.jsonl.stoker-lines" for number in range(3)]

    def no_scan(*arguments: object, **keywords: object) -> None:
        raise AssertionError("a file was read through to be indexed again")

    monkeypatch.setattr(JsonlStorage, "_index_stream", no_scan)
    again = JsonlStorage(corpus)
    assert list(again.keys) == list(first.keys) and again.read_many(list(again.keys)) == expected
    assert again.content_digest() == first.content_digest()
    assert len(JsonlStorage(corpus / "*")) == len(first), "a pattern matching every file leaves the kept indexes out"
    monkeypatch.undo()

    # A file that changed (a line appended) is indexed again; the others keep their index.
    with open(corpus / "part-001.jsonl", "ab") as file:
        file.write(b'{"text": "appended"}\n')
    scanned: list[str] = []
    original = JsonlStorage._index_stream

    def counting(self: JsonlStorage, stream: object, file: Path, **keywords: object) -> object:
        scanned.append(file.name)
        return original(self, stream, file, **keywords)  # type: ignore[arg-type]

    monkeypatch.setattr(JsonlStorage, "_index_stream", counting)
    changed = JsonlStorage(corpus)
    assert scanned == ["part-001.jsonl"]
    assert len(changed) == 3001 and json.loads(changed.read(changed.keys[2000]))["text"] == "appended"
    assert changed.content_digest() != first.content_digest()


def test_a_corpus_of_ten_million_lines_opens_holding_headers(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "big", files=10, lines=1_000_000)
    JsonlStorage(corpus)  # indexes and keeps the indexes
    tracemalloc.start()
    try:
        storage = JsonlStorage(corpus)
        opened = tracemalloc.get_traced_memory()[0]
        assert json.loads(storage.read(storage.keys[7_654_321]))["text"] == "7-654321"  # by key: no table of every key
        after_one = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(storage) == 10**7
    assert opened < 8 * MB, f"opening held {opened / MB:.0f} MB: the line arrays (240 MB) were read"
    assert after_one - opened < 40 * MB, f"one read held {(after_one - opened) / MB:.0f} MB: more than its file's lines (24 MB)"


def test_without_keep_index_nothing_is_written(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=1, lines=10)
    storage = JsonlStorage(corpus, keep_index=False)
    assert len(storage) == 10 and not list(corpus.glob("*.stoker-lines"))
    assert _jsonl.INDEX_BYTES_PER_LINE == 24
