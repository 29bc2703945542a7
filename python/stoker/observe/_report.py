"""`stoker report RUN.json`: plots of per-stage throughput and queue occupancy over time, and an
HTML page with the results table and the diagnosis."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

__all__ = ["write_report"]


def _series(stats: dict[str, Any]) -> tuple[list[str], list[float], list[list[float]], list[list[float]]]:
    """(stage names, times, throughput per stage, queue length per stage) from a timeline."""
    names = [stage["name"] for stage in stats["stages"]]
    timeline = stats.get("timeline", [])
    times = [sample["time"] for sample in timeline]
    rates: list[list[float]] = [[] for _ in names]
    queues: list[list[float]] = [[] for _ in names]
    for previous, sample in zip(timeline, timeline[1:]):
        span = max(sample["time"] - previous["time"], 1e-9)
        for index in range(len(names)):
            rates[index].append((sample["items_out"][index] - previous["items_out"][index]) / span)
    for sample in timeline:
        for index in range(len(names)):
            queues[index].append(sample["queue_length"][index])
    return names, times, rates, queues


def _plot(path: Path, title: str, ylabel: str, times: list[float], series: list[list[float]], names: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 3.6), dpi=100)
    for name, values in zip(names, series):
        if values:
            axes.plot(times[-len(values) :], values, label=name, linewidth=1.4)
    axes.set_title(title)
    axes.set_xlabel("seconds")
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    axes.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _row(result: dict[str, Any]) -> str:
    megabytes = f"{result['megabytes_per_second']:.1f}" if "megabytes_per_second" in result else "-"
    return (
        f"<tr><td>{html.escape(result['name'])}</td><td>{result['images_per_second']:.0f}</td><td>{megabytes}</td>"
        f"<td>{result.get('cpu_percent', 0):.0f}%</td><td>{result['peak_rss_mb']:.0f} MB</td>"
        f"<td>{result['first_batch_seconds']:.2f} s</td></tr>"
    )


def write_report(run_file: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write ``throughput.png``, ``queues.png`` and ``index.html`` for a `stoker bench --json` run.

    Returns:
        The HTML page's path.

    Raises:
        ValueError: The file is not a stoker bench run.
        ImportError: matplotlib is not installed (``pip install matplotlib``).
    """
    source = Path(run_file)
    run = json.loads(source.read_text())
    if run.get("format") != "stoker.bench-run":
        raise ValueError(f"{source}: not a stoker bench run (format {run.get('format')!r})")
    target = Path(out_dir) if out_dir else source.with_suffix("")
    target.mkdir(parents=True, exist_ok=True)
    names, times, rates, queues = _series(run["stats"])
    _plot(target / "throughput.png", "Items per second by stage", "items/s", times, rates, names)
    _plot(target / "queues.png", "Output queue occupancy by stage", "items waiting", times, queues, names)
    rows = "".join(_row(result) for result in run["results"])
    diagnosis = run["diagnosis"]
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>stoker bench: {html.escape(run.get("dataset", ""))}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:60em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 10px;text-align:right}}td:first-child,th:first-child{{text-align:left}}
.diagnosis{{background:#fff4d6;border-left:4px solid #e0a000;padding:0.8em 1em}}</style></head>
<body><h1>stoker bench</h1>
<p>Dataset: {html.escape(run.get("dataset", ""))}; {run.get("cores", "?")} cores; batch size {run.get("batch_size", "?")}.</p>
<h2>Diagnosis</h2><p class="diagnosis" id="diagnosis"><b>{html.escape(diagnosis["bottleneck"])}</b>: {html.escape(diagnosis["message"])}</p>
<h2>Results</h2><table id="results"><tr><th>loader</th><th>images/s</th><th>MB/s</th><th>CPU</th><th>peak RSS</th><th>first batch</th></tr>{rows}</table>
<h2>Over time</h2><img id="throughput" src="throughput.png" alt="items per second by stage">
<img id="queues" src="queues.png" alt="queue occupancy by stage">
</body></html>"""
    page_path = target / "index.html"
    page_path.write_text(page)
    return page_path
