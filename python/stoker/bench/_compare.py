"""Side-by-side runs of stoker and its peers, each in its own process over the same images and
into the same output, and the table and ratios `stoker bench` and `benchmarks/images/end_to_end.py`
print from them."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..observe import CpuLimits
from ._peers import CEILING, available_peers, run_in_subprocess

__all__ = ["RATIO_HEADER", "Comparison", "compare", "format_comparison", "format_ratios", "format_table", "ratio_cell"]

_OUTPUT_TITLES = {"uint8": "uint8 CHW batches (the headline)", "float32": "float32 CHW, normalized on the CPU"}

OURS = "stoker.Loader"

RATIO_HEADER = "stoker / peer"
"""The ratio column's header, naming its direction: stoker's rate over the row's (2.00x: stoker
is twice as fast as that peer). A bare "x stoker" once put stoker's 4.89x on PyTorch's row so
that it read as PyTorch's speed-up."""


def ratio_cell(ours: float | None, theirs: float, *, own_row: bool = False) -> str:
    """The `RATIO_HEADER` column's cell of a row whose rate is ``theirs``: ``"4.89x"``; ``"-"``
    on stoker's own row, or where either rate is missing or zero."""
    return "-" if own_row or not ours or not theirs else f"{ours / theirs:.2f}x"


@dataclass
class Comparison:
    """Per output ("uint8", "float32"): each method's median row; and the methods left out, why."""

    rows: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)


def compare(
    root: Path,
    outputs: tuple[str, ...] = ("uint8", "float32"),
    repeats: int = 1,
    progress: bool = True,
    cannot_read: dict[str, str] | None = None,
) -> Comparison:
    """Run every method over one epoch of the ImageFolder ``root``, ``repeats`` interleaved rounds
    per output (the machine's noise hits every method alike); keep each method's median row.

    A method that cannot run here (not installed, cannot read the data: ``cannot_read``, or it
    fails) is left out with its reason, never shown as 0.
    """
    comparison = Comparison()
    runnable = []
    for name, missing in available_peers().items():
        reason = missing or (cannot_read or {}).get(name)
        if reason:
            comparison.left_out.append(f"{name} ({reason})")
        else:
            runnable.append(name)
    failed: set[str] = set()
    for output in outputs:
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in runnable}
        for _ in range(repeats):
            for name in runnable:
                if name in failed:
                    continue
                if progress:
                    print(f"  {output}: {name} ...", file=sys.stderr)
                try:
                    runs[name].append(run_in_subprocess(name, root, output))
                except (RuntimeError, OSError) as error:  # a RuntimeError's message starts with the name
                    failed.add(name)
                    comparison.left_out.append(str(error) if isinstance(error, RuntimeError) else f"{name} ({error})")
        comparison.rows[output] = {name: _median(rows) for name, rows in runs.items() if rows and name not in failed}
    return comparison


def _median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median throughput (its other numbers and arrivals kept together)."""
    ordered = sorted(rows, key=lambda row: row["images_per_second"])
    return ordered[(len(ordered) - 1) // 2]


def format_table(rows: dict[str, dict[str, Any]], title: str, cores: int | None = None) -> str:
    """One output's rows; CPU as a share of the machine's cores (``cores``: this machine's)."""
    cores = cores or CpuLimits.read().affinity
    cpu_title = f"CPU % of {cores}"
    lines = [title, f"  {'method':<46} {'images/s':>9} {RATIO_HEADER:>15} {'first batch':>12} {'peak RSS':>9} {cpu_title:>11}"]
    ours = rows.get(OURS, {}).get("images_per_second")
    for name, row in rows.items():
        relative = ratio_cell(ours, row["images_per_second"], own_row=name == OURS)
        lines.append(
            f"  {name:<46} {row['images_per_second']:>9.0f} {relative:>15} {row['first_batch_seconds']:>11.2f}s "
            f"{row['peak_rss_mb']:>7.0f}MB {row['cpu_percent'] / cores:>10.0f}%"
        )
    return "\n".join(lines)


def format_ratios(rows: dict[str, dict[str, Any]]) -> str:
    """stoker against the better DataLoader, the best SPDL setup, DALI and the bare thread pool."""
    if OURS not in rows:
        return "  (stoker did not run)"
    ours = rows[OURS]["images_per_second"]
    groups = {
        "the better DataLoader": [name for name in rows if name.startswith("PyTorch DataLoader")],
        "the best SPDL setup": [name for name in rows if name.startswith("SPDL")],
        "DALI": [name for name in rows if name.startswith("DALI")],
        "the bare ThreadPool ceiling": [CEILING] if CEILING in rows else [],
    }
    parts = []
    for label, names in groups.items():
        if names:
            best = max(names, key=lambda name: rows[name]["images_per_second"])
            parts.append(f"  stoker / {label} ({best}): {ours / rows[best]['images_per_second']:.2f}x")
    return "\n".join(parts)


def format_comparison(comparison: Comparison, cores: int | None = None) -> str:
    """Every output's table and ratios, then the methods not compared and why."""
    parts: list[str] = []
    for output, title in _OUTPUT_TITLES.items():
        rows = comparison.rows.get(output, {})
        if rows:
            parts += [format_table(rows, f"\n{title}: images/s over the epoch, start-up included", cores), format_ratios(rows)]
    parts += [f"  not compared: {note}" for note in comparison.left_out]
    return "\n".join(parts)
