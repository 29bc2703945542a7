"""Bad input with buckets: a header declaring absurd dimensions, an image whose header reads but
whose data is cut short, a dataset that fills no bucket, audio whose header lies about its length. Each is named; no batch changes
shape and nothing is allocated from a size read in a header."""

from __future__ import annotations

import logging

import pytest

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import FailurePolicy, Sampling
from stoker.ops import AudioTransform, ImageTransform
from stoker.sampling import Buckets, LengthBuckets
from stoker.storage import MemoryStorage
from stoker_testbed.data.images import jpeg
from stoker_testbed.data.media_files import tone_with_clicks, wav_bytes

BUCKETS = Buckets([(48, 64), (64, 48)])


def _photos(count: int) -> dict[str, bytes]:
    return {f"{index:04d}.jpg": jpeg(96 if index % 2 else 64, 64 if index % 2 else 96, seed=index) for index in range(count)}


def test_a_header_declaring_absurd_dimensions_goes_to_no_bucket_and_is_named(caplog: pytest.LogCaptureFixture) -> None:
    samples = _photos(32)
    bomb = bytearray(jpeg(64, 48))
    marker = bomb.index(b"\xff\xc0")
    bomb[marker + 5 : marker + 9] = (65000).to_bytes(2, "big") * 2  # 4.2 G pixels declared in 2 KB
    samples["bomb.jpg"] = bytes(bomb)
    with caplog.at_level(logging.WARNING, logger="stoker.loader"):
        loader = Loader(MemoryStorage(samples), batch_size=4, transform=ImageTransform(), sampling=Sampling(buckets=BUCKETS))
    delivered = [key for batch in loader for key in batch.keys]
    assert "bomb.jpg" in caplog.text and "bomb.jpg" not in delivered
    assert loader.bucket_counts()["without_bucket"] == 1  # type: ignore[index]
    loader.close()


def test_an_image_cut_short_after_its_header_is_a_bad_sample_replaced_within_the_batchs_shape() -> None:
    samples = _photos(40)
    whole = samples["0003.jpg"]
    samples["0003.jpg"] = whole[: len(whole) // 3]  # the header reads; the data is lost
    loader = Loader(
        MemoryStorage(samples),
        batch_size=4,
        transform=ImageTransform(),
        sampling=Sampling(seed=2, buckets=BUCKETS),
        failure_policy=FailurePolicy(on_error="skip", max_bad_samples=2),
    )
    shapes = set()
    for batch in loader:
        shapes.add(batch.data.shape[1:3])
        assert batch.data.shape[0] == 4 and batch.valid.all()
    assert shapes <= set(BUCKETS.shapes)
    failures = loader.failures
    loader.close()
    assert [failure.sample for failure in failures] == ["0003.jpg"] and failures[0].action.startswith("replaced")


def test_a_dataset_that_fills_no_bucket_is_refused_with_the_numbers() -> None:
    with pytest.raises(ConfigurationError, match="no bucket holds a full batch of 64 for each of 1 ranks"):
        Loader(MemoryStorage(_photos(20)), batch_size=64, transform=ImageTransform(), sampling=Sampling(buckets=BUCKETS))


def test_audio_whose_header_lies_about_its_length_goes_to_no_bucket_or_is_a_named_bad_sample(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rate = 8000
    samples = {f"{index:03d}.wav": wav_bytes(tone_with_clicks(2.5, rate, 200.0 + index, []), rate) for index in range(24)}
    whole = samples["005.wav"]
    samples["005.wav"] = whole[: len(whole) // 3]  # the data chunk declares 2.5 s; 0.8 s is there
    samples["006.wav"] = whole[:44] + b"\x00" * 10  # a header and almost nothing
    with caplog.at_level(logging.WARNING, logger="stoker.loader"):
        loader = Loader(
            MemoryStorage(samples),
            batch_size=2,
            transform=AudioTransform(sample_rate=rate, samples=1, window="start"),
            sampling=Sampling(buckets=LengthBuckets([1.0, 2.0])),
            failure_policy=FailurePolicy(on_error="skip", max_bad_samples=2),
        )
    delivered = [key for batch in loader for key in batch.keys]
    counts = loader.bucket_counts()
    failures = loader.failures
    loader.close()
    assert "005.wav" not in delivered and "006.wav" not in delivered
    named_in_log = {key for key in ("005.wav", "006.wav") if key in caplog.text}
    named_as_failures = {failure.sample for failure in failures}
    assert named_in_log | named_as_failures == {"005.wav", "006.wav"}, "each lying file is named, by the scan or by its decode"
    assert counts is not None and counts["without_bucket"] == len(named_in_log)
