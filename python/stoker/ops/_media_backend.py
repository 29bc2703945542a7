"""Finds and loads stoker's media part: audio and video decoding through the user's own FFmpeg.

The core (``stoker._native``) holds no FFmpeg, so images, storage, the Loader and the CLI work
where there is none. Audio and video decoding is a native module of its own, built once per
FFmpeg major against that major's headers (``stoker/_media/ffmpeg5/_media.abi3.so``, and
``ffmpeg6/``... where a release builds more). Each build lists, in ``libraries.txt`` beside it,
the FFmpeg libraries it was linked against (``libavcodec.so.59``...); the module itself names
none of them, so it never fails to load on its own and never pulls a second FFmpeg in.

On the first audio or video call, `media_backend` tries the builds from the newest major down:
importing a build's package loads that major's libraries by name (the dynamic loader's usual
search: ``LD_LIBRARY_PATH``, the system's library folders), globally, so that its module finds
their symbols, then the module is imported. The first build whose libraries are all there wins. When none is, `MediaUnavailableError`
says which majors this stoker supports, what was missing, and the command that installs them.
Nothing else in stoker is affected.

FFmpeg's symbols are versioned per major (``LIBAVCODEC_59``), so loading them globally does not
rebind another library's FFmpeg of a different major (PyAV's, OpenCV's bundled copies).
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .._native import AudioTransform, VideoTransform
from ..errors import MediaUnavailableError

__all__ = [
    "MediaBuild",
    "MediaUnavailableError",
    "available_builds",
    "decode_audio_batch_into",
    "decode_video_batch_into",
    "media_backend",
]

_BUILDS = Path(__file__).resolve().parent.parent / "_media"
_BUILD_FOLDER = re.compile(r"ffmpeg(\d+)")


@dataclass(frozen=True)
class MediaBuild:
    """One build of the media part.

    Attributes:
        major: The FFmpeg major it was built against (5 for FFmpeg 5.x, libavcodec 59).
        module: Its module's import name.
        libraries: The FFmpeg libraries it needs, by file name, dependencies first.
    """

    major: int
    module: str
    libraries: tuple[str, ...]

    def install_hint(self) -> str:
        """The command that installs these libraries on Debian and Ubuntu (package names follow
        the libraries': ``libavcodec.so.59`` is ``libavcodec59``), and conda's equivalent."""
        packages = " ".join(re.sub(r"\.so\.", "", name) for name in self.libraries)
        return f"apt-get install {packages}  (or: conda install -c conda-forge 'ffmpeg={self.major}')"


def available_builds(folder: Path = _BUILDS) -> list[MediaBuild]:
    """The media builds shipped with this stoker, newest FFmpeg major first."""
    builds = []
    for path in folder.glob("ffmpeg*/libraries.txt"):
        match = _BUILD_FOLDER.fullmatch(path.parent.name)
        has_module = any(path.parent.glob("_media*.so"))
        if match is None or not has_module:
            continue
        libraries = tuple(line.strip() for line in path.read_text().splitlines() if line.strip())
        builds.append(MediaBuild(int(match.group(1)), f"stoker._media.{path.parent.name}._media", libraries))
    return sorted(builds, key=lambda build: build.major, reverse=True)


@functools.cache
def media_backend() -> ModuleType:
    """The media part's module, loaded on first use.

    Returns:
        The module with ``decode_audio_batch_into`` and ``decode_video_batch_into``.

    Raises:
        MediaUnavailableError: No build's FFmpeg libraries could be loaded (or stoker was built
            without the media part); the message lists what each build needed and how to install it.
    """
    builds = available_builds()
    if not builds:
        raise MediaUnavailableError(
            "audio and video decoding are not part of this build of stoker (it was built without FFmpeg's headers); "
            "images, storage and the Loader work as usual. Reinstall a release wheel, or build from source with "
            "FFmpeg's development files (README: Build from source)."
        )
    problems = []
    for build in builds:
        try:
            return importlib.import_module(build.module)  # its package loads its libraries first
        except (OSError, ImportError) as error:
            problems.append(f"  - FFmpeg {build.major} ({', '.join(build.libraries)}): {error}")
    supported = ", ".join(str(build.major) for build in builds)
    newest = builds[0]
    raise MediaUnavailableError(
        f"audio and video decoding need FFmpeg's shared libraries, and none this build of stoker supports "
        f"(FFmpeg {supported}) could be loaded:\n" + "\n".join(problems) + f"\nInstall them with: {newest.install_hint()}\n"
        "stoker uses the FFmpeg installed on the machine and bundles none; images, storage and the Loader "
        "work without it."
    )


def _decode(
    function: str,
    inputs: list[bytes | bytearray],
    transform: AudioTransform | VideoTransform,
    out: Any,
    seeds: list[int],
    compact: bool,
    threads: int,
) -> list[str | None]:
    """Call the media part's ``function`` with the transform's keyword arguments (its module cannot
    read the core's transform object, so the spec travels as the keywords that make it)."""
    _, options = transform.__getnewargs_ex__()
    decoded: list[str | None] = getattr(media_backend(), function)(inputs, out, seeds, compact, threads, **options)
    return decoded


def decode_audio_batch_into(
    inputs: list[bytes | bytearray], transform: AudioTransform, out: Any, seeds: list[int], compact: bool = False, threads: int = 1
) -> list[str | None]:
    """Decode audio ``inputs`` into ``out`` with the media part (loaded on first use).

    Returns:
        One entry per input: None, or why it failed.

    Raises:
        MediaUnavailableError: No supported FFmpeg here.
    """
    return _decode("decode_audio_batch_into", inputs, transform, out, seeds, compact, threads)


def decode_video_batch_into(
    inputs: list[bytes | bytearray], transform: VideoTransform, out: Any, seeds: list[int], compact: bool = False, threads: int = 1
) -> list[str | None]:
    """Decode video ``inputs`` into ``out`` with the media part (loaded on first use).

    Returns:
        One entry per input: None, or why it failed.

    Raises:
        MediaUnavailableError: No supported FFmpeg here.
    """
    return _decode("decode_video_batch_into", inputs, transform, out, seeds, compact, threads)
