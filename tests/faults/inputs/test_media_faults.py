"""Bad audio and video: each is a per-sample error naming the file and saying what is wrong,
under the Loader's failure policy, and the other samples of the batch are unharmed."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.loader import FailurePolicy, Sampling
from stoker.ops import AudioTransform, BatchDecodeError, MediaDecodeError, VideoTransform, decode_audio, decode_batch, decode_video
from stoker.storage import FileStorage
from stoker_testbed.data.media_files import encode_audio, encode_video, read_counter, tone_with_clicks, wav_bytes

AUDIO = AudioTransform(sample_rate=16_000, samples=16_000, window="center")
VIDEO = VideoTransform(frames=4, stride=4, clip="center", resize=(360, 640), layout="THWC")


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    directory = tmp_path_factory.mktemp("media")
    wav = wav_bytes(tone_with_clicks(6.0, 44_100, 440.0, []), 44_100)
    return {
        "wav": wav,
        "flac": encode_audio(wav, directory, "tone.flac", ["-c:a", "flac"]),
        "mp3": encode_audio(wav, directory, "tone.mp3", ["-c:a", "libmp3lame"]),
        "mp4": encode_video(directory, "counter.mp4", 60),
        "short.mp4": encode_video(directory, "short.mp4", 10),
    }


def test_truncated_audio_is_an_error_not_silence(media: dict[str, bytes]) -> None:
    for name in ("flac", "mp3", "wav"):
        cut = media[name][: len(media[name]) * 4 // 10]  # 2.4 s of 6: the centred window needs 2.5-3.5 s
        with pytest.raises(MediaDecodeError, match=rf"'{name}-cut'.*(ends at|declares)"):
            decode_audio(cut, AUDIO, name=f"{name}-cut")


def test_truncated_video_is_an_error(media: dict[str, bytes]) -> None:
    for fraction in (0.1, 0.6):
        with pytest.raises(MediaDecodeError, match="'cut.mp4'"):
            decode_video(media["mp4"][: int(len(media["mp4"]) * fraction)], VIDEO, name="cut.mp4")


def test_empty_garbage_and_the_wrong_kind(media: dict[str, bytes]) -> None:
    with pytest.raises(MediaDecodeError, match="'empty.wav': empty input"):
        decode_audio(b"", AUDIO, name="empty.wav")
    with pytest.raises(MediaDecodeError, match="'noise.mp3': not a readable audio or video file"):
        decode_audio(np.random.default_rng(0).bytes(5000), AUDIO, name="noise.mp3")
    with pytest.raises(MediaDecodeError, match="'tone.flac': the file has no video stream"):
        decode_video(media["flac"], VIDEO, name="tone.flac")


def test_unsupported_codec_is_named(media: dict[str, bytes]) -> None:
    wav = bytearray(media["wav"])
    assert wav[20:22] == struct.pack("<H", 1)  # PCM
    wav[20:22] = struct.pack("<H", 0x7A21)  # a format tag no decoder knows
    with pytest.raises(MediaDecodeError, match="'odd.wav'.*(unsupported codec|not a readable)"):
        decode_audio(bytes(wav), AUDIO, name="odd.wav")


def test_clip_longer_than_the_video(media: dict[str, bytes]) -> None:
    with pytest.raises(MediaDecodeError, match="'short.mp4': too short: a clip of 4 frames at stride 4 spans 13 frames; the video has 10"):
        decode_video(media["short.mp4"], VIDEO, name="short.mp4")


def test_one_bad_file_leaves_the_batch_whole(media: dict[str, bytes]) -> None:
    items = [media["mp4"], media["mp4"][:100], media["mp4"]]
    with pytest.raises(BatchDecodeError) as raised:
        decode_batch(items, VIDEO, names=["a.mp4", "b.mp4", "c.mp4"], threads=2)
    assert [(failure.sample, failure.position) for failure in raised.value.failures] == [("b.mp4", 1)]
    batch = raised.value.batch
    assert list(batch.valid) == [True, False, True] and not batch.images[1].any()
    assert [read_counter(frame) for frame in batch.images[0]] == [23, 27, 31, 35]  # (60 - 13) // 2 = 23


@pytest.mark.parametrize("policy", ["skip", "zero", "raise"])
def test_loader_policies_on_bad_audio(media: dict[str, bytes], tmp_path: Path, policy: str) -> None:
    for index in range(8):
        folder = tmp_path / "audio" / f"class{index % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{index}.flac").write_bytes(media["flac"] if index != 5 else media["flac"][:300])
    loader = Loader(
        FileStorage(tmp_path / "audio", cache=False),
        batch_size=4,
        transform=AUDIO,
        failure_policy=FailurePolicy(on_error=policy),
        sampling=Sampling(seed=1),
    )
    if policy == "raise":
        with pytest.raises(Exception, match="class1/5.flac"):
            list(loader)
        return
    delivered = {}
    for batch in loader:
        assert batch.data.shape == (4, 1, 16_000)
        for key, valid, window in zip(batch.keys, batch.valid, batch.data):
            delivered[key] = valid
            assert (np.abs(window).max() > 0.2) == valid
    assert [failure.sample for failure in loader.failures] == ["class1/5.flac"]
    assert "class1/5.flac" not in delivered or not delivered["class1/5.flac"]


def test_zero_length_streams(media: dict[str, bytes]) -> None:
    """A WAV whose data chunk is empty, and an audio window from a file holding no sample."""
    empty = wav_bytes(np.zeros((0, 1), dtype=np.float32), 44_100)
    with pytest.raises(MediaDecodeError, match="'silent.wav'.*(no audio could be decoded|declares)"):
        decode_audio(empty, AUDIO, name="silent.wav")
