"""Every entry point bounded: the command line with absurd numbers, special files where a file is
expected (a FIFO blocks, a device never ends), symlink loops, text that nests or grows without
bound, a packer asked for more than memory, and the torch drop-in's threads given BaseException
and stuck items. Each case is a named error or a counted bad sample, within a time bound (the
subprocess timeouts: a hang fails the test) and without a large allocation."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from stoker.cli import main
from stoker.errors import StorageError
from stoker.loader import FailurePolicy
from stoker.ops import SequencePacker
from stoker.storage import FileStorage, JsonlStorage
from stoker_testbed.data.images import jpeg
from stoker_testbed.data.text import EOS, make_corpus, write_lines

ROOT = Path(__file__).resolve().parents[3]

ABSURD = [
    (["bench", "--duration", "nan"], "--duration: nan: expected a finite number"),
    (["bench", "--duration", "inf"], "expected a finite number"),
    (["bench", "--latency-ms", "-10"], "--latency-ms: -10: expected a finite number at least 0"),
    (["bench", "--batch-size", str(10**12)], "--batch-size: 1,000,000,000,000 is outside 1..1,048,576"),
    (["bench", "--batch-size", "0"], "--batch-size: 0 is outside"),
    (["bench", "--context-length", "-5"], "--context-length: -5 is outside"),
    (["bench", "--context-length", "1000000000000"], "--context-length: 1,000,000,000,000 is outside"),
    (["bench", "--images", "ten"], "--images: 'ten' is not a whole number"),
    (["convert", "a", "b", "--shard-size", "infGB"], "--shard-size: infGB: expected a size"),
    (["convert", "a", "b", "--shard-size", "nanMB"], "expected a size"),
    (["convert", "a", "b", "--shard-size", "9999999TB"], "over the largest size stoker takes"),
    (["split", "a", "-o", "x.json", "--folds", "1"], "--folds: 1 is outside"),
    (["replay", "ledger", "--step", "-1"], "--step: -1 is outside"),
]


@pytest.mark.parametrize("arguments, message", ABSURD, ids=[" ".join(case[0][:3]) for case in ABSURD])
def test_absurd_numbers_are_refused_where_they_are_parsed(arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(arguments)
    assert ended.value.code == 2
    assert message in capsys.readouterr().err


def _run(arguments: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The command line in a process of its own; a hang past ``timeout`` fails the test."""
    return subprocess.run([sys.executable, "-m", "stoker.cli", *arguments], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_special_files_where_a_file_is_expected_are_refused_by_name(tmp_path: Path) -> None:
    fifo = tmp_path / "data.jsonl"
    os.mkfifo(fifo)
    os.mkfifo(tmp_path / "shard.tar")
    os.mkfifo(tmp_path / "text.parquet")  # inspect looks for a text column in a Parquet it cannot open
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "part-0.parquet").write_bytes(b"PAR1" + b"\xff" * 64 + b"PAR1")
    (tmp_path / "run.json").symlink_to("/dev/zero")
    for arguments, named in (
        (["inspect", str(fifo)], "data.jsonl: a FIFO, not a regular file"),
        (["inspect", str(tmp_path / "text.parquet")], "text.parquet: a FIFO, not a regular file"),
        (["inspect", str(tmp_path / "garbage")], "part-0.parquet"),
        (["convert", str(fifo), str(tmp_path / "out")], "data.jsonl: a FIFO"),
        (["report", str(fifo)], "a FIFO, not a regular file"),
        (["report", str(tmp_path / "run.json")], "a character device, not a regular file"),
        (["inspect", "/dev/zero"], "/dev/zero: a character device"),
        (["split", str(fifo), "-o", str(tmp_path / "s.json")], "a FIFO"),
        (["index", str(tmp_path / "shard.tar")], "shard.tar: a FIFO, not a regular file"),
    ):
        done = _run(arguments)
        assert done.returncode == 1 and named in done.stderr, (arguments, done.stderr)
        assert "Traceback" not in done.stderr
    with pytest.raises(StorageError, match="a FIFO, not a regular file"):
        JsonlStorage(fifo)


READ_A_MANIFEST = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a read without end fails here, not on the machine
from stoker.storage import FileStorage
storage = FileStorage(sys.argv[1])
for key, result in zip(storage.keys, storage.try_read_indices(range(len(storage)))):
    print(key, f"{type(result).__name__}: {result}" if isinstance(result, Exception) else len(result), flush=True)
"""


def test_a_manifest_naming_a_fifo_or_a_device_fails_those_samples_by_name_and_reads_the_rest(tmp_path: Path) -> None:
    # A manifest names its paths (and a folder's cached listing its files): what sits there at
    # read time may be anything. Before: the FIFO's read blocked for ever, and /dev/zero's read
    # ran until memory did (a MemoryError under this 2 GB bound).
    image = jpeg(16, 16, seed=1)
    (tmp_path / "x.jpg").write_bytes(image)
    os.mkfifo(tmp_path / "fifo.jpg")
    (tmp_path / "zero.jpg").symlink_to("/dev/zero")
    (tmp_path / "m.csv").write_text("path,label\nx.jpg,0\nfifo.jpg,1\nzero.jpg,1\n")
    try:
        done = subprocess.run([sys.executable, "-c", READ_A_MANIFEST, str(tmp_path / "m.csv")], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a sample's read blocked on the FIFO")
    assert done.returncode == 0, done.stderr[-2000:]
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert said["x.jpg"] == str(len(image)), "the other samples are read"
    assert said["fifo.jpg"].startswith("StorageError: ") and "fifo.jpg: a FIFO, not a regular file" in said["fifo.jpg"]
    assert said["zero.jpg"].startswith("StorageError: ") and "zero.jpg: a character device, not a regular file" in said["zero.jpg"]


def test_a_split_into_more_folds_than_samples_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data" / "cat").mkdir(parents=True)
    for number in range(4):
        (tmp_path / "data" / "cat" / f"{number}.jpg").write_bytes(jpeg(8, 8, seed=number))
    done = _run(["split", str(tmp_path / "data"), "-o", str(tmp_path / "s.json"), "--folds", "1000000000"])
    assert done.returncode == 1 and "k=1,000,000,000 folds of 4 samples: a fold would be empty" in done.stderr


def test_symlink_loops_list_each_file_once_and_end(tmp_path: Path) -> None:
    folder = tmp_path / "d" / "cat"
    folder.mkdir(parents=True)
    (folder / "x.jpg").write_bytes(jpeg(16, 16, seed=1))
    for number in range(3):
        (folder / f"up{number}").symlink_to("..")
    (folder / "here").symlink_to(".")
    (folder / "fifo.jpg").unlink(missing_ok=True)
    os.mkfifo(folder / "fifo.jpg")  # not a sample: reading it would block
    storage = FileStorage(tmp_path / "d", cache=False)
    assert list(storage.keys) == ["cat/x.jpg"], "one image, one sample"
    done = _run(["inspect", str(tmp_path / "d"), "--json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["samples"] == 1


def test_a_line_nested_a_thousand_deep_is_a_counted_bad_document(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    from stoker.loader import TokenLoader
    from stoker.ops import Tokenizer

    _, tokenizer = make_corpus(tmp_path / "c", documents=40, files=1)
    lines = [json.dumps({"text": f"document {number}"}) for number in range(10)]
    lines.insert(4, '{"text": ' + "[" * 3000 + "]" * 3000 + "}")  # 6 KB nested 3,000 deep
    lines.insert(6, json.dumps({"text": "x" * 9000}))  # over max_document_bytes below
    path = write_lines(tmp_path / "corpus.jsonl", lines)
    loader = TokenLoader(
        path,
        tokenizer=Tokenizer(tokenizer, eos=EOS),
        context_length=16,
        batch_size=2,
        failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None),
        max_document_bytes=8192,
    )
    assert sum(batch.real_tokens for batch in loader) > 0
    reasons = {failure.sample: failure.error for failure in loader.failures}
    assert any("nested too deep" in reason for reason in reasons.values()), reasons
    assert any("over max_document_bytes=8,192" in reason for reason in reasons.values()), reasons
    assert len(reasons) == 2


def test_long_lines_and_inflating_newlines_are_bounded(tmp_path: Path) -> None:
    long = tmp_path / "long.jsonl"
    with open(long, "wb") as file:
        file.write(b'{"text": "a"}\n')
        file.write(b"x" * (48 << 20) + b"\n")  # 48 MB in one line
        file.write(b'{"text": "b"}\n')
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                from stoker.storage import JsonlStorage
                storage = JsonlStorage({str(long)!r}, max_line_bytes=1 << 20)
                results = storage.try_read_indices([0, 1, 2])
                print(len(storage), [type(result).__name__ for result in results], str(results[1]))
                # VmHWM, not ru_maxrss: that one starts at the size of the process this was forked from.
                with open("/proc/self/status") as status:
                    print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) // 1024)
                """
            ),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    shown, peak = done.stdout.strip().splitlines()
    assert "['bytes', 'CorruptSampleError', 'bytes']" in shown and "long.jsonl:2: a line of 50,331,648 bytes" in shown
    assert int(peak) < 300, f"{peak} MB to index a 48 MB line not read"
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"{}\n" * 4_000_000))
    with pytest.raises(StorageError, match="decompresses to more than max_block_bytes=.* with its line index"):
        JsonlStorage(bomb, max_block_bytes=64 << 20)


def test_a_packer_asked_for_more_than_a_row_can_hold_says_so() -> None:
    # Once a PanicException from inside the native allocation (not an Exception: it escaped
    # `except Exception`); positions in a row are int32, so a longer row is refused by name.
    with pytest.raises(ValueError, match="context must be at most 2147483647 tokens"):
        SequencePacker(10**12, 2)
    packer = SequencePacker(64, 2)
    packer.add(np.arange(10))
    assert [batch.real_tokens for batch in packer.batches(final=True)] == [10]


THREADS = textwrap.dedent(
    """
    import sys, threading, time
    from stoker.torch import DataLoader

    class Raising:
        def __init__(self, kind):
            self.kind = kind
        def __len__(self):
            return 64
        def __getitem__(self, index):
            if index == 20 and self.kind is not None:
                raise self.kind("from __getitem__")
            if index >= 40 and self.kind is None:
                threading.Event().wait()  # stuck for good, as a read from a hung mount
            return index

    kind = {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit, "stuck": None}[sys.argv[1]]
    loader = DataLoader(Raising(kind), batch_size=8, num_workers=2, worker_kind="threads", items_in_flight=4, timeout=3)
    try:
        for batch in loader:
            pass
    except BaseException as error:
        print("raised", type(error).__name__, str(error).splitlines()[0], flush=True)
    """
)


@pytest.mark.parametrize("kind", ["KeyboardInterrupt", "SystemExit", "stuck"])
def test_the_drop_ins_threads_carry_base_exceptions_and_never_keep_the_process(kind: str) -> None:
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, "-c", THREADS, kind], capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    expected = "RuntimeError DataLoader timed out after 3 seconds" if kind == "stuck" else f"raised {kind} Caught {kind}"
    assert expected in done.stdout, done.stdout + done.stderr


COLLATING_AT_EXIT = textwrap.dedent(
    """
    import torch
    from stoker.torch import DataLoader

    class Large:
        def __len__(self):
            return 4096
        def __getitem__(self, index):
            if index == 40:
                raise SystemExit("from __getitem__")
            return torch.ones(512, 1024)  # 2 MB: collation copies 32 MB a batch, outside the GIL

    loader = DataLoader(Large(), batch_size=16, num_workers=2, worker_kind="threads", prefetch_factor=4)
    try:
        for batch in loader:
            pass
    except SystemExit as error:
        print("raised SystemExit", error, flush=True)
    """
)


def test_the_drop_ins_threads_end_their_batch_before_the_interpreter_does() -> None:
    # The script ends while the other worker threads are inside torch's C++ collation. The
    # interpreter ends a daemon thread by unwinding it when it asks for the GIL back, which C++
    # frames must not do: the process aborted ('terminate called without an active exception',
    # every run of this script) after the user's code had ended well.
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, "-c", COLLATING_AT_EXIT], capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("raised SystemExit Caught SystemExit in DataLoader worker thread 0."), done.stdout
