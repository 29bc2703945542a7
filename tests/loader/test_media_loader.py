"""Audio and video through the Loader: folders and tar shards, keys and labels, windows and
clips seeded by (seed, epoch, position) so a resumed run delivers exactly what an unbroken one
would have."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.ingest import convert_storage
from stoker.loader import Sampling
from stoker.ops import AudioTransform, VideoTransform
from stoker.storage import FileStorage, TarShardStorage
from stoker_testbed.data.media_files import encode_audio, encode_video, read_counter, wav_bytes

VIDEO = VideoTransform(frames=3, stride=5, resize=(180, 320), layout="THWC")


@pytest.fixture(scope="module")
def video_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 counter videos (640x360) of 40-62 frames in 2 classes, converted to tar shards."""
    root = tmp_path_factory.mktemp("video")
    for index in range(12):
        folder = root / "files" / f"class{index % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        encode_video(folder, f"clip{index:02d}.mp4", 40 + 2 * index)
    with FileStorage(root / "files", cache=False) as files:
        convert_storage(files, root / "shards", shard_size=1 << 20, progress=False)
    return root / "shards"


def run(loader: Loader, stop_after: int | None = None) -> dict[str, np.ndarray]:
    clips = {}
    for count, batch in enumerate(loader, start=1):
        assert batch.data.shape[1:] == (3, 180, 320, 3)
        for key, label, clip in zip(batch.keys, batch.labels, batch.data):
            assert label == int(key.split("/")[0][-1])
            clips[key] = clip.copy()
        if count == stop_after:
            break
    return clips


def test_video_clips_from_shards_are_exact_and_resume_exactly(video_shards: Path) -> None:
    whole = run(Loader(TarShardStorage(video_shards), batch_size=4, transform=VIDEO, sampling=Sampling(seed=3, shuffle="uniform")))
    assert len(whole) == 12
    for key, clip in whole.items():
        frames = 40 + 2 * int(key.split("clip")[1][:2])
        numbers = [read_counter(frame, scale=0.5) for frame in clip]
        assert numbers == [numbers[0], numbers[0] + 5, numbers[0] + 10] and numbers[-1] < frames
    assert len({int(read_counter(clip[0], 0.5)) for clip in whole.values()}) > 3, "random clip starts"

    first = Loader(TarShardStorage(video_shards), batch_size=4, transform=VIDEO, sampling=Sampling(seed=3, shuffle="uniform"))
    delivered = run(first, stop_after=1)
    resumed = Loader(TarShardStorage(video_shards), batch_size=4, transform=VIDEO, sampling=Sampling(seed=3, shuffle="uniform"))
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    delivered.update(run(resumed))
    assert delivered.keys() == whole.keys()
    for key in whole:
        assert np.array_equal(delivered[key], whole[key]), f"{key}: the resumed clip differs"


def test_audio_windows_change_with_the_epoch_and_repeat_with_the_seed(tmp_path: Path) -> None:
    time = np.arange(3 * 16_000) / 16_000
    for index in range(6):
        folder = tmp_path / "audio" / ("speech" if index % 2 else "music")
        folder.mkdir(parents=True, exist_ok=True)
        sweep = (0.5 * np.sin(2 * np.pi * (200 + 300 * index) * time * (1 + time))).astype(np.float32)[:, None]
        encode_audio(wav_bytes(sweep, 16_000), folder, f"{index}.flac", ["-c:a", "flac"])
    transform = AudioTransform(sample_rate=8_000, samples=4_000)

    def windows(epoch: int, seed: int = 5) -> dict[str, np.ndarray]:
        loader = Loader(FileStorage(tmp_path / "audio", cache=False), batch_size=4, transform=transform, sampling=Sampling(seed=seed))
        loader.set_epoch(epoch)
        return {key: window.copy() for batch in loader for key, window in zip(batch.keys, batch.data)}

    first, again, next_epoch = windows(0), windows(0), windows(1)
    assert len(first) == 6 and all(window.shape == (1, 4_000) for window in first.values())
    assert all(np.array_equal(first[key], again[key]) for key in first)
    assert sum(not np.array_equal(first[key], next_epoch[key]) for key in first) >= 4, "a new epoch, new windows"
