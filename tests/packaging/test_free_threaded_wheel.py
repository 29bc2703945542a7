"""The free-threaded wheel (cp314t, built by ``make wheel`` beside the abi3 one) installs into a
fresh venv of free-threaded CPython 3.14 and runs there with the GIL off: the same first steps as
the abi3 wheel's check (`wheel_check.py`: images through the Loader and ``stoker bench`` with
FFmpeg hidden, then a WAV and an MP4 decoded with it), each ending with the GIL still off and the
native parts built for that interpreter.

Needs the 3.14t interpreter (``make test-free-threaded`` builds it) and, for the first check,
root and ``unshare``: skips on a laptop, failures in CI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from stoker_testbed.availability import unavailable
from stoker_testbed.data.media_files import encode_video, require_ffmpeg, tone_with_clicks, wav_bytes
from tests.packaging.test_wheel import ALLOWED_NEEDED, MAX_WHEEL_BYTES, ROOT, _elf_facts, _hidden_paths, _run_check

pytestmark = pytest.mark.timeout(1200)
FREE_THREADED_VENV = ROOT / ".venv-freethreaded"
SUFFIX = ".cpython-314t-x86_64-linux-gnu.so"


@pytest.fixture(scope="module")
def wheel() -> Path:
    """The cp314t wheel ``make test`` built (``STOKER_BUILT_FREE_THREADED_WHEEL``), or dist/'s."""
    built = os.environ.get("STOKER_BUILT_FREE_THREADED_WHEEL")
    if built:
        assert Path(built).is_file(), f"STOKER_BUILT_FREE_THREADED_WHEEL={built} names no file"
        return Path(built)
    found = sorted((ROOT / "dist").glob("stoker-*-cp314t-*.whl"))
    if not found:
        unavailable("the free-threaded wheel", "none in dist/ (make wheel builds it)")
    return found[-1]


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv of the free-threaded interpreter with only the wheel (and numpy, tqdm) in it."""
    python = FREE_THREADED_VENV / "bin" / "python"
    if not python.exists():
        unavailable("free-threaded CPython 3.14", f"no {python} (make test-free-threaded builds it)")
    base = subprocess.run([str(python), "-c", "import sys; print(sys._base_executable)"], capture_output=True, text=True, check=True)
    uv = Path(sys.executable).parent / "uv"
    venv = tmp_path_factory.mktemp("fresh-free-threaded") / "venv"
    subprocess.run([str(uv), "venv", "--quiet", "--python", base.stdout.strip(), str(venv)], check=True)
    installed = subprocess.run(
        [str(uv), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(wheel)], capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stderr
    return venv


def test_the_wheel_is_cp314t_manylinux_2_28_with_natives_for_it(wheel: Path) -> None:
    assert wheel.name.endswith("-cp314-cp314t-manylinux_2_28_x86_64.whl"), wheel.name
    assert wheel.stat().st_size <= MAX_WHEEL_BYTES, f"{wheel.name} is {wheel.stat().st_size / 1e6:.1f} MB"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert any(name.endswith("/licenses/THIRD_PARTY_NOTICES.md") for name in names), names
        natives = [name for name in names if name.endswith(".so")]
        assert f"stoker/_native{SUFFIX}" in natives and f"stoker/_media/ffmpeg5/_media{SUFFIX}" in natives, natives
        for name in natives:
            needed, glibc = _elf_facts(archive.read(name))
            assert needed <= ALLOWED_NEEDED, f"{name} needs {sorted(needed - ALLOWED_NEEDED)}"
            assert tuple(map(int, glibc.split("."))) <= (2, 28), f"{name} needs GLIBC_{glibc}"


def test_a_fresh_install_loads_images_and_runs_the_bench_with_the_gil_off(fresh_venv: Path, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        unavailable("a mount namespace to hide FFmpeg (root and unshare)", f"uid {os.geteuid()}")
    findings = _run_check(fresh_venv, ["without-ffmpeg", str(tmp_path / "images")], hide=_hidden_paths(), cwd=tmp_path)
    assert findings["loader_samples"] == 48 and "images/s" in " ".join(findings["bench_tail"])  # type: ignore[arg-type]
    assert findings["gil"] is False and findings["native"] == f"_native{SUFFIX}", findings


def test_a_fresh_install_decodes_a_wav_and_an_mp4_with_the_gil_off(fresh_venv: Path, tmp_path: Path) -> None:
    require_ffmpeg()
    wav = tmp_path / "tone.wav"
    wav.write_bytes(wav_bytes(tone_with_clicks(1.0, 16000, 440.0, []), 16000))
    mp4 = tmp_path / "counter.mp4"
    encode_video(tmp_path, mp4.name, frames=12, width=320, height=64, fps=12)
    findings = _run_check(fresh_venv, ["with-ffmpeg", str(wav), str(mp4)], hide=None, cwd=tmp_path)
    assert findings["audio_shape"] == [1, 8000] and findings["video_shape"] == [4, 3, 48, 64]
    assert findings["gil"] is False, findings
