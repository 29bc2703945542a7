"""The comparison table `stoker bench` and `benchmarks/images/end_to_end.py` print names its
ratio's direction in the header, "stoker / peer", and puts on each peer's row stoker's rate over
that peer's: "PyTorch DataLoader (2 workers) 275 4.89x" under a bare "x stoker" read as if
PyTorch were 4.89x faster."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from stoker.bench import RATIO_HEADER, format_table, ratio_cell
from stoker.bench._peers import CEILING, PEERS

BENCH_PAGE = Path(__file__).resolve().parents[2] / "docs" / "bench.md"

ROW = {"first_batch_seconds": 0.5, "peak_rss_mb": 300.0, "cpu_percent": 150.0}


@given(st.floats(min_value=1.0, max_value=1e6), st.floats(min_value=1.0, max_value=1e6))
def test_each_peers_row_holds_stokers_rate_over_its_own_under_a_header_that_says_so(ours: float, theirs: float) -> None:
    rows = {"stoker.Loader": {**ROW, "images_per_second": ours}, "PyTorch DataLoader (2 workers)": {**ROW, "images_per_second": theirs}}
    header, stoker_row, peer_row = format_table(rows, "uint8", cores=2).splitlines()[1:]
    assert RATIO_HEADER == "stoker / peer" and RATIO_HEADER in header
    column = header.index(RATIO_HEADER) + len(RATIO_HEADER)  # the cells are right-aligned under it
    assert peer_row[:column].split()[-1] == f"{ours / theirs:.2f}x" == ratio_cell(ours, theirs)
    assert stoker_row[:column].split()[-1] == "-", "stoker's own row has no ratio to itself"


def test_a_missing_rate_is_no_ratio() -> None:
    assert ratio_cell(None, 100.0) == ratio_cell(100.0, 0.0) == "-"


def test_the_page_names_every_method_compared() -> None:
    page = " ".join(BENCH_PAGE.read_text().split())
    for name in PEERS:
        family = name.split(" (")[0].split(" + ")[0]  # "PyTorch DataLoader", "SPDL", "DALI"
        assert name == CEILING or family in page, f"docs/bench.md does not name {family} ({name})"
    assert "ThreadPoolExecutor(2)" in page and RATIO_HEADER in page
