"""stoker's media part: one native build per FFmpeg major, each in a folder of its own
(``ffmpeg5/``...) that ``src/media/build.sh`` fills: ``_media.abi3.so``, the ``libraries.txt``
it needs, and an ``__init__.py`` that calls `load_libraries`. Found and imported on first use by
`stoker.ops._media_backend`, never at ``import stoker``."""

from __future__ import annotations

import ctypes
from pathlib import Path

__all__ = ["load_libraries"]


def load_libraries(folder: str | Path) -> None:
    """Load the FFmpeg libraries a build needs (its ``libraries.txt``), globally, so its module,
    which names none of them, finds their symbols when it is imported next.

    Raises:
        OSError: A library is missing or cannot be loaded; the message names it.
    """
    for library in (Path(folder) / "libraries.txt").read_text().split():
        ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
