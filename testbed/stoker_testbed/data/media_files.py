"""Audio and video files whose content is known, made with the `ffmpeg` command (Debian's
package): tones with clicks at known samples, and videos whose frames draw their own number.

A test that needs them calls `require_ffmpeg()`: a clear skip on a laptop without ffmpeg, a
failure in CI (STOKER_REQUIRE_SERVERS).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np

from stoker_testbed.availability import unavailable

__all__ = [
    "BIT_BLOCK",
    "COUNTER_BITS",
    "counter_frame",
    "encode_audio",
    "encode_video",
    "read_counter",
    "require_ffmpeg",
    "tone_with_clicks",
    "wav_bytes",
]

COUNTER_BITS = 10
BIT_BLOCK = 32  # each bit of the frame number is a BIT_BLOCK x BIT_BLOCK square, white for 1


def require_ffmpeg() -> str:
    """The ffmpeg command's path, or a skip (a failure in CI) saying how to install it."""
    path = shutil.which("ffmpeg")
    if path is None:
        unavailable("the ffmpeg command", "not installed (apt-get install ffmpeg)")
    return str(path)


def tone_with_clicks(seconds: float, rate: int, frequency: float, clicks: list[float], channels: int = 1) -> np.ndarray:
    """float32 (samples, channels): a sine at `frequency` (amplitude 0.25; channel c at
    frequency * (c + 1)), plus a one-sample click of 0.9 at each time in `clicks`."""
    time = np.arange(int(seconds * rate)) / rate
    signal = np.stack([0.25 * np.sin(2 * np.pi * frequency * (channel + 1) * time) for channel in range(channels)], axis=1)
    for click in clicks:
        signal[round(click * rate)] = 0.9
    return signal.astype(np.float32)


def wav_bytes(signal: np.ndarray, rate: int) -> bytes:
    """16-bit PCM WAV of float `signal` (samples, channels)."""
    pcm = np.clip(np.round(signal * 32767), -32768, 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(pcm.shape[1])
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(pcm.tobytes())
    return buffer.getvalue()


def encode_audio(wav: bytes, directory: Path, name: str, codec_args: list[str]) -> bytes:
    """`wav` encoded by ffmpeg into `directory / name` (the extension picks the container)."""
    source = directory / f"{name}.source.wav"
    source.write_bytes(wav)
    target = directory / name
    subprocess.run([require_ffmpeg(), "-v", "error", "-y", "-i", str(source), *codec_args, str(target)], check=True)
    source.unlink()
    return target.read_bytes()


def counter_frame(number: int, width: int, height: int) -> np.ndarray:
    """An RGB frame showing `number` as COUNTER_BITS squares along the top, over a gradient."""
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[:] = np.linspace(40, 200, width, dtype=np.uint8)[None, :, None]
    frame[: BIT_BLOCK * 2] = 128
    for bit in range(COUNTER_BITS):
        value = 255 if (number >> bit) & 1 else 0
        left = BIT_BLOCK // 2 + bit * BIT_BLOCK
        frame[BIT_BLOCK // 2 : BIT_BLOCK // 2 + BIT_BLOCK, left : left + BIT_BLOCK] = value
    return frame


def read_counter(frame: np.ndarray, scale: float = 1.0) -> int:
    """The number drawn by `counter_frame` in an (H, W, 3) frame, resized by `scale`."""
    number = 0
    for bit in range(COUNTER_BITS):
        row = int((BIT_BLOCK // 2 + BIT_BLOCK // 2) * scale)
        column = int((BIT_BLOCK // 2 + bit * BIT_BLOCK + BIT_BLOCK // 2) * scale)
        if frame[row, column].mean() > 128:
            number |= 1 << bit
    return number


def encode_video(
    directory: Path,
    name: str,
    frames: int,
    *,
    width: int = 640,
    height: int = 360,
    fps: int = 30,
    codec_args: tuple[str, ...] = ("-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-g", "30", "-bf", "2"),
) -> bytes:
    """A video of `frames` counter frames at `fps`, encoded by ffmpeg into `directory / name`."""
    target = directory / name
    command = [
        require_ffmpeg(),
        "-v",
        "error",
        "-y",
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgb24",
        "-s",
        f"{width}x{height}",
        "-r",
        str(fps),
        "-i",
        "-",
    ]
    command += [*codec_args, "-pix_fmt", "yuv420p", str(target)]
    raw = b"".join(counter_frame(number, width, height).tobytes() for number in range(frames))
    subprocess.run(command, input=raw, check=True)
    return target.read_bytes()
