"""Sizes and rates of bytes as a person reads them, in one place so that every report reads the
same: `stoker inspect`'s sizes, `TokenLoader.stats()`'s and `stoker bench`'s text rates.

A figure keeps three significant digits in a unit that fits it, so a small one never reads as
0 (30 kB/s of text was once "0.0 MB/s" beside 7,597 tokens/s)."""

from __future__ import annotations

__all__ = ["byte_rate", "byte_size"]

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_DECIMAL = ("B/s", "kB/s", "MB/s", "GB/s", "TB/s")


def _three_digits(value: float) -> str:
    """``value`` with three significant digits (at least its whole part): 0.125, 1.23, 12.3, 123."""
    return f"{value:.3g}" if value < 0.9995 else f"{value:.2f}" if value < 9.995 else f"{value:.1f}" if value < 99.95 else f"{value:.0f}"


def byte_size(count: float) -> str:
    """``count`` bytes in binary units, named as such (1 MiB = 2**20 bytes, as ``du -h`` and
    `stoker convert --shard-size` mean them): ``"512 B"``, ``"1.50 KiB"``, ``"39.6 MiB"``."""
    value = float(count)
    for unit in _BINARY:
        if value < 1024 or unit == _BINARY[-1]:
            return f"{int(value)} B" if unit == "B" else f"{_three_digits(value)} {unit}"
        value /= 1024
    raise AssertionError("unreachable: the last unit takes any value")


def byte_rate(bytes_per_second: float) -> str:
    """A rate of bytes in decimal units, as throughput is named (1 MB/s = 10**6 bytes a
    second): ``"30.4 kB/s"``, ``"1.23 MB/s"``, ``"0.50 B/s"``; ``"0 B/s"`` only for nothing."""
    value = max(0.0, float(bytes_per_second))
    for unit in _DECIMAL:
        if value < 999.5 or unit == _DECIMAL[-1]:  # 999.7 kB/s reads 1.00 MB/s, not 1000 kB/s
            return f"{_three_digits(value)} {unit}" if value else "0 B/s"
        value /= 1000
    raise AssertionError("unreachable: the last unit takes any value")
