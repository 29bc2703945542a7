"""Video clips: every frame of a clip is the one the sampling asked for (each frame draws its
own number), after a seek or from the start, in each codec we claim, in every layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stoker.ops import VideoTransform, decode_video
from stoker_testbed.data.media_files import counter_frame, encode_video, read_counter

FRAMES = 90  # 3 s at 30 fps, a keyframe every 30 frames, B-frames
FULL = {"resize": (360, 640), "layout": "THWC"}
CODECS = {
    "h264.mp4": ("-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-g", "30", "-bf", "2"),
    "h264.mkv": ("-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-g", "30", "-bf", "2"),
    "hevc.mp4": ("-c:v", "libx265", "-preset", "ultrafast", "-crf", "18", "-x265-params", "keyint=30:log-level=error"),
    "vp9.webm": ("-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-crf", "20", "-b:v", "0", "-g", "30"),
}


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    directory = tmp_path_factory.mktemp("videos")
    return {name: encode_video(directory, name, FRAMES, codec_args=args) for name, args in CODECS.items()}


def counters(clip: np.ndarray, scale: float = 1.0) -> list[int]:
    return [read_counter(frame, scale) for frame in clip]


@pytest.mark.parametrize("name", list(CODECS))
def test_stride_clips_from_the_start_middle_and_at_random(videos: dict[str, bytes], name: str) -> None:
    data = videos[name]
    start = decode_video(data, VideoTransform(frames=8, stride=4, clip="start", **FULL))
    assert start.shape == (8, 360, 640, 3) and start.dtype == np.uint8
    assert counters(start) == list(range(0, 29, 4))
    middle = decode_video(data, VideoTransform(frames=8, stride=4, clip="center", **FULL))
    assert counters(middle) == list(range(30, 59, 4))  # (90 - 29) // 2 = 30: a keyframe
    firsts = set()
    for seed in range(8):
        clip = counters(decode_video(data, VideoTransform(frames=8, stride=4, **FULL), seed=seed))
        assert clip == list(range(clip[0], clip[0] + 29, 4)) and 0 <= clip[0] <= FRAMES - 29
        firsts.add(clip[0])
    assert len(firsts) > 3, "random clips start at different frames"


def test_late_clips_seek_past_keyframes(videos: dict[str, bytes]) -> None:
    """Clips starting between keyframes (after a seek to the one before) still get exact frames."""
    data = videos["h264.mp4"]
    for seed in range(20):
        clip = counters(decode_video(data, VideoTransform(frames=4, stride=2, **FULL), seed=seed))
        assert clip == [clip[0] + 2 * index for index in range(4)]


def test_fps_and_uniform_sampling(videos: dict[str, bytes]) -> None:
    data = videos["h264.mp4"]
    at_ten = counters(decode_video(data, VideoTransform(frames=5, fps=10, clip="start", **FULL)))
    assert at_ten == [0, 3, 6, 9, 12]
    uniform = counters(decode_video(data, VideoTransform(frames=6, clip="uniform", **FULL)))
    assert uniform == [7, 22, 37, 52, 67, 82]


def test_layouts_and_resize_agree(videos: dict[str, bytes]) -> None:
    data = videos["h264.mp4"]
    options = {"frames": 3, "stride": 5, "clip": "center", "resize": (180, 320)}
    packed = decode_video(data, VideoTransform(layout="THWC", **options))
    planar = decode_video(data, VideoTransform(layout="TCHW", **options))
    channels_first = decode_video(data, VideoTransform(layout="CTHW", **options))
    assert planar.shape == (3, 3, 180, 320) and channels_first.shape == (3, 3, 180, 320)
    assert np.array_equal(planar.transpose(0, 2, 3, 1), packed)
    assert np.array_equal(channels_first.transpose(1, 0, 2, 3), planar)
    assert counters(packed, scale=0.5) == [39, 44, 49]  # (90 - 11) // 2 = 39


def test_colours_match_the_source(videos: dict[str, bytes]) -> None:
    """Below the counter, frame 0 is a grey ramp: YUV 4:2:0 and back lose under a level on average."""
    frame = decode_video(videos["h264.mp4"], VideoTransform(frames=1, clip="start", **FULL))[0].astype(int)
    source = counter_frame(0, 640, 360).astype(int)
    difference = frame[100:] - source[100:]
    assert abs(difference.mean()) < 0.3 and np.abs(difference).mean() < 1.0


def test_shorter_side_and_centre_crop_take_the_middle(videos: dict[str, bytes]) -> None:
    data = videos["h264.mp4"]
    full = decode_video(data, VideoTransform(frames=1, clip="start", **FULL))[0].astype(float)
    crop = decode_video(data, VideoTransform(frames=1, clip="start", resize_shorter=180, center_crop=(180, 180), layout="THWC"))[0]
    # 640x360 to 320x180, centre 180x180 = source columns 140..500, halved.
    expected = full[:, 140:500].reshape(180, 2, 180, 2, 3).mean(axis=(1, 3))
    assert crop.shape == (180, 180, 3)
    assert np.abs(crop - expected).mean() < 4


def test_cover_resizes_to_just_cover_and_crops_the_overhang(videos: dict[str, bytes]) -> None:
    data = videos["h264.mp4"]
    full = decode_video(data, VideoTransform(frames=1, clip="start", **FULL))[0].astype(float)
    # 640x360 into 180x180: scaled to 320x180, the middle 180 columns (source 140..500) kept.
    square = decode_video(data, VideoTransform(frames=1, clip="start", cover=(180, 180), layout="THWC"))[0]
    assert square.shape == (180, 180, 3)
    assert np.abs(square - full[:, 140:500].reshape(180, 2, 180, 2, 3).mean(axis=(1, 3))).mean() < 4
    # A tall bucket from a wide video: the full height, the middle 202 columns (360 x 9/16).
    tall = decode_video(data, VideoTransform(frames=1, clip="start", cover=(320, 180), layout="THWC"))[0]
    assert tall.shape == (320, 180, 3)
    middle = full[:, 219:421]  # 202 source columns around the centre, to 180 output columns
    assert np.abs(tall.mean(axis=(0, 2)) - np.interp(np.linspace(0, 201, 180), np.arange(202), middle.mean(axis=(0, 2)))).mean() < 4
    same_shape = decode_video(data, VideoTransform(frames=1, clip="start", cover=(180, 320), layout="THWC"))[0]
    resized = decode_video(data, VideoTransform(frames=1, clip="start", resize=(180, 320), layout="THWC"))[0]
    assert np.array_equal(same_shape, resized), "the video's own aspect ratio: cover is a plain resize"
    random = {
        decode_video(data, VideoTransform(frames=1, clip="start", cover=(180, 180), cover_crop="random", layout="THWC"), seed=seed)[
            0
        ].tobytes()
        for seed in range(6)
    }
    assert len(random) > 1, "a random crop's place follows the seed"
    with pytest.raises(ValueError, match="no resize or crop"):
        VideoTransform(frames=1, cover=(8, 8), resize=(8, 8))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="one frame size"):
        VideoTransform(frames=4, resize_shorter=128)
    with pytest.raises(ValueError, match="stride or fps"):
        VideoTransform(frames=4, stride=2, fps=10, resize=(8, 8))
    with pytest.raises(ValueError, match="layout"):
        VideoTransform(frames=4, resize=(8, 8), layout="NCHW")
    with pytest.raises(ValueError, match="uniform"):
        VideoTransform(frames=4, stride=3, clip="uniform", resize=(8, 8))


def test_transforms_pickle(tmp_path: Path) -> None:
    import pickle

    from stoker.ops import AudioTransform

    for transform in (
        VideoTransform(frames=8, fps=7.5, clip="center", resize_shorter=128, center_crop=(112, 112), layout="CTHW"),
        VideoTransform(frames=8, stride=2, random_crop=(112, 96), flip_probability=0.5),
        VideoTransform(frames=4, clip="uniform", resize=(64, 48)),
        AudioTransform(sample_rate=8000, samples=400, select_channel=1, window="start", dtype="int16"),
    ):
        assert repr(pickle.loads(pickle.dumps(transform))) == repr(transform)


def test_random_crops_and_flips_are_per_clip_and_seeded(videos: dict[str, bytes]) -> None:
    """A random crop is the same window of the source in every frame of a clip, placed by the
    seed; a flipped clip is the unflipped one mirrored."""
    data = videos["h264.mp4"]
    options = {"frames": 3, "stride": 10, "clip": "start", "layout": "THWC"}
    full = decode_video(data, VideoTransform(**options, resize=(360, 640)))
    places = set()
    for seed in range(6):
        crop = decode_video(data, VideoTransform(random_crop=(120, 200), **options), seed=seed)
        assert crop.shape == (3, 120, 200, 3)
        # No resize: the crop is a window of the full frames, the same for all three frames.
        matches = [
            (top, left)
            for top in range(0, 360 - 120 + 1)
            for left in range(0, 640 - 200 + 1, 1)
            if crop[0, 0, 0, 0] == full[0, top, left, 0]
            and np.array_equal(crop[0, :2, :2], full[0, top : top + 2, left : left + 2])
            and np.array_equal(crop, full[:, top : top + 120, left : left + 200])
        ]
        assert len(matches) >= 1, f"seed {seed}: the crop is no window of the frames"
        places.add(matches[0])
        again = decode_video(data, VideoTransform(random_crop=(120, 200), **options), seed=seed)
        assert np.array_equal(crop, again)
    assert len(places) > 2, "the crop moves with the seed"
    plain = decode_video(data, VideoTransform(center_crop=(120, 200), **options), seed=1)
    flipped = [decode_video(data, VideoTransform(center_crop=(120, 200), flip_probability=1.0, **options), seed=seed) for seed in (1, 2)]
    for clip in flipped:
        assert np.array_equal(clip, plain[:, :, ::-1])
    planar = decode_video(data, VideoTransform(center_crop=(120, 200), flip_probability=1.0, **{**options, "layout": "TCHW"}), seed=1)
    assert np.array_equal(planar.transpose(0, 2, 3, 1), flipped[0])
    with pytest.raises(ValueError, match="exclusive"):
        VideoTransform(frames=2, center_crop=(8, 8), random_crop=(8, 8))
    with pytest.raises(ValueError, match="flip_probability"):
        VideoTransform(frames=2, center_crop=(8, 8), flip_probability=2.0)
