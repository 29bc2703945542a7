"""A ledger, a manifest and a run file are input, not instruction: replay opens no store the ledger
names unless told to (so no credential goes to a host the user did not name), a manifest cannot
lead outside its root, a damaged ledger declaring a huge record allocates nothing, and a report
shows a run file's text as text, never as markup."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc
import pytest

from stoker.errors import StorageError
from stoker.loader import replay
from stoker.observe import read_ledger, write_report
from stoker.storage import FileStorage
from tests.faults.runs.test_provenance_faults import recorded, rewrite


class ListeningTrap:
    """A socket on loopback that records whether anything connected to it or sent it bytes."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.received = b""
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.server.accept()
            except OSError:
                continue
            self.connections += 1
            connection.settimeout(0.5)
            try:
                self.received += connection.recv(65536)
            except OSError:
                pass
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.server.close()


def test_replay_never_opens_the_store_a_ledger_names_unless_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, ledger = recorded(tmp_path)
    monkeypatch.setenv("STOKER_CASSANDRA_USERNAME", "trainer")
    monkeypatch.setenv("STOKER_CASSANDRA_PASSWORD", "s3cret-password")
    trap = ListeningTrap()
    try:
        rewrite(ledger, lambda metadata: metadata.update(source=f"cassandra://127.0.0.1:{trap.port}/ks"))
        with pytest.raises(
            StorageError, match=rf"says the run read 'cassandra://127.0.0.1:{trap.port}/ks'; replay opens only a storage you name"
        ):
            replay(ledger, 0)
        time.sleep(0.3)
        assert trap.connections == 0 and b"s3cret" not in trap.received, "nothing was sent to the host the ledger named"
        # The storage the user names is used, and the ledger's is not.
        assert len(replay(ledger, 0, storage=folder).keys) == 4
        assert trap.connections == 0
    finally:
        trap.close()


def test_the_command_line_shows_the_ledgers_source_and_refuses_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stoker.cli import main

    folder, ledger = recorded(tmp_path)
    assert main(["replay", str(ledger), "--step", "0"]) == 1
    said = capsys.readouterr().err
    assert f"says the run read {str(folder)!r}" in said and "--storage-from-ledger" in said
    assert main(["replay", str(ledger), "--step", "0", "--storage", str(folder)]) == 0
    assert main(["replay", str(ledger), "--step", "0", "--storage-from-ledger"]) == 0


def test_a_manifest_cannot_lead_outside_its_root(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jpg").write_bytes(b"a")
    (tmp_path / "secret.txt").write_bytes(b"private")
    for escape in ("../secret.txt", "../../etc/passwd", "/etc/passwd", "sub/../../secret.txt"):
        manifest = tmp_path / "data" / "manifest.csv"
        manifest.write_text(f"a.jpg,0\n{escape},1\n")
        with pytest.raises(StorageError, match=r"manifest.csv, line 2: .* leads outside the manifest's root"):
            FileStorage(manifest)
    # A wider root, named by the user, allows it; a path inside the root always passes.
    manifest.write_text(f"a.jpg,0\n{tmp_path / 'secret.txt'},1\n")
    assert FileStorage(manifest, root="/").read_indices([1]) == [b"private"]
    manifest.write_text("a.jpg,0\n./a.jpg,1\n")
    assert FileStorage(manifest).read_indices([1]) == [b"a"]


def test_a_ledger_record_declaring_a_terabyte_allocates_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import resource

    _, ledger = recorded(tmp_path)
    path = ledger / "rank-00000-0000.arrows"
    data = bytearray(path.read_bytes())
    reader = pa.ipc.MessageReader.open_stream(pa.BufferReader(bytes(data)))
    reader.read_next_message()  # the schema
    body = reader.read_next_message().body.size
    at = data.find(struct.pack("<q", body))
    assert at > 0, "the first record's body length is in the file"
    data[at : at + 8] = struct.pack("<q", 1 << 40)
    path.write_bytes(bytes(data))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert read_ledger(ledger).num_rows == 0
    assert "for message body" in caplog.text and "torn or damaged" in caplog.text
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000, "no large allocation (KB)"


def test_something_named_like_a_ledger_file_that_is_not_one_is_named(tmp_path: Path) -> None:
    import os

    _, ledger = recorded(tmp_path)
    (ledger / "rank-00000-0001.arrows").mkdir()
    with pytest.raises(StorageError, match=r"rank-00000-0001.arrows: a folder, not a regular file"):
        read_ledger(ledger)
    (ledger / "rank-00000-0001.arrows").rmdir()
    os.mkfifo(ledger / "rank-00000-0001.arrows")
    with pytest.raises(StorageError, match=r"rank-00000-0001.arrows: a FIFO, not a regular file"):
        read_ledger(ledger)


def bench_run(**fields: Any) -> dict[str, Any]:
    result = {"name": "stoker.Loader", "images_per_second": 100.0, "peak_rss_mb": 10.0, "first_batch_seconds": 0.1}
    run: dict[str, Any] = {
        "format": "stoker.bench-run",
        "dataset": "images",
        "cores": 2,
        "batch_size": 32,
        "results": [result],
        "diagnosis": {"bottleneck": "decode", "message": "decode is the bottleneck"},
        "stats": {"timeline": [], "stages": []},
    }
    run.update(fields)
    return run


def test_a_report_escapes_what_a_run_file_says_and_refuses_what_is_not_of_its_kind(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    script = "<script>alert(1)</script>"
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps(bench_run(dataset=script, diagnosis={"bottleneck": script, "message": script})))
    page = write_report(run_file, tmp_path / "out").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    for field, value, named in (
        ("batch_size", script, "batch_size"),
        ("cores", float("nan"), "cores"),
        ("results", [{"name": script, "images_per_second": script}], r"results\[0\].images_per_second"),
        ("results", [{"name": 5, "images_per_second": 1, "peak_rss_mb": 1, "first_batch_seconds": 1}], r"results\[0\].name"),
        ("diagnosis", {"bottleneck": ["x"], "message": "m"}, "diagnosis.bottleneck"),
        ("stats", "x", "stats"),
    ):
        run_file.write_text(json.dumps(bench_run(**{field: value})))
        with pytest.raises(ValueError, match=rf"not a stoker bench run: {named} is not"):
            write_report(run_file, tmp_path / "out")
        assert "<script>" not in (tmp_path / "out" / "index.html").read_text()


def test_a_report_of_deep_huge_or_special_files_is_a_named_error(tmp_path: Path) -> None:
    import os

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="deep.json: not a stoker bench run"):
        write_report(deep)
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    with pytest.raises(StorageError, match="a FIFO, not a regular file"):
        write_report(fifo)
    with pytest.raises(StorageError, match="/dev/zero: a character device"):
        write_report("/dev/zero", tmp_path / "zero")
