"""What a user does first with a fresh ``pip install stoker``, run by `test_wheel.py` with the
fresh venv's Python (it may import stoker, numpy and the standard library only).

    python wheel_check.py without-ffmpeg FOLDER   # FFmpeg, Rust, CMake and NASM must be invisible
    python wheel_check.py with-ffmpeg WAV MP4     # decode an audio window and a video clip

Prints one JSON line of findings; exits non-zero (with a traceback) when a check fails.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

import stoker
from stoker.loader import Sampling
from stoker.ops import AudioTransform, ImageTransform, MediaUnavailableError, VideoTransform, decode_audio, decode_video


def installed_from_the_wheel() -> str:
    location = Path(stoker.__file__).resolve()
    assert Path(sys.prefix).resolve() in location.parents, f"stoker imported from {location}, not from the venv {sys.prefix}"
    return str(location.parent)


def without_ffmpeg(folder: Path) -> dict[str, object]:
    for tool in ("cargo", "rustc", "cmake", "nasm"):
        assert shutil.which(tool) is None, f"{tool} is visible at {shutil.which(tool)}: the check must run without build tools"
    try:
        ctypes.CDLL("libavcodec.so.59")
    except OSError as error:
        hidden = str(error)
    else:
        raise AssertionError("libavcodec.so.59 loaded: FFmpeg is not hidden")
    # A JPEG batch through the Loader, from JPEGs the core encodes itself.
    from stoker.bench import make_jpegs

    for index, data in enumerate(make_jpegs(48, 160, 120)):
        (folder / f"class_{index % 3}").mkdir(parents=True, exist_ok=True)
        (folder / f"class_{index % 3}" / f"{index:03d}.jpg").write_bytes(data)
    transform = ImageTransform(resize_shorter=64, center_crop=(56, 56), layout="CHW")
    seen = 0
    for batch in stoker.Loader(str(folder), batch_size=16, transform=transform, sampling=Sampling(shuffle="uniform")):
        assert batch.data.shape[1:] == (3, 56, 56) and batch.data.dtype == np.uint8, batch.data.shape
        seen += len(batch.keys)
    assert seen == 48, seen
    # The main job, with no peer installed.
    bench = subprocess.run(
        [str(Path(sys.executable).parent / "stoker"), "bench", "--images", "200", "--duration", "3", "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "images/s" in bench.stdout, bench.stdout
    # Audio and video: one clear error, at the first call and when a Loader is built.
    try:
        decode_audio(b"RIFF....WAVE", AudioTransform(samples=160))
    except MediaUnavailableError as error:
        message = str(error)
    else:
        raise AssertionError("audio decoded without FFmpeg")
    try:
        stoker.Loader(str(folder), batch_size=4, transform=VideoTransform(frames=2, resize=(32, 32)))
    except MediaUnavailableError:
        pass
    else:
        raise AssertionError("a video Loader was built without FFmpeg")
    return {
        "installed_at": installed_from_the_wheel(),
        "ffmpeg_hidden": hidden,
        "loader_samples": seen,
        "bench_tail": bench.stdout.strip().splitlines()[-12:],
        "media_error": message,
    }


def with_ffmpeg(wav: Path, mp4: Path) -> dict[str, object]:
    from stoker.ops._media_backend import media_backend

    audio = decode_audio(wav.read_bytes(), AudioTransform(samples=8000), name=wav.name)
    assert audio.shape == (1, 8000) and audio.dtype == np.float32 and np.abs(audio).max() > 0.05, (audio.shape, np.abs(audio).max())
    video = decode_video(mp4.read_bytes(), VideoTransform(frames=4, resize=(48, 64)), name=mp4.name)
    assert video.shape == (4, 3, 48, 64) and video.dtype == np.uint8 and video.any(), video.shape
    return {
        "installed_at": installed_from_the_wheel(),
        "ffmpeg": media_backend().ffmpeg_versions(),
        "audio_shape": list(audio.shape),
        "video_shape": list(video.shape),
    }


def main() -> None:
    mode, *paths = sys.argv[1:]
    findings = without_ffmpeg(Path(paths[0])) if mode == "without-ffmpeg" else with_ffmpeg(Path(paths[0]), Path(paths[1]))
    findings["path"] = os.environ.get("PATH", "")
    # A free-threaded interpreter turns the GIL on when it loads a module that needs it.
    findings["gil"] = getattr(sys, "_is_gil_enabled", lambda: True)()
    from stoker import _native

    findings["native"] = Path(_native.__file__).name
    print(json.dumps(findings))


if __name__ == "__main__":
    main()
