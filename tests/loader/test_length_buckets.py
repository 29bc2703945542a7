"""The Loader with buckets by length: audio files of many durations and videos of many frame
counts, every batch one bucket's window or clip holding samples that fill it, each sample's data
the one its own decode at the bucket's length gives, equal steps on every rank, no sample twice,
an exact resume mid-epoch, and what length buckets cannot work with refused by name."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling, replay
from stoker.ops import AudioTransform, ImageTransform, VideoTransform, decode_audio, decode_video, media_lengths
from stoker.sampling import LengthBuckets
from stoker.storage import MemoryStorage
from stoker_testbed.data.media_files import encode_video, tone_with_clicks, wav_bytes

RATE = 8000
BUCKETS = LengthBuckets([1.0, 2.0, 4.0])
# Durations from shorter than every bucket to longer than the longest, in storage order.
DURATIONS = [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0]


def speech(count: int = 140) -> MemoryStorage:
    """WAVs whose durations run through DURATIONS, each its own tone (so samples differ)."""
    samples = {}
    for index in range(count):
        seconds = DURATIONS[index * len(DURATIONS) // count]
        samples[f"{index:04d}.wav"] = wav_bytes(tone_with_clicks(seconds, RATE, 100 + index, []), RATE)
    return MemoryStorage(samples)


def transform() -> AudioTransform:
    return AudioTransform(sample_rate=RATE, samples=1, window="start")


def test_every_audio_batch_is_one_buckets_window_and_each_sample_its_own_decode(caplog: pytest.LogCaptureFixture) -> None:
    storage = speech()
    durations = dict(zip(storage.keys, media_lengths(storage.read_many(storage.keys)).seconds.tolist()))
    with caplog.at_level(logging.WARNING, logger="stoker.loader"):
        loader = Loader(storage, batch_size=4, transform=transform(), sampling=Sampling(seed=3, buckets=BUCKETS))
    assert "shorter than the shortest bucket (1)" in caplog.text and "0000.wav" in caplog.text
    seen: Counter[str] = Counter()
    windows: Counter[int] = Counter()
    for batch in loader:
        window = batch.data.shape[-1]
        seconds = window / RATE
        assert seconds in BUCKETS.lengths and batch.data.shape == (4, 1, window)
        for key, data in zip(batch.keys, batch.data):
            longest_fitting = max(length for length in BUCKETS.lengths if length <= durations[key] + 1e-9)
            assert seconds == longest_fitting, f"{key} ({durations[key]} s) went to the {seconds} s bucket"
            expected = decode_audio(storage.read_many([key])[0], AudioTransform(sample_rate=RATE, samples=window, window="start"))
            np.testing.assert_array_equal(data, expected)
        seen.update(batch.keys)
        windows[window] += 1
    counts = loader.bucket_counts()
    loader.close()
    assert counts is not None and counts["length"] == [1.0, 2.0, 4.0]
    assert len(windows) == 3 and max(seen.values()) == 1
    too_short = sum(1 for seconds in durations.values() if seconds < 1.0)
    assert counts["without_bucket"] == too_short > 0, "samples shorter than every bucket are left out and counted"
    assert sum(seen.values()) + sum(counts["left_over"]) + counts["without_bucket"] == len(storage)


def test_a_sample_shorter_than_every_bucket_is_padded_into_the_shortest_when_asked() -> None:
    storage = speech(70)
    loader = Loader(
        storage, batch_size=2, transform=transform(), sampling=Sampling(seed=1, buckets=LengthBuckets([1.0, 4.0], shorter="pad"))
    )
    short = {key for key, seconds in zip(storage.keys, media_lengths(storage.read_many(storage.keys)).seconds) if seconds < 1.0}
    padded = 0
    for batch in loader:
        for key, data in zip(batch.keys, batch.data):
            if key in short:
                assert data.shape[-1] == RATE and np.all(data[:, RATE // 2 :] == 0) and np.any(data[:, : RATE // 2] != 0)
                padded += 1
    counts = loader.bucket_counts()
    loader.close()
    assert counts is not None and counts["without_bucket"] == 0 and padded > 0


def test_three_ranks_take_equal_steps_and_together_read_each_sample_once() -> None:
    storage = speech(210)
    steps, seen = [], Counter[str]()
    for rank in range(3):
        loader = Loader(storage, batch_size=4, transform=transform(), sampling=Sampling(seed=2, rank=rank, world_size=3, buckets=BUCKETS))
        batches = list(loader)
        steps.append(len(batches))
        seen.update(key for batch in batches for key in batch.keys)
        loader.close()
    assert len(set(steps)) == 1 and steps[0] > 0, f"steps per rank: {steps}"
    assert max(seen.values()) == 1


def test_a_resume_mid_epoch_delivers_the_same_batches_as_the_uninterrupted_run() -> None:
    storage = speech()
    random_window = AudioTransform(sample_rate=RATE, samples=1, window="random")
    options = {"batch_size": 4, "transform": random_window, "sampling": Sampling(seed=5, in_order=True, buckets=BUCKETS)}
    whole = Loader(storage, **options)  # type: ignore[arg-type]
    reference = [(list(batch.keys), batch.data.copy()) for batch in whole]
    whole.close()
    first = Loader(storage, **options)  # type: ignore[arg-type]
    iterator = iter(first)
    for _ in range(5):
        next(iterator)
    state = first.state_dict()
    first.close()
    resumed = Loader(storage, **options)  # type: ignore[arg-type]
    resumed.load_state_dict(state)
    rest = [(list(batch.keys), batch.data.copy()) for batch in resumed]
    resumed.close()
    assert [keys for keys, _ in rest] == [keys for keys, _ in reference[5:]]
    assert all(np.array_equal(ours, theirs) for (_, ours), (_, theirs) in zip(rest, reference[5:])), "the same random windows"


def test_every_bucketed_audio_batch_is_rebuilt_from_the_ledger_bit_for_bit(tmp_path: Path) -> None:
    storage = speech(70)
    random_window = AudioTransform(sample_rate=RATE, samples=1, window="random")
    loader = Loader(storage, batch_size=2, transform=random_window, sampling=Sampling(seed=4, buckets=BUCKETS))
    loader.record_provenance(tmp_path / "ledger")
    delivered = [(list(batch.keys), batch.data.copy()) for batch in loader]
    loader.close()
    assert len({data.shape for _, data in delivered}) == 3
    for step, (keys, data) in enumerate(delivered):
        again = replay(tmp_path / "ledger", step, storage=storage)
        assert again.keys == keys and np.array_equal(again.data, data), f"step {step}"


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> MemoryStorage:
    """Small videos of 12 to 60 frames at 30 fps."""
    directory = tmp_path_factory.mktemp("length-videos")
    frames = [12, 20, 33, 45, 60]
    return MemoryStorage(
        {
            f"{index:03d}.mp4": encode_video(directory, f"{index}.mp4", frames[index % len(frames)], width=160, height=96)
            for index in range(20)
        }
    )


@pytest.mark.parametrize("sampling", [{"stride": 2}, {"fps": 12.0}])
def test_video_batches_are_one_buckets_clip_of_the_longest_length_each_video_gives(
    videos: MemoryStorage, sampling: dict[str, float]
) -> None:
    video = VideoTransform(frames=1, clip="start", resize=(48, 80), layout="THWC", **sampling)  # type: ignore[arg-type]
    buckets = LengthBuckets([4, 8, 16])
    loader = Loader(videos, batch_size=2, transform=video, sampling=Sampling(seed=1, buckets=buckets))
    delivered = 0
    for batch in loader:
        frames = batch.data.shape[1]
        for key, clip in zip(batch.keys, batch.data):
            payload = videos.read_many([key])[0]
            same = VideoTransform(frames=frames, clip="start", resize=(48, 80), layout="THWC", **sampling)  # type: ignore[arg-type]
            np.testing.assert_array_equal(clip, decode_video(payload, same))
            # The next bucket's clip would not fit this video: the longest that fits was chosen.
            longer = [length for length in buckets.lengths if length > frames]
            if longer:
                with pytest.raises(Exception, match="too short"):
                    decode_video(payload, VideoTransform(frames=int(longer[0]), clip="start", resize=(48, 80), **sampling))  # type: ignore[arg-type]
            delivered += 1
    loader.close()
    assert delivered > 0


def test_a_file_whose_length_cannot_be_read_is_named_and_never_delivered(caplog: pytest.LogCaptureFixture) -> None:
    storage = speech(40)
    samples = {key: storage.read_many([key])[0] for key in storage.keys}
    samples["noise.wav"] = b"RIFF....WAVEjunk that is no audio"
    with caplog.at_level(logging.WARNING, logger="stoker.loader"):
        loader = Loader(MemoryStorage(samples), batch_size=2, transform=transform(), sampling=Sampling(buckets=BUCKETS))
    assert "noise.wav" in caplog.text and "no bucket" in caplog.text
    delivered = [key for batch in loader for key in batch.keys]
    loader.close()
    assert "noise.wav" not in delivered


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"transform": ImageTransform()}, "AudioTransform or VideoTransform"),
        (
            {"transform": VideoTransform(frames=4, resize=(32, 32)), "sampling": Sampling(buckets=LengthBuckets([4, 8], shorter="pad"))},
            "cannot be padded",
        ),
        ({"transform": VideoTransform(frames=4, resize=(32, 32)), "sampling": Sampling(buckets=LengthBuckets([4.5, 8]))}, "whole number"),
    ],
)
def test_options_length_buckets_cannot_work_with_are_refused(options: dict[str, object], message: str, tmp_path: Path) -> None:
    arguments: dict[str, object] = {"batch_size": 2, "transform": transform(), "sampling": Sampling(buckets=BUCKETS), **options}
    with pytest.raises(ConfigurationError, match=message):
        Loader(speech(14), **arguments)  # type: ignore[arg-type]


def test_durations_from_a_parquet_column_give_the_buckets_the_headers_give(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from stoker.storage import open_storage

    source = speech(70)
    payloads = source.read_many(source.keys)
    seconds = media_lengths(payloads).seconds
    pq.write_table(pa.table({"audio": payloads, "seconds": seconds, "label": [0] * 70}), tmp_path / "speech.parquet", row_group_size=16)
    storage = open_storage(tmp_path / "speech.parquet")
    runs = []
    for buckets in (BUCKETS, LengthBuckets(BUCKETS.lengths, column="seconds")):
        loader = Loader(storage, batch_size=2, transform=transform(), sampling=Sampling(seed=6, in_order=True, buckets=buckets))
        runs.append([(list(batch.keys), batch.data.shape) for batch in loader])
        loader.close()
    storage.close()
    assert runs[0] == runs[1] and len({shape for _, shape in runs[0]}) == 3


def test_videos_of_every_aspect_ratio_go_in_buckets_of_shape(tmp_path: Path) -> None:
    from stoker.sampling import Buckets

    sizes = [(160, 96), (96, 160), (128, 128), (192, 96)]
    storage = MemoryStorage(
        {
            f"{index:03d}.mp4": encode_video(tmp_path, f"{index}.mp4", 12, width=sizes[index % 4][0], height=sizes[index % 4][1])
            for index in range(16)
        }
    )
    shapes = Buckets([(48, 80), (80, 48), (64, 64), (40, 80)], crop="center")
    video = VideoTransform(frames=3, stride=2, clip="start", cover=(1, 1), layout="THWC")  # the cover is each bucket's
    loader = Loader(storage, batch_size=2, transform=video, sampling=Sampling(seed=1, buckets=shapes))
    lengths = media_lengths(storage.read_many(storage.keys), "video")
    expected = dict(zip(storage.keys, shapes.assign(lengths.widths, lengths.heights).tolist()))
    seen = set()
    for batch in loader:
        height, width = batch.data.shape[2:4]
        for key, clip in zip(batch.keys, batch.data):
            assert shapes.shapes[expected[key]] == (height, width), f"{key} in the wrong bucket"
            own = VideoTransform(frames=3, stride=2, clip="start", cover=(height, width), layout="THWC")
            np.testing.assert_array_equal(clip, decode_video(storage.read_many([key])[0], own))
        seen.add((height, width))
    loader.close()
    assert len(seen) >= 3
