"""`stoker bench`: measured runs, side-by-side peers, scenarios from the papers."""

from ._build import require_optimized_core
from ._compare import RATIO_HEADER, Comparison, compare, format_comparison, format_table, ratio_cell
from ._folder import PeerData, peer_data
from ._images import encode_jpeg, image_folder, iter_jpegs, make_jpegs, natural_image
from ._memory import PeakMemory
from ._peer_loaders import BATCH, MEAN, STD
from ._peers import SCALING, available_peers, run_in_subprocess
from ._run import LatencyStorage, RunResult, run_loader
from ._scenarios import SCENARIOS, alpaca_like_lengths, drop_caches, long_lengths, naive_efficiency, packed_efficiency
from ._shuffle import format_shuffle
from ._text import format_text_run, run_text_loader
from ._text_corpus import EOS, corpus_documents, train_tokenizer, write_jsonl

__all__ = [
    "BATCH",
    "EOS",
    "MEAN",
    "STD",
    "Comparison",
    "LatencyStorage",
    "PeerData",
    "RunResult",
    "SCALING",
    "PeakMemory",
    "RATIO_HEADER",
    "SCENARIOS",
    "alpaca_like_lengths",
    "available_peers",
    "compare",
    "corpus_documents",
    "drop_caches",
    "encode_jpeg",
    "format_comparison",
    "format_shuffle",
    "format_table",
    "format_text_run",
    "image_folder",
    "iter_jpegs",
    "long_lengths",
    "make_jpegs",
    "naive_efficiency",
    "natural_image",
    "packed_efficiency",
    "peer_data",
    "ratio_cell",
    "require_optimized_core",
    "run_in_subprocess",
    "run_loader",
    "run_text_loader",
    "train_tokenizer",
    "write_jsonl",
]
