"""Which peer wrote a dataset, from its files: MosaicML's ``index.json`` (MDS), LitData's
``index.json``, TFRecord files by their names, Hugging Face's
``save_to_disk`` folders by their ``state.json``."""

from __future__ import annotations

import os
from pathlib import Path

from ..._bounded import MAX_INDEX_BYTES, MAX_METADATA_BYTES, matching_files, parse_json, read_regular, require_regular
from ...errors import StorageError
from ._array_record import ARRAY_RECORD_SUFFIX
from ._dataset import PeerDataset, hf_dataset, indexed_dataset, tfrecord_dataset
from ._tfrecord import is_tfrecord_name

__all__ = ["index_json_format", "local_peer_dataset", "peer_format"]


def _read_index(path: Path) -> bytes:
    """A local ``index.json``, refused by its size (over ``MAX_INDEX_BYTES``) before it is read.

    Raises:
        StorageError: Not a regular file, or too large; named.
    """
    return read_regular(path, limit=MAX_INDEX_BYTES, what="a dataset's index.json")


def index_json_format(data: bytes) -> str | None:
    """``"mds"`` or ``"litdata"`` for an ``index.json`` of either, else None (also for one the
    JSON reader refuses: opened as either, its parser names what is wrong)."""
    try:
        document = parse_json(data, "index.json", max_bytes=MAX_INDEX_BYTES)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    shards = document.get("shards")
    if isinstance(shards, list) and shards and isinstance(shards[0], dict) and shards[0].get("format") == "mds":
        return "mds"
    if isinstance(document.get("chunks"), list) and isinstance(document.get("config"), dict):
        return "litdata"
    return None


def peer_format(path: str | os.PathLike[str]) -> str | None:
    """``"mds"``, ``"litdata"``, ``"tfrecord"``, ``"datasets"`` or ``"array_record"`` for a local dataset one of those peers wrote,
    else None (without reading more than an ``index.json`` and a folder's names)."""
    text = str(path)
    if any(character in text for character in "*?["):
        return "tfrecord" if is_tfrecord_name(text) else "array_record" if ARRAY_RECORD_SUFFIX in text else None
    location = Path(path)
    if location.is_file():
        return "tfrecord" if is_tfrecord_name(location.name) else "array_record" if ARRAY_RECORD_SUFFIX in location.name else None
    if not location.is_dir():
        return None
    index = location / "index.json"
    if index.is_file():
        try:
            kind = index_json_format(_read_index(index))
        except OSError:  # too large, or unreadable: the shards' names below tell whose it is
            kind = None
        if kind is not None:
            return kind
        # Shards beside an index that does not read: the index's parser says what is wrong.
        names = [entry.name for entry in location.iterdir()]
        if any(".mds" in name for name in names):
            return "mds"
        if any(name.startswith("chunk-") and name.endswith(".bin") for name in names):
            return "litdata"
    if (location / "state.json").is_file() and any(location.glob("*.arrow")):
        return "datasets"  # Hugging Face save_to_disk
    if (location / "dataset_dict.json").is_file():
        return "datasets"  # its splits are folders of their own: `local_peer_dataset` says so
    names = [entry.name for entry in location.iterdir() if entry.is_file()]
    if any(is_tfrecord_name(name) for name in names):
        return "tfrecord"
    if any(ARRAY_RECORD_SUFFIX in name for name in names):
        return "array_record"
    return None


def local_peer_dataset(
    path: str | os.PathLike[str], payload: str | None, label: str | None, compression: str | None
) -> tuple[Path, PeerDataset]:
    """The dataset at ``path`` and the folder its files' names are relative to.

    Raises:
        StorageError: Not a dataset of a peer's format stoker reads, or an index that cannot be
            read.
    """
    kind = peer_format(path)
    text = str(path)
    if kind in ("mds", "litdata"):
        root = Path(path)
        index = root / "index.json"
        dataset = indexed_dataset(kind, _read_index(index), str(root.resolve()), str(index), payload, label)
        stamps = []
        for file in dataset.files:
            location = root / file.name
            try:
                require_regular(location, "a shard")
                stat = location.stat()
            except OSError as error:
                raise StorageError(f"{location}: listed in {index} but cannot be read ({error})") from error
            if file.stored_bytes is not None and stat.st_size != file.stored_bytes:
                raise StorageError(f"{location}: {stat.st_size} bytes, {index} declares {file.stored_bytes} (truncated or rewritten?)")
            stamps.append(stat.st_mtime_ns)
        dataset.stamp(stamps)
        return root, dataset
    if kind == "datasets":
        root = Path(path)
        if not (root / "state.json").is_file():
            splits = sorted(entry.name for entry in root.iterdir() if (entry / "state.json").is_file())
            raise StorageError(
                f"{path}: a DatasetDict of splits {splits}; open one split's folder, such as {root / (splits[0] if splits else 'train')}"
            )
        sizes = {entry.name: entry.stat().st_size for entry in root.glob("*.arrow") if entry.is_file()}
        info = root / "dataset_info.json"
        dataset = hf_dataset(
            read_regular(root / "state.json", limit=MAX_METADATA_BYTES, what="a save_to_disk folder's state.json"),
            read_regular(info, limit=MAX_METADATA_BYTES, what="a save_to_disk folder's dataset_info.json") if info.is_file() else None,
            sizes,
            str(root.resolve()),
            str(root / "state.json"),
            payload,
            label,
        )
        dataset.stamp([(root / file.name).stat().st_mtime_ns for file in dataset.files])
        return root, dataset
    if kind == "tfrecord":
        if any(character in text for character in "*?["):
            files = matching_files(text)
            root = Path(os.path.commonpath(files)) if len(files) > 1 else files[0].parent if files else Path(".")
        elif Path(path).is_file():
            root, files = Path(path), [Path(path)]
        else:
            root = Path(path)
            files = sorted(entry for entry in root.iterdir() if entry.is_file() and is_tfrecord_name(entry.name))
        if not files:
            raise StorageError(f"{path}: no TFRecord files")
        names = [file.name if root == file else str(file.relative_to(root)) for file in files]
        stats = [file.stat() for file in files]
        dataset = tfrecord_dataset(list(zip(names, [stat.st_size for stat in stats])), str(root.resolve()), payload, label, compression)
        dataset.stamp([stat.st_mtime_ns for stat in stats])
        return root, dataset
    raise StorageError(f"{path}: not a dataset of MosaicML Streaming (MDS), LitData, TFRecord files or a Hugging Face save_to_disk folder")
