"""Audio windows: resampling checked against soxr, windows placed where the seed says, clicks
landing on the sample they were written at, in every container and codec we claim."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import fftconvolve

from stoker.ops import AudioTransform, decode_audio, seconds_to_samples
from stoker_testbed.data.media_files import encode_audio, tone_with_clicks, wav_bytes

SOURCE_RATE = 44_100
RATE = 16_000
SECONDS = 10.0
CLICKS = [1.0, 4.5, 8.25]
# Lossy codecs shift nothing on purpose, but their reconstruction smears a click over a few
# samples; lossless ones put it on the sample.
LOSSY_TOLERANCE = 24  # samples at 16 kHz: 1.5 ms
FORMATS = {
    "wav": None,
    "flac": ["-c:a", "flac"],
    "mp3": ["-c:a", "libmp3lame", "-b:a", "192k"],
    "opus": ["-c:a", "libopus", "-b:a", "128k"],
    "m4a": ["-c:a", "aac", "-b:a", "192k"],
    "ogg": ["-c:a", "vorbis", "-strict", "-2", "-ac", "2", "-b:a", "192k"],
}


@pytest.fixture(scope="module")
def clicks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Silence with clicks at CLICKS, one file per format."""
    directory = tmp_path_factory.mktemp("clicks")
    signal = tone_with_clicks(SECONDS, SOURCE_RATE, 0.0, CLICKS, channels=2) * 1.0
    signal[np.abs(signal) < 0.5] = 0.0  # no tone: the clicks alone
    wav = wav_bytes(signal, SOURCE_RATE)
    return {name: wav if args is None else encode_audio(wav, directory, f"clicks.{name}", args) for name, args in FORMATS.items()}


@pytest.fixture(scope="module")
def sweep() -> tuple[np.ndarray, bytes]:
    """A mono sweep from 100 Hz to 6 kHz over 10 s (every window of it is unique), and its WAV."""
    time = np.arange(int(SECONDS * SOURCE_RATE)) / SOURCE_RATE
    phase = 2 * np.pi * (100 * time + (6000 - 100) / (2 * SECONDS) * time**2)
    signal = (0.5 * np.sin(phase)).astype(np.float32)[:, None]
    return signal, wav_bytes(signal, SOURCE_RATE)


def declared_seconds(data: bytes, directory: Path) -> float:
    """The duration ffprobe reads from the file's header (lossy containers count encoder
    padding: an MP3 of 10 s declares 10.03 s)."""
    path = directory / "probe"
    path.write_bytes(data)
    command = ["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries", "stream=duration", "-of", "csv=p=0", str(path)]
    return float(subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip())


@pytest.mark.parametrize("name", list(FORMATS))
def test_clicks_land_on_their_sample_in_every_format(clicks: dict[str, bytes], name: str, tmp_path: Path) -> None:
    length = seconds_to_samples(2.0, RATE)
    tolerance = 1 if name in ("wav", "flac") else LOSSY_TOLERANCE
    # From the start: the click at 1.0 s.
    window = decode_audio(clicks[name], AudioTransform(sample_rate=RATE, samples=length, window="start"), name=name)
    assert window.shape == (1, length) and window.dtype == np.float32
    peak = int(np.argmax(np.abs(window[0])))
    assert abs(peak - RATE) <= tolerance, f"{name}: click at {peak}, expected {RATE}"
    # Centred in the declared duration, read after a seek: the click at 4.5 s.
    window = decode_audio(clicks[name], AudioTransform(sample_rate=RATE, samples=length, window="center"), name=name)
    start = (int(declared_seconds(clicks[name], tmp_path) * RATE) - length) // 2
    peak = int(np.argmax(np.abs(window[0])))
    expected = round(4.5 * RATE) - start
    assert abs(peak - expected) <= tolerance, f"{name}: click at {peak}, expected {expected}"


def test_resampling_matches_soxr(sweep: tuple[np.ndarray, bytes]) -> None:
    import soxr

    signal, wav = sweep
    length = int(SECONDS * RATE)
    ours = decode_audio(wav, AudioTransform(sample_rate=RATE, samples=length, window="start"))[0]
    # The WAV holds 16-bit samples: resample exactly those.
    quantized = np.round(signal[:, 0] * 32767) / 32767
    reference = soxr.resample(quantized, SOURCE_RATE, RATE, quality="VHQ")
    inner = slice(200, length - 200)  # both filters' edges differ
    # The sweep reaches 6 kHz, within both filters' pass bands (to 7.2 kHz and beyond).
    error = np.abs(ours[inner] - reference[inner])
    assert error.max() < 2e-3, f"max difference {error.max():.2e} from soxr"
    assert np.sqrt(np.mean(error**2)) < 3e-4


def test_random_windows_are_exact_slices_of_the_whole(sweep: tuple[np.ndarray, bytes], tmp_path: Path) -> None:
    """A window read after a seek equals the same stretch read from the start."""
    _, wav = sweep
    flac = encode_audio(wav, tmp_path, "sweep.flac", ["-c:a", "flac"])
    whole = decode_audio(flac, AudioTransform(sample_rate=RATE, samples=int(SECONDS * RATE), window="start"))[0]
    length = seconds_to_samples(1.5, RATE)
    transform = AudioTransform(sample_rate=RATE, samples=length)
    starts = set()
    for seed in range(6):
        window = decode_audio(flac, transform, seed=seed)[0]
        assert np.array_equal(window, decode_audio(flac, transform, seed=seed)[0]), "a seed must give one window"
        start = int(np.argmax(fftconvolve(whole, window[::-1], mode="valid")))
        starts.add(start)
        assert np.abs(window - whole[start : start + length]).max() < 1e-4, f"seed {seed}: the window differs from the whole at {start}"
    assert len(starts) == 6


def test_short_files_are_zero_padded(tmp_path: Path) -> None:
    signal = tone_with_clicks(1.0, SOURCE_RATE, 440.0, [])
    window = decode_audio(wav_bytes(signal, SOURCE_RATE), AudioTransform(sample_rate=RATE, samples=2 * RATE, window="random"), seed=3)[0]
    assert np.abs(window[: RATE - 100]).max() > 0.2
    assert not window[RATE + 20 :].any()


def test_channels_mix_select_and_int16() -> None:
    stereo = wav_bytes(tone_with_clicks(2.0, SOURCE_RATE, 440.0, [], channels=2), SOURCE_RATE)  # 440 Hz left, 880 Hz right

    def dominant(samples: np.ndarray) -> float:
        spectrum = np.abs(np.fft.rfft(samples))
        return float(np.argmax(spectrum) * RATE / len(samples))

    both = decode_audio(stereo, AudioTransform(sample_rate=RATE, samples=RATE, channels=2, window="center"))
    assert both.shape == (2, RATE)
    assert dominant(both[0]) == pytest.approx(440, abs=2) and dominant(both[1]) == pytest.approx(880, abs=2)
    right = decode_audio(stereo, AudioTransform(sample_rate=RATE, samples=RATE, select_channel=1, window="center"))
    assert np.abs(right[0] - both[1]).max() < 1e-6
    mono = decode_audio(stereo, AudioTransform(sample_rate=RATE, samples=RATE, window="center"))[0]
    assert np.abs(mono - (both[0] + both[1]) / 2).max() < 0.02, "mono is the channels' mean"
    int16 = decode_audio(stereo, AudioTransform(sample_rate=RATE, samples=RATE, channels=2, window="center", dtype="int16"))
    assert int16.dtype == np.int16
    assert np.abs(int16 / 32767 - both).max() < 1e-4


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="select_channel"):
        AudioTransform(samples=10, channels=2, select_channel=0)
    with pytest.raises(ValueError, match="window"):
        AudioTransform(samples=10, window="middle")
    with pytest.raises(ValueError, match="at least one sample"):
        AudioTransform(samples=0)
    with pytest.raises(ValueError, match="dtype"):
        AudioTransform(samples=10, dtype="float64")
