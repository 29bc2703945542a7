"""stoker's cache folder: listings, indexes of read-only data, benchmark data."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """``$STOKER_CACHE`` (default ``~/.cache/stoker``) joined with ``parts``, created."""
    base = Path(os.environ.get("STOKER_CACHE", Path.home() / ".cache" / "stoker"))
    folder = base.joinpath(*parts)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
