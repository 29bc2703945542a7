"""Hostile audio and video headers: each becomes a named bad sample, never an abort, a hang or a
multi-GB allocation. Every case runs in a child process (an abort there cannot take the test run
down) that decodes the files with ``on_error="zero"`` and reports each file's error and its own
peak resident memory.

Before the bounds (issue 31): a WAV declaring 1,000,000,007 Hz aborted the process (a 132 GB
filter bank); odd rates built banks for seconds, kept forever (RSS 68 MB to 1.3 GB over a dataset
of odd rates); a LIST chunk declaring 2 GB was allocated; a VP9 stream declaring 16000x16000
allocated 1.6 GB a clip.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from stoker_testbed.data.media_files import require_ffmpeg, tone_with_clicks, wav_bytes

# Peak RSS allowed for a child that imports stoker, loads FFmpeg and decodes the files: a few
# times its baseline (about 100 MB), far below what each case took before (GBs).
MAX_RSS_MB = 400
CHILD = """
import json, sys
from pathlib import Path
from stoker.ops import AudioTransform, VideoTransform, decode_batch
kind, paths = sys.argv[1], [Path(path) for path in sys.argv[2:]]
transform = AudioTransform(sample_rate=16000, samples=1600, window="start") if kind == "audio" else VideoTransform(frames=2, resize=(32, 32))
errors = {}
for path in paths:
    result = decode_batch([path.read_bytes()], transform, names=[path.name], on_error="zero")
    errors[path.name] = result.failures[0].message if result.failures else None
# VmHWM, not ru_maxrss: the latter starts from the parent's size at fork, and pytest's grows.
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"errors": errors, "max_rss_mb": peak / 1024}))
"""


def _decode_in_child(kind: str, paths: list[Path]) -> dict:
    finished = subprocess.run([sys.executable, "-c", CHILD, kind, *map(str, paths)], capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, (
        f"the child died (signal {-finished.returncode})" if finished.returncode < 0 else finished.stderr[-3000:]
    )
    report: dict = json.loads(finished.stdout.strip().splitlines()[-1])
    assert report["max_rss_mb"] < MAX_RSS_MB, report
    return report


def _wav_at(rate: int, path: Path, seconds: float = 0.5) -> Path:
    """A 16-bit mono WAV whose header declares ``rate`` Hz (its data is a tone of 0.5 s at 8 kHz)."""
    data = bytearray(wav_bytes(tone_with_clicks(seconds, 8000, 440.0, []), 8000))
    struct.pack_into("<II", data, 24, rate, (rate * 2) & 0xFFFF_FFFF)  # fmt: sample rate, byte rate
    path.write_bytes(bytes(data))
    return path


def test_absurd_sample_rates_are_named_errors_without_an_abort(tmp_path: Path) -> None:
    files = [_wav_at(rate, tmp_path / f"rate-{rate}.wav") for rate in (1_000_000_007, 4_294_967_295, 3, 768_001)]
    report = _decode_in_child("audio", files)
    # Each is a named error: stoker's rate check, or FFmpeg's own refusal of a negative rate.
    assert all(error is not None for error in report["errors"].values()), report
    assert "1000000007 Hz" in report["errors"]["rate-1000000007.wav"], report
    assert "768001 Hz" in report["errors"]["rate-768001.wav"], report
    assert "ratio" in report["errors"]["rate-3.wav"], report


def test_odd_rates_decode_with_a_bounded_filter_and_a_bounded_cache(tmp_path: Path) -> None:
    # Primes and near-primes: exact filter banks of 16,000 phases each; 60 distinct ones.
    rates = [7_919, 99_991, 383_987, 767_999] + [20_011 + 2 * index for index in range(56)]
    report = _decode_in_child("audio", [_wav_at(rate, tmp_path / f"odd-{rate}.wav", seconds=0.2) for rate in rates])
    assert all(error is None for error in report["errors"].values()), report["errors"]


def test_a_riff_chunk_larger_than_the_file_is_refused_before_allocation(tmp_path: Path) -> None:
    good = bytearray(wav_bytes(tone_with_clicks(0.5, 16_000, 440.0, []), 16_000))
    info = b"INFO" + b"INAM" + struct.pack("<I", 0x7FFF_FFF0) + b"tone"
    listed = good[:36] + b"LIST" + struct.pack("<I", len(info)) + info + good[36:]
    struct.pack_into("<I", listed, 4, len(listed) - 8)
    huge_list = good[:36] + b"LIST" + struct.pack("<I", 0x7FFF_FFFF) + b"INFO" + good[36:]
    paths = []
    for name, data in (("huge-entry.wav", listed), ("huge-list.wav", huge_list)):
        (tmp_path / name).write_bytes(bytes(data))
        paths.append(tmp_path / name)
    report = _decode_in_child("audio", paths)
    assert "'INAM'" in report["errors"]["huge-entry.wav"], report
    assert "'LIST'" in report["errors"]["huge-list.wav"], report


def _vp9_ivf(path: Path) -> bytes:
    subprocess.run(
        [
            require_ffmpeg(),
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=64x64:rate=10",
            "-frames:v",
            "4",
            "-c:v",
            "libvpx-vp9",
            str(path),
        ],
        check=True,
    )
    return path.read_bytes()


def _set_bits(data: bytearray, bit_offset: int, width: int, value: int) -> None:
    for index in range(width):
        bit = (value >> (width - 1 - index)) & 1
        byte, shift = divmod(bit_offset + index, 8)
        data[byte] = (data[byte] & ~(1 << (7 - shift))) | (bit << (7 - shift))


def test_a_video_declaring_16000x16000_frames_is_refused_before_they_are_allocated(tmp_path: Path) -> None:
    # The first keyframe's uncompressed header, after IVF's 32-byte file header and 12-byte frame
    # header. Profile 0: 8 bits of marker, profile and frame flags, the 3-byte sync code, 3 bits of
    # colour space and 1 of range, then width - 1 and height - 1 (16 bits each). (A container's
    # own width and height fields do not matter: probing replaces them with the bitstream's.)
    # The ffmpeg command decodes this file's first frame in 1.6 GB of memory.
    bitstream = bytearray(_vp9_ivf(tmp_path / "small.ivf"))
    frame = 32 + 12
    assert bitstream[frame + 1 : frame + 4] == b"\x49\x83\x42", "not a VP9 keyframe where expected"
    _set_bits(bitstream, frame * 8 + 36, 16, 16000 - 1)
    _set_bits(bitstream, frame * 8 + 52, 16, 16000 - 1)
    path = tmp_path / "bitstream-16000.ivf"
    path.write_bytes(bytes(bitstream))
    report = _decode_in_child("video", [path])
    assert report["errors"]["bitstream-16000.ivf"] is not None, report


@pytest.mark.parametrize("frames", [2])
def test_a_clip_past_its_pixel_budget_is_a_named_error(tmp_path: Path, frames: int) -> None:
    from stoker.ops import MediaDecodeError, VideoTransform, decode_video

    data = _vp9_ivf(tmp_path / "small.ivf")
    # 64x64 frames: a clip of 600,000 frames would decode 2.4e9 pixels, past the 2^31 budget.
    with pytest.raises(MediaDecodeError, match="pixel budget"):
        decode_video(data, VideoTransform(frames=600_000, resize=(8, 8)), name="long-clip.ivf")
    assert decode_video(data, VideoTransform(frames=frames, resize=(8, 8))).shape == (frames, 3, 8, 8)
