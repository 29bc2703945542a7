"""One epoch of audio windows or video clips by one loader, for benchmarks/media/audio_video.py; run as
``python -m stoker_testbed.peers.media_peers METHOD KIND FOLDER`` in a process of its own, it prints one
JSON line: clips, seconds and CPU seconds of the epoch (libraries loaded before the clock starts).

Every loader makes the same output from the same files, each as its documentation recommends:
- audio: a random 4 s window of each 10 s file, 16 kHz mono float32, batches of 32;
- video: 8 frames at stride 4 from a random start, resized (shorter side 224) and centre-cropped
  to 224x224 RGB uint8, batches of 8.
Peers that decode per sample run in a torch DataLoader with 2 workers (the machine's cores);
spdl.io runs in its own thread pipeline with 2 decode threads; stoker's Loader uses its defaults.
"""

from __future__ import annotations

import json
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from stoker.loader import FailurePolicy, Sampling

RATE, WINDOW_SECONDS, AUDIO_BATCH = 16_000, 4.0, 32
FRAMES, STRIDE, SIZE, VIDEO_BATCH = 8, 4, 224, 8
WORKERS = 2


def files(folder: Path) -> tuple[list[str], dict[str, Any]]:
    """The files, in the manifest's order, and what the manifest says of them (duration, frames)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    return [str(folder / name) for name in manifest["files"]], manifest


def window_start(duration: float, seed: int) -> float:
    return random.Random(seed).uniform(0.0, max(0.0, duration - WINDOW_SECONDS))


def clip_indices(frames: int, seed: int) -> list[int]:
    span = (FRAMES - 1) * STRIDE + 1
    start = random.Random(seed).randint(0, frames - span)
    return [start + STRIDE * index for index in range(FRAMES)]


# ---- audio ----------------------------------------------------------------------------------


def soundfile_window(path: str, duration: float, seed: int) -> np.ndarray:
    """libsndfile reads only the window (it seeks), soxr resamples (its high quality)."""
    import soundfile
    import soxr

    with soundfile.SoundFile(path) as file:
        start = int(window_start(duration, seed) * file.samplerate)
        file.seek(start)
        data = file.read(int(WINDOW_SECONDS * file.samplerate), dtype="float32", always_2d=True)
        rate = file.samplerate
    mono = data.mean(axis=1)
    out = np.zeros(int(RATE * WINDOW_SECONDS), dtype=np.float32)
    resampled = soxr.resample(mono, rate, RATE)[: len(out)]
    out[: len(resampled)] = resampled
    return out[None]


def torchcodec_window(path: str, duration: float, seed: int) -> np.ndarray:
    from torchcodec.decoders import AudioDecoder

    decoder = AudioDecoder(path, sample_rate=RATE, num_channels=1)
    start = window_start(duration, seed)
    samples = decoder.get_samples_played_in_range(start, start + WINDOW_SECONDS).data.numpy()
    out = np.zeros((1, int(RATE * WINDOW_SECONDS)), dtype=np.float32)
    out[:, : min(samples.shape[1], out.shape[1])] = samples[:, : out.shape[1]]
    return out


def spdl_window(path: str, duration: float, seed: int) -> np.ndarray:
    import spdl.io

    start = window_start(duration, seed)
    length = int(RATE * WINDOW_SECONDS)
    packets = spdl.io.demux_audio(path, timestamp=(start, start + WINDOW_SECONDS))
    filter_desc = spdl.io.get_audio_filter_desc(sample_rate=RATE, num_channels=1, sample_fmt="fltp", num_frames=length)
    frames = spdl.io.decode_packets(packets, filter_desc=filter_desc)
    return spdl.io.to_numpy(spdl.io.convert_frames(frames))


# ---- video ----------------------------------------------------------------------------------


def torchcodec_clip(path: str, frames: int, seed: int) -> np.ndarray:
    from torchcodec.decoders import VideoDecoder
    from torchcodec.transforms import CenterCrop, Resize

    # Decoder-native resize and crop; approximate seek mode (no scan of the whole file), as the
    # documentation recommends for constant-frame-rate files.
    decoder = VideoDecoder(path, seek_mode="approximate", transforms=[Resize(size=(SIZE, SIZE * 16 // 9)), CenterCrop(size=(SIZE, SIZE))])
    return decoder.get_frames_at(clip_indices(frames, seed)).data.numpy()


def pyav_clip(path: str, frames: int, seed: int) -> np.ndarray:
    import av

    indices = clip_indices(frames, seed)
    wanted = set(indices)
    out = np.empty((FRAMES, 3, SIZE, SIZE), dtype=np.uint8)
    width = SIZE * 16 // 9
    left = (width - SIZE) // 2
    with av.open(path) as container:
        stream = container.streams.video[0]
        rate = float(stream.average_rate)
        container.seek(int(indices[0] / rate / stream.time_base), stream=stream, backward=True)
        written = 0
        for frame in container.decode(stream):
            index = round(float(frame.pts * stream.time_base) * rate)
            if index in wanted:
                rgb = frame.to_ndarray(width=width, height=SIZE, format="rgb24")  # swscale
                out[written] = rgb[:, left : left + SIZE].transpose(2, 0, 1)
                written += 1
                if written == FRAMES:
                    break
    return out


def spdl_clip(path: str, frames: int, seed: int) -> np.ndarray:
    import spdl.io

    indices = clip_indices(frames, seed)
    packets = spdl.io.demux_video(path)
    filter_desc = spdl.io.get_video_filter_desc(
        scale_width=SIZE * 16 // 9, scale_height=SIZE, scale_mode=None, crop_width=SIZE, crop_height=SIZE, pix_fmt="rgb24"
    )
    decoded = spdl.io.sample_decode_video(packets, indices, filter_desc=filter_desc)
    return spdl.io.to_numpy(spdl.io.convert_frames(decoded)).transpose(0, 3, 1, 2)


# ---- runners --------------------------------------------------------------------------------

PER_SAMPLE = {
    ("soundfile", "audio"): soundfile_window,
    ("torchcodec", "audio"): torchcodec_window,
    ("torchcodec", "video"): torchcodec_clip,
    ("pyav", "video"): pyav_clip,
}
SPDL = {"audio": spdl_window, "video": spdl_clip}


class _Samples:
    """A map-style dataset over the files, for the DataLoader."""

    def __init__(self, function: Any, paths: list[str], facts: list[float]) -> None:
        self.function, self.paths, self.facts = function, paths, facts

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Any:
        import torch

        return torch.from_numpy(self.function(self.paths[index], self.facts[index], index))


def cpu_seconds() -> float:
    """CPU time of this process and its exited children (DataLoader workers), user + system."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load_libraries(method: str) -> None:
    """Import the loader's modules and load its native libraries before the clock starts, so
    that an epoch's time is loading, not process start-up (torch alone takes seconds to
    import). DataLoader workers are forked after this, so they start with it done too."""
    if method == "stoker":
        import stoker.ops  # noqa: F401 - loads the native core, and FFmpeg's libraries with it
    elif method == "spdl":
        import spdl.io
        import spdl.io.utils
        import spdl.pipeline  # noqa: F401

        spdl.io.utils.get_ffmpeg_versions()  # spdl.io loads its FFmpeg extension on first use
    else:
        import importlib

        import torch.utils.data  # noqa: F401

        modules = {"torchcodec": ["torchcodec.decoders"], "soundfile": ["soundfile", "soxr"], "pyav": ["av"]}[method]
        for module in modules:
            importlib.import_module(module)


def run(method: str, kind: str, folder: Path) -> dict[str, Any]:
    paths, manifest = files(folder)
    facts = manifest["durations"] if kind == "audio" else manifest["frames"]
    batch_size = AUDIO_BATCH if kind == "audio" else VIDEO_BATCH
    shape = (1, int(RATE * WINDOW_SECONDS)) if kind == "audio" else (FRAMES, 3, SIZE, SIZE)
    clips = 0
    load_libraries(method)
    began, cpu_before = time.perf_counter(), cpu_seconds()
    if method == "stoker":
        from stoker import Loader
        from stoker.ops import AudioTransform, VideoTransform

        transform: Any = (
            AudioTransform(sample_rate=RATE, samples=int(RATE * WINDOW_SECONDS))
            if kind == "audio"
            else VideoTransform(frames=FRAMES, stride=STRIDE, resize_shorter=SIZE, center_crop=(SIZE, SIZE), layout="TCHW")
        )
        for batch in Loader(
            str(folder / "files"),
            batch_size=batch_size,
            transform=transform,
            sampling=Sampling(shuffle="uniform"),
            failure_policy=FailurePolicy(on_error="raise"),
        ):
            assert batch.data.shape[1:] == shape, batch.data.shape
            clips += len(batch)
    elif method == "spdl":
        from spdl.pipeline import PipelineBuilder

        function = SPDL[kind]
        order = list(range(len(paths)))
        random.Random(0).shuffle(order)
        pipeline = (
            PipelineBuilder()
            .add_source(order)
            .pipe(lambda index: function(paths[index], facts[index], index), concurrency=WORKERS)
            .aggregate(batch_size)
            .pipe(np.stack)
            .add_sink(4)
            .build(num_threads=WORKERS + 1)
        )
        with pipeline.auto_stop():
            for batch in pipeline:
                assert batch.shape[1:] == shape, batch.shape
                clips += len(batch)
    else:
        import torch.utils.data

        dataset = _Samples(PER_SAMPLE[method, kind], paths, facts)
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=WORKERS, prefetch_factor=4)
        for batch in loader:
            assert tuple(batch.shape[1:]) == shape, batch.shape
            clips += len(batch)
    # The DataLoader's workers have exited (and were waited for) once its iteration ended.
    return {"clips": clips, "seconds": time.perf_counter() - began, "cpu_seconds": cpu_seconds() - cpu_before}


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2], Path(sys.argv[3]))))
