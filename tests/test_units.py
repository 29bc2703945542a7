"""Sizes and rates read back as the figure they stand for, in a unit that fits it: a small rate
never reads as 0 (30 kB/s of text once read "0.0 MB/s" beside 7,597 tokens/s)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stoker._units import byte_rate, byte_size

_RATES = {"B/s": 1, "kB/s": 10**3, "MB/s": 10**6, "GB/s": 10**9, "TB/s": 10**12}
_SIZES = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}


def _read_back(text: str, units: dict[str, int]) -> tuple[float, str]:
    number, unit = text.split(" ")
    return float(number) * units[unit], number


@given(st.floats(min_value=1e-3, max_value=1e14, allow_nan=False))
def test_a_rate_reads_back_within_its_three_digits_and_never_as_zero(rate: float) -> None:
    value, number = _read_back(byte_rate(rate), _RATES)
    assert abs(value - rate) <= 0.006 * rate, (rate, byte_rate(rate))
    assert float(number) > 0 and len(number.replace(".", "").lstrip("0")) <= 3, byte_rate(rate)


@given(st.integers(min_value=0, max_value=1 << 60))
def test_a_size_reads_back_within_its_three_digits(size: int) -> None:
    value, number = _read_back(byte_size(size), _SIZES)
    assert abs(value - size) <= 0.006 * size, (size, byte_size(size))
    assert number.isdigit() if size < 1024 else len(number.replace(".", "").lstrip("0")) <= 4


def test_the_figures_people_read() -> None:
    assert byte_rate(30_388) == "30.4 kB/s" and byte_rate(0) == "0 B/s" and byte_rate(999_700) == "1.00 MB/s"
    assert byte_size(512) == "512 B" and byte_size(1536) == "1.50 KiB" and byte_size(40_550) == "39.6 KiB"
