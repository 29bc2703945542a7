"""The fuzz suite's child process: decodes or reads each case it is sent, in this process, so that a
crash (a signal, an abort) takes down only this worker, never the test run.

Reads one JSON line per case from stdin, ``{"format": ..., "path": ..., "names": [...]}``: a file
(images, audio, video) or a dataset folder (tar shards and their index, LMDB, Parquet, the
peers' formats and their indexes and metadata, a provenance ledger, a Loader's, a mixture
Loader's or a TokenLoader's saved state, a tokenizer.json with a corpus, a node cache's folder),
and the names an error may give it by (the file, the folder). Answers one JSON line:
``{"outcome": "decoded" | "error", "type": ..., "message": ..., "named": bool, "rss_mb": ...}``,
where ``named`` says whether the error names the file or one of its samples, and ``rss_mb`` is
this process's peak resident memory so far.

    python -m tests.faults.fuzz.worker
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from stoker.errors import CorruptSampleError, ProvenanceError
from stoker.loader import replay
from stoker.observe import read_ledger
from stoker.ops import (
    AudioTransform,
    BatchDecodeError,
    ImageDecodeError,
    ImageTransform,
    VideoTransform,
    decode_batch,
    decode_image,
    document_text,
    image_sizes,
    media_lengths,
)
from stoker.storage import (
    ArrayRecordStorage,
    JsonlStorage,
    LanceStorage,
    LmdbStorage,
    ParquetStorage,
    PeerFormatStorage,
    StorageError,
    TarShardStorage,
)

from . import operator_inputs

IMAGE_FORMATS = {"jpeg", "png", "webp"}
AUDIO_FORMATS = {"wav", "flac", "mp3", "ogg", "m4a"}
VIDEO_FORMATS = {"mp4", "mkv"}
# The errors stoker promises for bad input; anything else (TypeError, IndexError...) is a bug.
NAMED_ERRORS = (ImageDecodeError, BatchDecodeError, StorageError, ProvenanceError)
AUDIO = AudioTransform(sample_rate=16_000, samples=4_000, window="start")
VIDEO = VideoTransform(frames=2, resize=(16, 16), clip="start")
CROP = ImageTransform(resize_shorter=40, center_crop=(32, 32))


def _storage(kind: str, path: Path, names: list[str]) -> None:
    """Open the dataset and read every sample; a sample's failure must name it (its key, or its
    file, as Parquet's "part-00000.parquet row 3" does)."""
    openers = {
        "tar": TarShardStorage,
        "tar-index": TarShardStorage,
        "lmdb": LmdbStorage,
        "parquet": ParquetStorage,
        "array_record": ArrayRecordStorage,
        "lance": LanceStorage,
    }
    opener = openers.get(kind, PeerFormatStorage)
    storage = opener(path)
    try:
        if isinstance(storage, PeerFormatStorage) and storage.dataset.mds is not None:
            for column in storage.dataset.mds.columns:  # a filter's read of each column: a value or a named error
                try:
                    storage.read_values(column)
                except StorageError as error:
                    if not any(name in str(error) for name in (str(path), *names)):
                        raise AssertionError(f"column {column!r} failed without naming its dataset: {error}") from error
        if isinstance(storage, PeerFormatStorage) and storage.format == "datasets":
            _datasets_columns(storage, path, names)
        keys = list(storage.keys)
        for key, result in zip(keys, storage.try_read_indices(range(len(keys)))):
            if isinstance(result, Exception):
                named = key in str(result) or any(name in str(result) for name in names)
                if not isinstance(result, NAMED_ERRORS) or not named:
                    raise AssertionError(f"sample {key!r} failed without its name: {type(result).__name__}: {result}")
    finally:
        storage.close()


def _datasets_columns(storage: PeerFormatStorage, path: Path, names: list[str]) -> None:
    """A save_to_disk folder's other columns as a filter (`read_values`) and ``extra=``
    (`try_read_members`) read them: values, or errors that name the dataset or its file."""
    try:
        columns = storage.column_names()
    except StorageError as error:
        if not any(name in str(error) for name in (str(path), *names)):
            raise AssertionError(f"the columns failed without naming the dataset: {error}") from error
        return
    for column in columns:
        try:
            storage.read_values(column)
        except StorageError as error:
            if not any(name in str(error) for name in (str(path), *names)):
                raise AssertionError(f"column {column!r} failed without naming its dataset: {error}") from error
    others = [column for column in columns if column != storage.fields.payload]
    for index, result in enumerate(storage.try_read_members(range(len(storage)), others)):
        if isinstance(result, Exception) and not any(name in str(result) for name in (str(path), *names)):
            raise AssertionError(f"sample {index}'s columns {others} failed without naming it: {result}")


def _text(path: Path, names: list[str]) -> None:
    """Open a JSON Lines corpus and take the text out of every line: a line that fails names
    itself (file and line), a file that cannot be read names the file."""
    storage = JsonlStorage(path, max_block_bytes=64 << 20)
    keys = list(storage.keys)
    for key, result in zip(keys, storage.try_read_indices(range(len(keys)))):
        if isinstance(result, Exception):
            if not isinstance(result, StorageError) or key not in str(result):
                raise AssertionError(f"line {key!r} failed without its name: {type(result).__name__}: {result}")
            continue
        try:
            document_text(result, "text", key)
        except CorruptSampleError as error:
            if key not in str(error):
                raise AssertionError(f"line {key!r} failed without its name: {error}") from error


def mixture_loader(images: str) -> Any:
    """The Loader of the ``mixture-state`` seed: two sources over the seed's images, weighted."""
    from stoker import Loader
    from stoker.loader import Sampling
    from stoker.storage import FileStorage, MixedStorage

    mixture = MixedStorage({"a": FileStorage(images), "b": FileStorage(images)}, {"a": 1.0, "b": 2.0}, seed=3)
    return Loader(mixture, batch_size=3, sampling=Sampling(seed=5))


def token_loader(corpus: str, tokenizer: str) -> Any:
    """The TokenLoader of the ``token-state`` seed, over its corpus and tokenizer."""
    from stoker.bench import EOS
    from stoker.loader import TokenLoader
    from stoker.ops import Tokenizer

    return TokenLoader(corpus, tokenizer=Tokenizer(tokenizer, eos=EOS), context_length=32, batch_size=2, seed=1)


def _state(kind: str, path: Path) -> None:
    """Read a (mutated) saved state as stoker reads one (`read_state_file`: the trainers'
    checkpoints), load it into the seed's loader (a Loader over the seed's images, one over a
    mixture of them, a TokenLoader over the seed's corpus) and deliver a batch from it: a state
    that is refused must be refused with a ValueError (named here with the file), never fail
    with another exception or later, inside the epoch."""
    from stoker import Loader
    from stoker.distributed import read_state_file
    from stoker.loader import Sampling

    if kind == "token-state":
        corpus, tokenizer = (path / "corpus.path").read_text().splitlines()
        loader = token_loader(corpus, tokenizer)
    elif kind == "mixture-state":
        loader = mixture_loader((path / "images.path").read_text())
    else:
        loader = Loader((path / "images.path").read_text(), batch_size=3, sampling=Sampling(seed=5))
    try:
        try:
            loader.load_state_dict(read_state_file(path / "state.json"))
        except ValueError as error:  # what a refused state is (ProvenanceError is one too)
            raise ProvenanceError(f"{path}: {error}") from error
        next(iter(loader), None)
    finally:
        close = getattr(loader, "close", None)
        if close is not None:
            close()


def _tokenizer(path: Path) -> None:
    """Load a (mutated) tokenizer.json as `Tokenizer` does, encode the seed's texts, and run a
    TokenLoader over its corpus with bad documents skipped: the file is refused naming itself, or
    every text is encoded or failed by itself (named by the loader), never a panic or an abort."""
    from stoker.errors import ConfigurationError
    from stoker.loader import FailurePolicy, TokenLoader
    from stoker.ops import Tokenizer

    from .tokenizer_mutations import TEXTS

    file = path / "tokenizer.json"
    try:
        tokenizer = Tokenizer(file)
    except ConfigurationError as error:  # a refused file: it must say which
        if str(file) not in str(error):
            raise AssertionError(f"a tokenizer refused without its file's name: {error}") from error
        raise StorageError(str(error)) from error
    _, lengths, failed = tokenizer.encode_each(TEXTS)
    assert len(lengths) == len(TEXTS) and all(lengths[position] == 0 for position in failed), (lengths, failed)
    policy = FailurePolicy(on_error="skip", max_bad_samples=None)
    loader = TokenLoader(path / "corpus.jsonl", tokenizer=tokenizer, context_length=16, batch_size=2, shuffle=False, failure_policy=policy)
    for _ in loader:
        pass
    assert all(failure.sample.startswith(str(path / "corpus.jsonl")) for failure in loader.failures), loader.failures


# The node cache's seed: its entries, and the bytes each must read back as (or be missing).
NODE_CACHE_BYTES = 1 << 20
NODE_CACHE_ENTRIES = 40


def node_cache_payload(index: int) -> bytes:
    return f"entry {index} ".encode() * (150 + 20 * index)


def _node_cache(path: Path) -> None:
    """Open a (mutated) node cache folder: it opens into a working cache, emptied or whole, or
    fails with a StorageError naming it; an entry read is whole or missing, never other bytes."""
    from stoker.storage import SampleCache

    cache = SampleCache(path, max_bytes=NODE_CACHE_BYTES)
    try:
        for index in range(NODE_CACHE_ENTRIES):
            data = cache.get(f"s{index}")
            if data is not None and data != node_cache_payload(index):
                raise AssertionError(f"s{index}: other bytes read from the cache than were stored ({len(data)} bytes)")
        cache.put("after", b"after" * 100)
        if cache.get("after") != b"after" * 100:
            raise AssertionError("the cache does not keep an entry after it was opened")
        if len(cache) < 1 or not 0 < cache.size <= NODE_CACHE_BYTES:
            raise AssertionError(f"the cache says it holds {len(cache)} entries, {cache.size} bytes")
    finally:
        cache.close()


def run(kind: str, path: Path, names: list[str]) -> None:
    """Decode or read one case; raise what stoker raises."""
    if kind in operator_inputs.KINDS:
        operator_inputs.run(kind, path)
    elif kind in IMAGE_FORMATS:
        data = path.read_bytes()
        image_sizes([data])  # the bucket scan's header reader: an error in its result, never a crash
        decode_image(data, name=path.name)
        decode_image(data, CROP, name=path.name)
    elif kind in AUDIO_FORMATS or kind in VIDEO_FORMATS:
        transform = AUDIO if kind in AUDIO_FORMATS else VIDEO
        media_lengths([path.read_bytes()], "audio" if kind in AUDIO_FORMATS else "video")  # the length buckets' header reader
        result = decode_batch([path.read_bytes()], transform, names=[path.name], on_error="zero")
        if result.failures:
            raise ImageDecodeError(f"{path.name!r}: {result.failures[0].error}")
    elif kind.startswith("jsonl"):
        _text(path, names)
    elif kind in ("loader-state", "mixture-state", "token-state"):
        _state(kind, path)
    elif kind == "tokenizer":
        _tokenizer(path)
    elif kind.startswith("node-cache"):
        _node_cache(path)
    elif kind == "ledger":
        # Read it, then replay every step it holds against the seed's images.
        images = (path / "images.path").read_text()
        for step in sorted(set(read_ledger(path).column("step").to_pylist())):
            replay(path, step, storage=images)
    else:
        _storage(kind, path, names)


def _peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM): unlike ``ru_maxrss``, it starts at exec, not
    at the size of the parent this process was forked from."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def main() -> None:
    # stoker's warnings about the damaged cases (a torn ledger...) are expected here, and the
    # parent reads stderr only when this process dies: written there, they would fill the pipe
    # after a few hundred cases and block this process (a false hang).
    logging.getLogger("stoker").addHandler(logging.NullHandler())
    logging.getLogger("stoker").propagate = False
    # The peers' formats save a table per dataset they open: here, in a folder of this worker's.
    os.environ["STOKER_CACHE"] = tempfile.mkdtemp(prefix="stoker-fuzz-cache-")
    for line in sys.stdin:
        case = json.loads(line)
        path = Path(case["path"])
        names = case.get("names", [path.name])
        answer: dict[str, object]
        try:
            run(case["format"], path, names)
            answer = {"outcome": "decoded"}
        except AssertionError as error:
            answer = {"outcome": "error", "type": "unnamed sample failure", "message": str(error)[:2000], "named": False}
        except Exception as error:  # judged by the parent: the type and whether it names the file
            message = str(error)
            named = isinstance(error, NAMED_ERRORS) and any(name in message for name in names)
            answer = {"outcome": "error", "type": type(error).__name__, "message": message[:2000], "named": named}
        answer["rss_mb"] = _peak_rss_mb()
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
