"""Every Python snippet in README.md runs as written, in a folder holding the data it names
(``train/`` an ImageFolder of JPEGs, ``shards/`` the same as tar shards, ``train.bin`` tokens,
``speech/`` class folders of FLAC files and ``videos/`` of H.264 MP4s, made with ffmpeg).
A snippet preceded by ``<!-- readme-test: skip (why) -->`` is skipped, with its reason shown."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stoker.bench import image_folder
from stoker.ingest import convert_storage
from stoker.storage import FileStorage
from tests.support.media_files import encode_audio, encode_video, require_ffmpeg, tone_with_clicks, wav_bytes

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"(<!-- readme-test: skip \(([^)]*)\) -->\n)?```python\n(.*?)```", re.S)


def _snippets() -> list[tuple[str, str | None, str]]:
    """(a name from its first lines, the skip reason or None, the code) for every Python block."""
    found = []
    text = README.read_text()
    for number, match in enumerate(_BLOCK.finditer(text), start=1):
        code = match.group(3)
        line = text[: match.start(3)].count("\n") + 1
        found.append((f"README line {line} (snippet {number})", match.group(2), code))
    return found


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    images = image_folder(128, 160, 120, classes=2)
    (folder / "train").symlink_to(images, target_is_directory=True)
    with FileStorage(images) as source:
        convert_storage(source, folder / "shards", progress=False)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 3000, size=400)
    rng.integers(0, 50_000, size=int(lengths.sum()), dtype=np.uint16).tofile(folder / "train.bin")
    np.save(folder / "train.bin.offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    if shutil.which("ffmpeg"):
        wav = wav_bytes(tone_with_clicks(5.0, 16_000, 440.0, [1.0]), 16_000)
        for index in range(4):
            (folder / "speech" / f"speaker{index % 2}").mkdir(parents=True, exist_ok=True)
            encode_audio(wav, folder / "speech" / f"speaker{index % 2}", f"{index}.flac", ["-c:a", "flac"])
            (folder / "videos" / f"action{index % 2}").mkdir(parents=True, exist_ok=True)
            encode_video(folder / "videos" / f"action{index % 2}", f"{index}.mp4", 40, width=320, height=240)
    return folder


@pytest.mark.parametrize("name, skip, code", _snippets(), ids=[name for name, _, _ in _snippets()])
def test_the_snippet_runs(name: str, skip: str | None, code: str, workspace: Path) -> None:
    if skip:
        pytest.skip(skip)
    if "Transform(sample_rate" in code or "VideoTransform(" in code:
        require_ffmpeg()
    result = subprocess.run([sys.executable, "-c", code], cwd=workspace, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{name} failed:\n{code}\n{result.stderr[-3000:]}"
