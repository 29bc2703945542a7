"""`stoker bench`: measured runs, side-by-side peers, scenarios from the papers."""

from ._build import require_optimized_core
from ._images import encode_jpeg, image_folder, iter_jpegs, make_jpegs, natural_image
from ._run import LatencyStorage, RunResult, run_loader

__all__ = [
    "LatencyStorage",
    "RunResult",
    "encode_jpeg",
    "image_folder",
    "iter_jpegs",
    "make_jpegs",
    "natural_image",
    "require_optimized_core",
    "run_loader",
]
