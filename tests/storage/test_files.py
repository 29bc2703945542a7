"""FileStorage: ImageFolder and manifests, the cached listing, reads and their errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stoker.storage import FileStorage, StorageError


def test_image_folder_keys_labels_and_bytes(folder) -> None:
    root, samples = folder
    storage = FileStorage(root)
    assert sorted(storage.keys) == sorted(samples)
    assert storage.classes == ["class_0", "class_1", "class_2"]
    for key in storage.keys:
        assert storage.label(key) == samples[key][1]
    wanted = list(reversed(storage.keys))[:9] + [storage.keys[0]] * 2
    assert storage.read_many(wanted) == [samples[key][0] for key in wanted]
    assert asyncio.run(storage.fetch_many(wanted)) == [samples[key][0] for key in wanted]
    storage.close()


def test_listing_is_cached_and_invalidated_by_a_change(folder) -> None:
    root, samples = folder
    first = FileStorage(root)
    (root / "class_2" / "img.999.jpg").write_bytes(b"new")
    second = FileStorage(root)
    assert len(second) == len(first) + 1, "a new file in a listed folder invalidates the cache"
    # An unchanged tree is answered from the cache, with the same keys in the same order.
    cached = FileStorage(root)
    assert list(cached.keys) == list(second.keys)
    (root / "class_1" / "nested" / "deep").mkdir()
    (root / "class_1" / "nested" / "deep" / "x.png").write_bytes(b"x")
    assert "class_1/nested/deep/x.png" in FileStorage(root).keys


def test_manifest_with_integer_and_named_labels(tmp_path: Path, folder) -> None:
    root, samples = folder
    keys = sorted(samples)
    numbered = root / "train.csv"
    numbered.write_text("path,label\n" + "".join(f"{key},{samples[key][1] + 10}\n" for key in keys))
    storage = FileStorage(numbered)
    assert list(storage.keys) == keys and storage.classes is None
    assert [storage.label(key) for key in keys] == [samples[key][1] + 10 for key in keys]
    assert storage.read(keys[3]) == samples[keys[3]][0]
    named = root / "train.tsv"
    named.write_text("".join(f"{key}\t{'zebra' if samples[key][1] else 'ant'}\n" for key in keys))
    storage = FileStorage(named)
    assert storage.classes == ["ant", "zebra"]
    assert {storage.label(key) for key in keys} == {0, 1}


def test_malformed_manifest_names_the_line(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.csv"
    manifest.write_text("a.jpg,1\nb.jpg,2,extra\n")
    with pytest.raises(StorageError, match="bad.csv, line 2"):
        FileStorage(manifest)


def test_missing_paths_and_files(tmp_path: Path, folder) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        FileStorage(tmp_path / "nowhere")
    root, samples = folder
    storage = FileStorage(root, cache=False)
    victim = sorted(samples)[2]
    (root / victim).unlink()
    with pytest.raises(StorageError, match=victim):
        storage.read(victim)
    others = [key for key in sorted(samples)[:5]]
    results = storage.read_many(others, on_error="skip")
    assert results[2] is None and all(result is not None for index, result in enumerate(results) if index != 2)
    assert storage.failure_count == 1 and storage.failures[0].sample == victim
    with pytest.raises(KeyError, match="no sample"):
        storage.read("not/a/key.jpg")


def test_empty_folder_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty" / "only_class").mkdir(parents=True)
    with pytest.raises(StorageError, match="no samples"):
        FileStorage(tmp_path / "empty")


def test_a_permission_error_names_the_sample_and_file(folder, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root in CI, where chmod cannot deny a read: the OS error is injected instead.
    import os

    root, samples = folder
    storage = FileStorage(root)
    victim = sorted(samples)[0]
    real_open = os.open

    def guarded_open(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).endswith(victim):  # as a file of mode 000 is to a user other than root
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)
    with pytest.raises(StorageError) as caught:
        storage.read(victim)
    assert victim in str(caught.value) and "Permission denied" in str(caught.value)
    assert str(root) in str(caught.value)


def test_an_unknown_key_under_skip_is_a_recorded_failure(folder) -> None:
    root, samples = folder
    with FileStorage(root) as storage:
        known = sorted(samples)[0]
        with pytest.raises(KeyError, match="no sample with key 'missing'"):
            storage.read_many(["missing"])
        assert storage.read_many(["missing", known], on_error="skip") == [None, samples[known][0]]
        assert storage.failure_count == 1 and storage.failures[0].sample == "missing"
