"""Image-text pairs: each sample's caption tokenized in the pipeline into padded rows aligned with
its image, against the tokenizer's own encoding of the same captions; a caption that is missing,
not text or too long is a bad sample like any other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stoker import Loader
from stoker.bench import train_tokenizer
from stoker.errors import ConfigurationError
from stoker.loader import FailurePolicy, Sampling
from stoker.ops import Captions, ImageTransform, Tokenizer
from stoker.storage import TarShardStorage
from stoker_testbed.data.images import jpeg

webdataset = pytest.importorskip("webdataset", reason="the shards are written by WebDataset's TarWriter")

WORDS = "a photo of the red cat dog sitting on green grass near blue sea under bright sky".split()


def _caption(index: int) -> str:
    return " ".join(WORDS[(index * 7 + step) % len(WORDS)] for step in range(2 + index % 11))


def _shard(path: Path, count: int, broken: dict[int, dict[str, bytes]] | None = None) -> Path:
    with webdataset.TarWriter(str(path)) as writer:
        for index in range(count):
            sample = {
                "__key__": f"{index:05d}",
                "jpg": jpeg(32, 24, seed=index),
                "txt": _caption(index).encode(),
                "json": json.dumps({"meta": {"caption": _caption(index)}}).encode(),
            }
            sample.update((broken or {}).get(index, {}))
            writer.write({key: value for key, value in sample.items() if value is not None})
    return path


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    path = train_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer.json", [_caption(index) for index in range(200)], vocabulary=300)
    return Tokenizer(path)


@pytest.mark.parametrize("member", ["txt", "json"])
def test_each_caption_is_tokenized_beside_its_own_image(tmp_path: Path, tokenizer: Tokenizer, member: str) -> None:
    captions = Captions(tokenizer, member=member, field="meta.caption" if member == "json" else None, max_length=8)
    with TarShardStorage(_shard(tmp_path / "pairs.tar", 40)) as storage:
        loader = Loader(storage, batch_size=8, transform=ImageTransform(resize=(24, 32)), extra=(captions,), sampling=Sampling(seed=2))
        for batch in loader:
            tokens = batch.captions
            assert tokens is not None and tokens.input_ids.shape[0] == batch.data.shape[0] == 8
            assert tokens.input_ids.shape[1] == int(tokens.lengths.max()) <= 8, "padded to the batch's longest, at most max_length"
            for row, key in enumerate(batch.keys):
                ids, lengths = tokenizer.encode([_caption(int(key))])
                kept = min(int(lengths[0]), 8)
                assert tokens.input_ids[row, :kept].tolist() == ids[:kept].tolist(), f"sample {key}'s own caption"
                assert tokens.attention_mask[row].tolist() == [1] * kept + [0] * (tokens.input_ids.shape[1] - kept)
                assert bool(tokens.truncated[row]) == (int(lengths[0]) > 8)
        loader.close()


def test_fixed_length_padding_gives_one_shape(tmp_path: Path, tokenizer: Tokenizer) -> None:
    captions = Captions(tokenizer, max_length=16, padding="max_length", pad_id=7)
    with TarShardStorage(_shard(tmp_path / "pairs.tar", 16)) as storage:
        loader = Loader(storage, batch_size=4, transform=ImageTransform(resize=(24, 32)), extra=(captions, "json"))
        shapes = set()
        for batch in loader:
            assert batch.captions is not None and batch.extra is not None and "json" in batch.extra[0]
            shapes.add(batch.captions.input_ids.shape)
            assert (batch.captions.input_ids[batch.captions.attention_mask == 0] == 7).all()
        loader.close()
    assert shapes == {(4, 16)}


def test_bad_captions_are_bad_samples_replaced_and_named(tmp_path: Path, tokenizer: Tokenizer) -> None:
    broken = {3: {"txt": None}, 5: {"txt": b"\xff\xfe not utf-8"}, 8: {"txt": b"x" * 2000}}
    captions = Captions(tokenizer, max_bytes=1000)
    with TarShardStorage(_shard(tmp_path / "pairs.tar", 24, broken)) as storage:
        loader = Loader(
            storage,
            batch_size=4,
            transform=ImageTransform(resize=(24, 32)),
            extra=(captions,),
            failure_policy=FailurePolicy(on_error="skip", max_bad_samples=5),
        )
        delivered = [key for batch in loader for key in batch.keys]
        failures = {failure.sample: failure for failure in loader.failures}
        loader.close()
    assert set(failures) == {"00003", "00005", "00008"} and not set(failures) & set(delivered)
    assert all(failure.action.startswith("replaced") for failure in failures.values())
    assert "max_bytes" in failures["00008"].error and "utf-8" in failures["00005"].error.lower()


def test_captions_that_cannot_work_are_refused(tokenizer: Tokenizer) -> None:
    with pytest.raises(ConfigurationError, match="field"):
        Captions(tokenizer, member="json")
    with pytest.raises(ConfigurationError, match="padding"):
        Captions(tokenizer, padding="right")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="tokenizer"):
        Captions("tokenizer.json")  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["parquet", "lance"])
def test_captions_from_a_tables_column_are_tokenized_beside_their_images(tmp_path: Path, tokenizer: Tokenizer, kind: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from stoker.storage import open_storage

    table = pa.table(
        {
            "image": [jpeg(32, 24, seed=index) for index in range(24)],
            "caption": [_caption(index) for index in range(24)],
            "label": list(range(24)),
        }
    )
    if kind == "parquet":
        pq.write_table(table, tmp_path / "pairs.parquet", row_group_size=10)
        storage = open_storage(tmp_path / "pairs.parquet", image_column="image", label_column="label")
    else:
        lance = pytest.importorskip("lance")  # no free-threaded wheel: 3.14t runs the Parquet case
        lance.write_dataset(table, str(tmp_path / "pairs.lance"))
        storage = open_storage(tmp_path / "pairs.lance", payload="image", label="label")
    captions = Captions(tokenizer, member="caption", max_length=12)
    loader = Loader(storage, batch_size=4, transform=ImageTransform(resize=(24, 32)), extra=(captions,), sampling=Sampling(seed=4))
    rows = 0
    for batch in loader:
        assert batch.captions is not None
        for row, label in enumerate(batch.labels.tolist()):
            ids, lengths = tokenizer.encode([_caption(int(label))])
            kept = min(int(lengths[0]), 12)
            assert batch.captions.input_ids[row, :kept].tolist() == ids[:kept].tolist(), f"row {label}'s own caption"
            rows += 1
    loader.close()
    storage.close()
    assert rows == 24
    with pytest.raises(Exception, match="no column 'title'"):
        missing = open_storage(tmp_path / f"pairs.{kind}")
        try:
            next(
                iter(Loader(missing, batch_size=4, transform=ImageTransform(resize=(24, 32)), extra=(Captions(tokenizer, member="title"),)))
            )
        finally:
            missing.close()
