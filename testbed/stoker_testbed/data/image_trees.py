"""ImageFolder trees of empty files, for timing what listing costs at users' scale (10^6 files)
without writing 10^6 images: only names and folders matter to a listing."""

from __future__ import annotations

from pathlib import Path

__all__ = ["make_empty_image_tree"]


def make_empty_image_tree(root: Path, classes: int, per_class: int) -> None:
    """Make ``classes`` folders of ``per_class`` empty ``.JPEG`` files under ``root``, once.

    A ``.complete`` marker written last makes a second call free, and an interrupted first call
    start over (``touch`` and ``mkdir`` are idempotent).
    """
    marker = root / ".complete"
    if marker.exists():
        return
    print(f"creating {classes * per_class} empty files under {root} ...", flush=True)
    for label in range(classes):
        folder = root / f"n{label:08d}"
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            (folder / f"{label:05d}_{index:06d}.JPEG").touch()
    marker.touch()
