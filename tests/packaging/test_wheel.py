"""The release wheel installs and runs anywhere: built once by ``make wheel``, checked for its tag,
size, licences and native dependencies, then installed into a fresh venv and run twice by
`wheel_check.py`: in a mount namespace where FFmpeg's libraries are /dev/null and no Rust, CMake
or NASM is on PATH (images, the Loader, ``stoker bench`` work; audio and video raise one clear
error), and with FFmpeg visible (a WAV and an MP4 decode).

Needs root (a mount namespace) and ``unshare``: a skip on a laptop, a failure in CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from stoker_testbed.availability import unavailable
from stoker_testbed.data.media_files import encode_video, require_ffmpeg, tone_with_clicks, wav_bytes

ROOT = Path(__file__).resolve().parents[2]
CHECK = Path(__file__).with_name("wheel_check.py")
MAX_WHEEL_BYTES = 15 * 1024 * 1024
# What the native parts may need from the system: the C library and the compiler's runtime.
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "libgcc_s.so.1", "ld-linux-x86-64.so.2"}
FFMPEG_STEMS = ("libavcodec", "libavformat", "libavutil", "libswscale", "libswresample", "libavdevice", "libavfilter", "libpostproc")
HIDDEN_TOOLS = ("cargo", "rustc", "rustup", "cmake", "nasm", "zig", "maturin")


# A clean clone builds both native parts again for the wheel's target (zig, glibc 2.28): about
# 150 s on 2 cores, past the suite's 300 s per test on a loaded machine. Nothing of the development
# build can be reused: with the development build also naming the target triple (so both share
# target/<triple>/release), every crate was compiled again under zig's environment, host build
# scripts included (146 s against 148 s from an empty target/, measured on a clean clone).
pytestmark = pytest.mark.timeout(2400)


@pytest.fixture(scope="module")
def wheel() -> Path:
    """The wheel ``make wheel`` builds (zig, manylinux_2_28), built once for this module, or the
    one ``make test`` built beside the lint (``STOKER_BUILT_WHEEL``) from the same tree."""
    built = os.environ.get("STOKER_BUILT_WHEEL")
    if built:
        assert Path(built).is_file(), f"STOKER_BUILT_WHEEL={built} names no file"
        return Path(built)
    if shutil.which("make") is None:
        unavailable("make", "not installed")
    # In a session of its own, so that a failure or a timeout stops make's compilers too, not only
    # make: orphaned builds would slow every test after this one.
    with subprocess.Popen(
        ["make", "-s", "wheel"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as build:
        try:
            stdout, stderr = build.communicate(timeout=2000)
        except BaseException:
            os.killpg(build.pid, signal.SIGKILL)
            raise
    assert build.returncode == 0, stdout[-4000:] + stderr[-4000:]
    (path,) = (ROOT / "dist").glob("stoker-*-abi3-*.whl")
    return path


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with only the wheel (and numpy, tqdm from the package index) installed."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    return venv


def _elf_facts(data: bytes) -> tuple[set[str], str]:
    """An ELF file's NEEDED entries and the newest GLIBC_2.x symbol version it asks for."""
    import io

    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    elf = ELFFile(io.BytesIO(data))
    needed: set[str] = set()
    glibc = [0, 0]
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            needed |= {tag.needed for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"}
        if isinstance(section, GNUVerNeedSection):
            for _, auxiliaries in section.iter_versions():
                for auxiliary in auxiliaries:
                    match = re.fullmatch(r"GLIBC_2\.(\d+)(?:\.\d+)?", auxiliary.name)
                    if match:
                        glibc = max(glibc, [2, int(match.group(1))])
    return needed, f"{glibc[0]}.{glibc[1]}"


def test_the_wheel_is_small_abi3_manylinux_2_28_with_its_licences(wheel: Path) -> None:
    assert wheel.name.endswith("-cp310-abi3-manylinux_2_28_x86_64.whl"), wheel.name
    assert wheel.stat().st_size <= MAX_WHEEL_BYTES, f"{wheel.name} is {wheel.stat().st_size / 1e6:.1f} MB"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        licences = [name for name in names if "/licenses/" in name]
        assert any(name.endswith("/licenses/LICENSE") for name in licences), licences
        notices = next(name for name in licences if name.endswith("THIRD_PARTY_NOTICES.md"))
        notice_text = archive.read(notices).decode()
        for component in ("libjpeg-turbo", "libwebp", "pyo3", "ffmpeg-next"):
            assert component in notice_text, component
        natives = [name for name in names if name.endswith(".so")]
        assert "stoker/_native.abi3.so" in natives and "stoker/_media/ffmpeg5/_media.abi3.so" in natives, natives
        assert not any(name.split("/")[-1].startswith(FFMPEG_STEMS) for name in names), "FFmpeg is bundled"
        for name in natives:
            needed, glibc = _elf_facts(archive.read(name))
            assert needed <= ALLOWED_NEEDED, f"{name} needs {sorted(needed - ALLOWED_NEEDED)}"
            assert tuple(map(int, glibc.split("."))) <= (2, 28), f"{name} needs GLIBC_{glibc}"
        media_libraries = archive.read("stoker/_media/ffmpeg5/libraries.txt").decode().split()
        assert "libavcodec.so.59" in media_libraries, media_libraries


def test_auditwheel_agrees_with_the_tag(wheel: Path) -> None:
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert 'consistent with the following platform tag: "manylinux_2_28_x86_64"' in text, shown.stdout


def _hidden_paths() -> list[str]:
    """FFmpeg's library files and the build tools' executables, each to be covered by /dev/null."""
    library_folders = [Path(folder) for folder in ("/lib", "/usr/lib", "/usr/local/lib", "/lib64", "/usr/lib64")]
    found: set[str] = set()
    for folder in library_folders:
        if folder.is_dir():
            for path in folder.rglob("lib*.so*"):
                if path.name.startswith(FFMPEG_STEMS) and path.exists():
                    found.add(str(path.resolve()))
    for tool in HIDDEN_TOOLS:
        for folder in os.environ.get("PATH", "").split(os.pathsep) + [str(Path.home() / ".cargo" / "bin")]:
            candidate = Path(folder) / tool
            if candidate.exists():
                found.add(str(candidate.resolve()))
    return sorted(found)


def _run_check(venv: Path, arguments: list[str], *, hide: list[str] | None, cwd: Path) -> dict[str, object]:
    """Run `wheel_check.py` with the fresh venv's Python and a PATH of the venv and the system's
    folders only; with ``hide``, in a mount namespace where each of those paths is /dev/null."""
    environment = {"PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    command = [str(venv / "bin" / "python"), str(CHECK), *arguments]
    if hide is not None:
        mounts = " && ".join(f"mount --bind /dev/null '{path}'" for path in hide)
        command = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", f'{mounts} && exec "$0" "$@"', *command]
    finished = subprocess.run(command, capture_output=True, text=True, env=environment, cwd=cwd, timeout=1200)
    assert finished.returncode == 0, finished.stdout[-6000:] + finished.stderr[-6000:]
    findings: dict[str, object] = json.loads(finished.stdout.strip().splitlines()[-1])
    print(json.dumps(findings, indent=2))
    return findings


def test_a_fresh_install_without_ffmpeg_or_build_tools_loads_images_and_says_what_audio_needs(fresh_venv: Path, tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        unavailable("a mount namespace to hide FFmpeg (root and unshare)", f"uid {os.geteuid()}, unshare at {shutil.which('unshare')}")
    probe = subprocess.run(["unshare", "--mount", "--", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        unavailable("a mount namespace to hide FFmpeg", probe.stderr.strip())
    hidden = _hidden_paths()
    assert any("libavcodec" in path for path in hidden), "this machine has no FFmpeg to hide: the check would prove nothing"
    findings = _run_check(fresh_venv, ["without-ffmpeg", str(tmp_path / "images")], hide=hidden, cwd=tmp_path)
    assert findings["loader_samples"] == 48
    message = str(findings["media_error"])
    for needed in ("FFmpeg 5", "libavcodec.so.59", "apt-get install libavutil57", "libavcodec59"):
        assert needed in message, message
    assert "bundles none" in message


def test_a_fresh_install_with_ffmpeg_decodes_a_wav_and_an_mp4(fresh_venv: Path, tmp_path: Path) -> None:
    require_ffmpeg()
    wav = tmp_path / "tone.wav"
    wav.write_bytes(wav_bytes(tone_with_clicks(1.0, 16000, 440.0, []), 16000))
    mp4 = tmp_path / "counter.mp4"
    encode_video(tmp_path, mp4.name, frames=12, width=320, height=64, fps=12)
    findings = _run_check(fresh_venv, ["with-ffmpeg", str(wav), str(mp4)], hide=None, cwd=tmp_path)
    assert findings["audio_shape"] == [1, 8000] and findings["video_shape"] == [4, 3, 48, 64]
    assert isinstance(findings["ffmpeg"], dict) and findings["ffmpeg"]["built_major"] == 59
