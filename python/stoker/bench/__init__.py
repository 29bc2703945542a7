"""`stoker bench`: measured runs, side-by-side peers, scenarios from the papers."""

from ._build import require_optimized_core
from ._compare import Comparison, compare, format_comparison
from ._folder import PeerData, peer_data
from ._images import encode_jpeg, image_folder, iter_jpegs, make_jpegs, natural_image
from ._run import LatencyStorage, RunResult, run_loader
from ._scenarios import SCENARIOS
from ._shuffle import format_shuffle
from ._text import format_text_run, run_text_loader

__all__ = [
    "Comparison",
    "LatencyStorage",
    "PeerData",
    "RunResult",
    "SCENARIOS",
    "compare",
    "encode_jpeg",
    "format_comparison",
    "format_shuffle",
    "format_text_run",
    "image_folder",
    "iter_jpegs",
    "make_jpegs",
    "natural_image",
    "peer_data",
    "require_optimized_core",
    "run_loader",
    "run_text_loader",
]
