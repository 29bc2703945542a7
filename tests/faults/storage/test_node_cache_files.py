"""The node cache's folder and files as another local user or a damaged disk leaves them: a cache
in a shared folder never removes a file outside it (a planted link is never followed), removes
only the files it made, and a cache file of any bytes opens into a working cache (emptied, or
read as misses), never a signal, in every process that opens it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stoker.errors import StorageError
from stoker.storage import SampleCache

ENTRY = 20 << 10
ANOTHER_USER = 54321


def payload(index: int) -> bytes:
    return bytes([index % 251]) * ENTRY


def dataset(folder: Path) -> dict[str, bytes]:
    """A victim's dataset folder: what must still be there, byte for byte."""
    folder.mkdir(parents=True)
    files = {"data.mdb": b"an LMDB dataset" * 100, "lock.mdb": b"its lock", "labels.json": b"{}", "boot": b"not a mark"}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return files


def unchanged(folder: Path, files: dict[str, bytes]) -> bool:
    return sorted(path.name for path in folder.iterdir()) == sorted(files) and all(
        (folder / name).read_bytes() == data for name, data in files.items()
    )


def shared_folder(root: Path) -> Path:
    """A folder every user may write, as ``/dev/shm`` is (sticky, mode 1777)."""
    shared = root / "shm"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    return shared


def test_a_link_planted_as_entries_in_a_shared_folder_is_never_followed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Another user makes the cache folder a job will open, in a shared folder, and links its
    # `entries` to the job's dataset (which holds a data.mdb). The job's cache must not empty
    # the dataset, whatever it finds there.
    victim = dataset(tmp_path / "dataset")
    planted = shared_folder(tmp_path) / "cache"
    planted.mkdir()
    (planted / "entries").symlink_to(tmp_path / "dataset")
    os.chmod(planted, 0o777)
    if os.geteuid() == 0:
        os.chown(planted, ANOTHER_USER, ANOTHER_USER)
    with caplog.at_level(logging.WARNING, logger="stoker.storage"):
        cache = SampleCache(planted, max_bytes=4 << 20)
        cache.put("s1", payload(1))
        assert cache.get("s1") == payload(1)
        cache.close()
    assert unchanged(tmp_path / "dataset", victim), "nothing outside the cache was removed or changed"
    assert cache.folder == planted / f".stoker-{os.geteuid()}" and "a private folder in it" in caplog.text
    assert (planted / "entries").is_symlink(), "the other user's link is left as it was: not the cache's to remove"


def test_a_link_as_entries_in_the_users_own_folder_is_removed_not_followed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    victim = dataset(tmp_path / "dataset")
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    (folder / "entries").symlink_to(tmp_path / "dataset")
    (folder / "claims-00").symlink_to(tmp_path / "dataset" / "labels.json")
    with caplog.at_level(logging.WARNING, logger="stoker.storage"):
        cache = SampleCache(folder, max_bytes=4 << 20)
        cache.put("s1", payload(1))
        assert cache.get("s1") == payload(1)
        cache.close()
    assert unchanged(tmp_path / "dataset", victim)
    assert (folder / "entries").is_dir() and not (folder / "entries").is_symlink()
    assert "a symbolic link where stoker keeps a folder; removed" in caplog.text


def test_a_cache_folder_that_is_a_link_or_another_users_is_refused_by_name(tmp_path: Path) -> None:
    victim = dataset(tmp_path / "dataset")
    link = tmp_path / "cache-link"
    link.symlink_to(tmp_path / "dataset")
    with pytest.raises(StorageError, match="cache-link: a symbolic link"):
        SampleCache(link, max_bytes=4 << 20)
    assert unchanged(tmp_path / "dataset", victim)
    if os.geteuid() != 0:
        pytest.skip("making a folder another user's needs root")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, ANOTHER_USER, ANOTHER_USER)
    with pytest.raises(StorageError, match=f"theirs: owned by another user \\(uid {ANOTHER_USER}\\)"):
        SampleCache(theirs, max_bytes=4 << 20)
    # In a shared folder, a private folder another user made first (to plant files in it) is refused too.
    shared = shared_folder(tmp_path) / "cache"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    (shared / f".stoker-{os.geteuid()}").mkdir()
    os.chown(shared / f".stoker-{os.geteuid()}", ANOTHER_USER, ANOTHER_USER)
    with pytest.raises(StorageError, match=f"made by another user \\(uid {ANOTHER_USER}\\)"):
        SampleCache(shared, max_bytes=4 << 20)


def test_a_folder_on_the_way_inside_stoker_cache_is_checked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path / "stoker-cache"))
    (tmp_path / "stoker-cache").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "stoker-cache" / "node").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StorageError, match="node: a symbolic link"):
        SampleCache(tmp_path / "stoker-cache" / "node" / "cache", max_bytes=4 << 20)
    assert not any((tmp_path / "elsewhere").iterdir())
    cache = SampleCache(tmp_path / "stoker-cache" / "plain" / "cache", max_bytes=4 << 20)
    cache.put("s1", payload(1))
    assert cache.get("s1") == payload(1)
    cache.close()


def test_emptying_a_cache_of_an_earlier_boot_removes_only_the_files_it_made(tmp_path: Path) -> None:
    if not Path("/proc/sys/kernel/random/boot_id").exists():
        pytest.skip("no boot id here (not Linux): every store is flushed instead")
    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    cache.put("s1", payload(1))
    cache.close()
    entries = tmp_path / "entries"
    (entries / "notes.txt").write_text("the user's own")
    (entries / "keep").mkdir()
    (entries / "keep" / "x").write_text("x")
    (entries / "boot").write_text("an earlier boot")
    reopened = SampleCache(tmp_path, max_bytes=4 << 20)
    assert reopened.get("s1") is None and len(reopened) == 0, "an earlier boot's entries are not trusted"
    assert (entries / "notes.txt").read_text() == "the user's own" and (entries / "keep" / "x").read_text() == "x"
    reopened.close()


DAMAGE_AND_OPEN = """
import os, random, sys
from pathlib import Path
from stoker.storage import SampleCache

folder, name, trials = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
payload = lambda index: bytes([index % 251]) * (20 << 10)
for trial in range(trials):
    work = folder / f"trial-{trial}"
    cache = SampleCache(work, max_bytes=8 << 20)
    for index in range(40):
        cache.put(f"s{index}", payload(index))
    cache.close()
    # The files of that name this build keeps; one it does not keep is made (as another version left it).
    targets = sorted(path for path in (work / "entries").iterdir() if path.name.startswith(name))
    targets = targets or [work / "entries" / (name + "0" * 16 if name.endswith("-") else name)]
    noise = random.Random(trial)
    for target in targets:
        # Odd trials keep the file's first 8 KB (LMDB's meta pages, the store's state) and put
        # 1 MB of random bytes after them, as a torn copy or a damaged disk leaves it; even
        # trials replace it whole.
        head = target.read_bytes()[:8192] if trial % 2 and target.exists() else b""
        target.write_bytes(head + noise.randbytes(1 << 20))
    cache = SampleCache(work, max_bytes=8 << 20)
    found = [cache.get(f"s{index}") for index in range(40)]
    assert all(data in (None, payload(index)) for index, data in enumerate(found)), "never wrong bytes"
    cache.put("after", payload(7))
    assert cache.get("after") == payload(7), "the cache works after the damage"
    cache.close()
print("whole", flush=True)
"""


@pytest.mark.parametrize("name", ["data.mdb", "lock.mdb", "index", "log-", "lock", "boot"])
def test_random_bytes_in_a_cache_file_open_into_a_working_cache_never_a_signal(tmp_path: Path, name: str) -> None:
    # 1 MB of random bytes in data.mdb gave SIGSEGV in 2 of 8 trials when the cache was LMDB (its
    # meta pages kept; replaced whole, the cache could not be opened at all). Each file a cache
    # folder may hold (the LMDB files of before, the files kept now) is damaged in a child
    # process, 8 times, and the cache opened again there.
    run = subprocess.run([sys.executable, "-c", DAMAGE_AND_OPEN, str(tmp_path), name, "8"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "whole" in run.stdout, f"exit status {run.returncode}: {run.stderr[-2000:]}"
