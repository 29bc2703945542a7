"""What of a user's dataset the peers can read, for `stoker bench PATH`.

Every peer reads an image folder laid out as ``ROOT/CLASS/IMAGE`` (torchvision's ImageFolder);
the simplejpeg and spdl.io runners list ``.jpg`` files only. So the peers compare on the folder's
images (a sample of them when there are many: each peer reads a whole epoch), and a peer that
cannot read the data is named with the reason instead of being left out in silence.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ._peers import PEERS

__all__ = ["PeerData", "peer_data"]

# What torchvision's ImageFolder lists (its IMG_EXTENSIONS).
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"})
# Peers whose runner lists ROOT/*/*.jpg (simplejpeg decodes JPEG only; spdl.io's runner lists the same).
JPG_ONLY = tuple(name for name in PEERS if "simplejpeg" in name or "spdl.io" in name)


@dataclass
class PeerData:
    """The folder the peers read and who cannot.

    Attributes:
        root: An image folder for the peers (the user's, or a sample of it linked into a
            scratch folder); None when no peer can read the dataset.
        reasons: Peer name -> why it cannot read the data.
        note: What the peers read, for the output (e.g. "a sample of 2,000 of 80,000 images").
    """

    root: Path | None
    reasons: dict[str, str] = field(default_factory=dict)
    note: str = ""


def peer_data(path: str, scratch: Path, limit: int, bad: set[str] | frozenset[str] = frozenset()) -> PeerData:
    """The peers' view of ``path``: its ``ROOT/CLASS/IMAGE`` images, at most ``limit`` of them
    (every n-th), without the ``bad`` ones (linked into ``scratch`` when a sample is taken), and
    the peers that cannot read them, with why.

    Args:
        path: What the user gave `stoker bench`.
        scratch: An empty folder for the sample's links.
        limit: The most images a peer reads in its epoch.
        bad: Images (``CLASS/IMAGE``) the diagnosed run found bad: left out, since each peer
            would stop at the first (as a user's loop without error handling does).
    """
    folder = Path(path)
    if "://" in path or not folder.is_dir():
        return _nobody(f"reads a local image folder (ROOT/CLASS/IMAGE); {path} is not one")
    files = sorted(child for child in folder.glob("*/*") if child.is_file())
    found = [child for child in files if child.suffix.lower() in IMAGE_SUFFIXES]
    images = [image for image in found if f"{image.parent.name}/{image.name}" not in bad]
    left_out = len(found) - len(images)
    if not images:
        return _nobody(f"reads images laid out as ROOT/CLASS/IMAGE ({', '.join(sorted(IMAGE_SUFFIXES))}); {path} has none at that depth")
    notes = [f"all {len(images):,} images" if len(images) <= limit else f"a sample of {limit:,} of the folder's {len(images):,} images"]
    if len(images) > limit:
        step = len(images) / limit
        images = [images[int(position * step)] for position in range(limit)]
    if len(found) > len(images):  # a sample or bad images left out: the peers read links to the rest
        for image in images:
            (scratch / image.parent.name).mkdir(exist_ok=True)
            os.symlink(image.resolve(), scratch / image.parent.name / image.name)
        folder = scratch
    if left_out:
        notes.append(f"without the {left_out} the diagnosed run found bad ({', '.join(sorted(bad)[:3])})")
    if len(files) > len(found):
        notes.append(f"{len(files) - len(found):,} other files at that depth are not images to them")
    others = Counter(image.suffix for image in images if image.suffix != ".jpg")
    reasons = {}
    if others:
        listed = ", ".join(f"{suffix} {count:,}" for suffix, count in sorted(others.items()))
        for name in JPG_ONLY:
            reasons[name] = f"reads .jpg files only; {sum(others.values()):,} of the {len(images):,} images compared are not ({listed})"
    return PeerData(folder, reasons, "; ".join(notes))


def _nobody(reason: str) -> PeerData:
    return PeerData(None, {name: reason for name in PEERS if name != "stoker.Loader"})
