"""`media_lengths`: files' durations, frame counts, rates and frame sizes from their headers, the
same values FFmpeg's own ``ffprobe`` reports for them, in every audio and video format we decode;
a file without such a stream or without a length gets its reason, the others their values."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import ConfigurationError
from stoker.ops import media_lengths
from stoker_testbed.data.media_files import encode_audio, encode_video, require_ffmpeg, tone_with_clicks, wav_bytes

AUDIO = {
    "wav": None,
    "flac": ["-c:a", "flac"],
    "mp3": ["-c:a", "libmp3lame", "-b:a", "128k"],
    "opus": ["-c:a", "libopus", "-b:a", "64k"],
    "m4a": ["-c:a", "aac", "-b:a", "128k"],
}
VIDEO = {
    "mp4": ("-c:v", "libx264", "-preset", "veryfast", "-g", "10"),
    "mkv": ("-c:v", "libx264", "-preset", "veryfast", "-g", "10"),
    "webm": ("-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "0", "-crf", "30"),
}


def _ffprobe(path: Path, stream: str) -> dict[str, str]:
    ffprobe = str(Path(require_ffmpeg()).with_name("ffprobe"))
    command = [ffprobe, "-v", "error", "-select_streams", stream, "-show_entries", "stream:format=duration", "-of", "json", str(path)]
    answer = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    fields: dict[str, str] = {"format_duration": answer["format"].get("duration", "0"), **answer["streams"][0]}
    return fields


@pytest.mark.parametrize("seconds", [0.7, 3.25])
def test_audio_durations_and_rates_are_ffprobes(seconds: float, tmp_path: Path) -> None:
    wav = wav_bytes(tone_with_clicks(seconds, 22_050, 330.0, []), 22_050)
    files = {name: wav if args is None else encode_audio(wav, tmp_path, f"tone.{name}", args) for name, args in AUDIO.items()}
    lengths = media_lengths(list(files.values()), "audio", threads=2)
    assert lengths.errors == [None] * len(files)
    for (name, data), duration, rate in zip(files.items(), lengths.seconds, lengths.rates):
        path = tmp_path / f"probe.{name}"
        path.write_bytes(data)
        truth = _ffprobe(path, "a:0")
        expected = float(truth.get("duration", truth["format_duration"]))
        assert duration == pytest.approx(expected, abs=1e-3), name
        assert rate == float(truth["sample_rate"]), name
        assert abs(duration - seconds) < 0.1, f"{name}: {duration} s for a {seconds} s tone"
    assert not lengths.frames.any() and not lengths.widths.any()


@pytest.mark.parametrize(("name", "frames", "fps"), [("mp4", 45, 30), ("mkv", 24, 24), ("webm", 31, 25)])
def test_video_frame_counts_rates_and_sizes_are_ffprobes(name: str, frames: int, fps: int, tmp_path: Path) -> None:
    data = encode_video(tmp_path, f"clip.{name}", frames, width=176, height=112, fps=fps, codec_args=VIDEO[name])
    lengths = media_lengths([data], "video")
    truth = _ffprobe(tmp_path / f"clip.{name}", "v:0")
    assert lengths.errors == [None]
    assert (lengths.widths[0], lengths.heights[0]) == (int(truth["width"]), int(truth["height"])) == (176, 112)
    numerator, denominator = truth["avg_frame_rate"].split("/")
    assert lengths.rates[0] == pytest.approx(int(numerator) / int(denominator)) == fps
    assert lengths.frames[0] == frames, "the frame count the header declares, or its duration times the rate"
    assert lengths.seconds[0] == pytest.approx(frames / fps)


def test_files_without_a_length_get_their_reason_and_the_others_their_values(tmp_path: Path) -> None:
    tone = wav_bytes(tone_with_clicks(1.0, 8_000, 200.0, []), 8_000)
    video = encode_video(tmp_path, "v.mp4", 10, width=64, height=64)
    lengths = media_lengths([b"", b"not media at all", video, tone], "audio")
    assert lengths.errors[0] is not None and "empty" in lengths.errors[0]
    assert lengths.errors[1] is not None and "not a readable" in lengths.errors[1]
    assert lengths.errors[2] is not None and "no audio stream" in lengths.errors[2]
    assert lengths.errors[3] is None and lengths.seconds[3] == pytest.approx(1.0)
    assert np.all(lengths.seconds[:3] == 0)
    with pytest.raises(ConfigurationError, match="audio"):
        media_lengths([tone], "image")
