"""Decoding audio and video many times holds its memory level: nothing a sample allocates
(FFmpeg's packets, frames, contexts, our buffers) outlives it. A leak of a few hundred kilobytes
a sample fills a training job's memory within an epoch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from stoker.ops import AudioTransform, VideoTransform, decode_audio, decode_video
from stoker_testbed.data.media_files import encode_audio, encode_video, tone_with_clicks, wav_bytes

WARM_UP = 40
MEASURED = 400
# What the allocator may keep on top of a warmed-up level (arenas settle in steps); a leak of
# 100 kB a sample would add 40 MB over MEASURED samples.
ALLOWED_GROWTH = 16 << 20


def resident_bytes() -> int:
    """This process's resident memory now (not its peak)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096


def growth(decode: Callable[[int], np.ndarray]) -> int:
    """Resident memory added by MEASURED decodes after WARM_UP of them."""
    for seed in range(WARM_UP):
        decode(seed)
    before = resident_bytes()
    for seed in range(WARM_UP, WARM_UP + MEASURED):
        decode(seed)
    return resident_bytes() - before


pytestmark = pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads resident memory from /proc (Linux)")


@pytest.mark.parametrize("codec", [["-c:a", "flac"], ["-c:a", "libmp3lame", "-b:a", "192k"]], ids=["flac", "mp3"])
def test_audio_windows_do_not_accumulate_memory(codec: list[str], tmp_path: Path) -> None:
    signal = tone_with_clicks(10.0, 44_100, 440.0, [], channels=2)
    data = encode_audio(wav_bytes(signal, 44_100), tmp_path, "tone." + ("flac" if "flac" in codec else "mp3"), codec)
    transform = AudioTransform(sample_rate=16_000, samples=64_000)
    added = growth(lambda seed: decode_audio(data, transform, seed=seed))
    assert added < ALLOWED_GROWTH, f"{MEASURED} audio windows added {added >> 20} MiB of resident memory"


def test_video_clips_do_not_accumulate_memory(tmp_path: Path) -> None:
    data = encode_video(tmp_path, "counter.mp4", 90)
    transform = VideoTransform(frames=8, stride=4, resize=(112, 112))
    added = growth(lambda seed: decode_video(data, transform, seed=seed))
    assert added < ALLOWED_GROWTH, f"{MEASURED} video clips added {added >> 20} MiB of resident memory"
