"""Audio and video loading, side by side on the same files and the same output.

Audio: 10 s clips (MP3 and FLAC, 44.1 kHz stereo) -> a random 4 s window, 16 kHz mono float32,
batches of 32. Video: 10 s 640x360 H.264 clips (30 fps) -> 8 frames at stride 4 from a random
start, shorter side to 224 and centre crop 224x224, uint8, batches of 8.

Loaders (recipes in testbed/stoker_testbed/peers/media_peers.py), each in a process of its own, one epoch over
files in the page cache:
- stoker: ``Loader(folder, transform=AudioTransform(...)/VideoTransform(...))``, its defaults;
- torchcodec: ``AudioDecoder(sample_rate=, num_channels=)`` / ``VideoDecoder`` with
  decoder-native Resize and CenterCrop, approximate seeking, in a DataLoader with 2 workers;
- spdl.io: ``demux_audio(timestamp=)`` + ``decode_packets`` with its filter / ``demux_video`` +
  ``sample_decode_video`` with its scale and crop filter, in spdl's pipeline, 2 decode threads;
- soundfile (libsndfile, seeking to the window) + soxr, in a DataLoader with 2 workers (audio);
- PyAV: seek, decode, ``to_ndarray(width=, height=)`` (swscale) and crop, in a DataLoader with 2
  workers (video).
decord is left out: it has no wheel for this Python (3.11) and its last release is from 2021.
Reported: clips/s, and CPU per clip (the process and its workers, user + system), both over the
epoch alone: each loader imports its modules and loads its native libraries before the clock
starts (torch alone takes seconds to import; a training job pays that once, not per epoch).

Run:  python benchmarks/media/audio_video.py [--audio 2000] [--video 200] [--only audio|video] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from stoker.bench import require_optimized_core

ROOT = Path(__file__).resolve().parents[2]
CLIP_SECONDS = 10
AUDIO_METHODS = ("stoker", "torchcodec", "spdl", "soundfile")
VIDEO_METHODS = ("stoker", "torchcodec", "spdl", "pyav")


def segments(folder: Path, count: int, source: list[str], codec: list[str], extension: str) -> None:
    """``count`` clips of CLIP_SECONDS cut by one ffmpeg run from a generated source, in two
    class folders, with a manifest of their durations and frame counts."""
    work = folder / "work"
    work.mkdir(parents=True)
    command = ["ffmpeg", "-v", "error", "-y", *source, "-t", str(count * CLIP_SECONDS), *codec]
    command += ["-f", "segment", "-segment_time", str(CLIP_SECONDS), "-reset_timestamps", "1", str(work / f"%05d.{extension}")]
    subprocess.run(command, check=True)
    names = []
    for index, path in enumerate(sorted(work.iterdir())[:count]):
        target = folder / "files" / f"c{index % 2}" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)
        names.append(str(target.relative_to(folder)))
    shutil.rmtree(work)
    manifest = {"files": names, "durations": [float(CLIP_SECONDS)] * len(names), "frames": [CLIP_SECONDS * 30] * len(names)}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def flac_files(folder: Path, count: int) -> None:
    """``count`` FLAC files written by libsndfile (complete headers: ffmpeg's segment muxer
    cannot go back to fill in a FLAC header's length), each a few tones over pink-ish noise."""
    import numpy as np
    import soundfile

    rate = 44_100
    time = np.arange(CLIP_SECONDS * rate) / rate
    generator = np.random.default_rng(0)
    names = []
    for index in range(count):
        tones = sum(0.1 * np.sin(2 * np.pi * generator.uniform(100, 4000) * time + generator.uniform(0, 6)) for _ in range(3))
        noise = np.cumsum(generator.normal(0, 0.01, size=(len(time), 2)), axis=0)
        noise -= noise.mean(axis=0)
        signal = np.clip(tones[:, None] + 0.02 * noise / max(1e-9, np.abs(noise).max()), -1, 1)
        target = folder / "files" / f"c{index % 2}" / f"{index:05d}.flac"
        target.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(target, signal, rate, subtype="PCM_16")
        names.append(str(target.relative_to(folder)))
    manifest = {"files": names, "durations": [float(CLIP_SECONDS)] * count, "frames": [0] * count}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def make_data(root: Path, audio: int, video: int, only: str | None) -> dict[str, Path]:
    sets: dict[str, Path] = {}
    noise = ["-f", "lavfi", "-i", "anoisesrc=color=pink:amplitude=0.3:sample_rate=44100,aformat=channel_layouts=stereo"]
    if only in (None, "audio"):
        sets["audio-mp3"] = root / "audio-mp3"
        segments(sets["audio-mp3"], audio, noise, ["-c:a", "libmp3lame", "-b:a", "192k"], "mp3")
        sets["audio-flac"] = root / "audio-flac"
        flac_files(sets["audio-flac"], audio)
    if only in (None, "video"):
        source = ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30"]
        codec = [
            "-c:v",
            "libx264",
            "-preset",
            "veryfast",
            "-pix_fmt",
            "yuv420p",
            "-force_key_frames",
            f"expr:gte(t,n_forced*{CLIP_SECONDS})",
        ]
        sets["video-h264"] = root / "video-h264"
        segments(sets["video-h264"], video, source, codec, "mp4")
    return sets


def run_method(method: str, kind: str, folder: Path) -> dict[str, Any]:
    """One loader's epoch in its own process, which reports its time and CPU (its own and its
    workers') from after its libraries are loaded to the end of the epoch."""
    command = [sys.executable, "-m", "stoker_testbed.peers.media_peers", method, kind, str(folder)]
    finished = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=3600)
    if finished.returncode != 0:
        lines = [line for line in finished.stderr.strip().splitlines() if line.strip() and "Warning" not in line]
        raise RuntimeError(" | ".join(lines[-4:]) if lines else f"exit {finished.returncode}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    result["cpu_per_clip_ms"] = 1000 * result["cpu_seconds"] / result["clips"]
    result["clips_per_second"] = result["clips"] / result["seconds"]
    return result


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--audio", type=int, default=2000, help="audio clips per format (MP3 and FLAC)")
    parser.add_argument("--video", type=int, default=200, help="video clips")
    parser.add_argument("--only", choices=("audio", "video"))
    parser.add_argument("--json")
    arguments = parser.parse_args()
    if shutil.which("ffmpeg") is None:
        sys.exit("benchmarks/media/audio_video.py makes its files with the ffmpeg command: apt-get install ffmpeg")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="stoker-media-") as scratch:
        sets = make_data(Path(scratch), arguments.audio, arguments.video, arguments.only)
        for name, folder in sets.items():
            for path in folder.rglob("*.*"):
                path.read_bytes()  # into the page cache: every loader reads from memory
            kind = name.split("-")[0]
            results[name] = {}
            for method in AUDIO_METHODS if kind == "audio" else VIDEO_METHODS:
                try:
                    result = run_method(method, kind, folder)
                except (RuntimeError, subprocess.TimeoutExpired) as error:
                    print(f"  {name:11s} {method:11s} left out: {error}", flush=True)
                    continue
                results[name][method] = result
                print(
                    f"{name:11s} {method:11s} {result['clips_per_second']:8.1f} clips/s  {result['cpu_per_clip_ms']:7.1f} ms CPU/clip",
                    flush=True,
                )
            peers = {method: result for method, result in results[name].items() if method != "stoker"}
            if "stoker" in results[name] and peers:
                best = max(peers, key=lambda method: peers[method]["clips_per_second"])
                ratio = results[name]["stoker"]["clips_per_second"] / peers[best]["clips_per_second"]
                print(f"{name:11s} stoker / best peer ({best}): {ratio:.2f}x", flush=True)
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONFAULTHANDLER", "1")
    main()
