"""`stoker report RUN.json`: an HTML page with the results table, the diagnosis, and four plots a
person can read at a glance:

- ``samples.png``: samples per second over time for each loader, over a 1 s window;
- ``busy.png``: how close each stage of stoker's Loader runs to its capacity (share of its task
  slots busy, 1 s window);
- ``wait.png``: the share of time the training loop waited for data (1 s window);
- ``peers.png``: the loaders side by side (samples per second).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._bounded import read_json, shown, shown_html
from ..errors import ConfigurationError

__all__ = ["write_report"]

# The window every rate over time is measured on: long enough to smooth batch arrivals, short
# enough to show a stall.
_WINDOW_SECONDS = 1.0
# Characters of a name in a plot's legend or axis, and of a sentence on the page (the run file
# is input: its text is shown escaped, `stoker._bounded.shown`).
_LABEL_LIMIT = 60
_TEXT_LIMIT = 2_000
# A run file is a few megabytes (a 20 s run's arrivals and timeline); anything far larger is not one.
MAX_RUN_FILE_BYTES = 256 << 20


def windowed_rate(times: Sequence[float], totals: Sequence[float], window: float = _WINDOW_SECONDS) -> tuple[list[float], list[float]]:
    """(times, rates): the growth of a cumulative series ``totals`` per second over the trailing
    ``window`` seconds, at every sample at least one window into the run."""
    out_times: list[float] = []
    rates: list[float] = []
    start = 0
    for index, now in enumerate(times):
        while start < index and times[start] < now - window:
            start += 1
        # The sample just before the window's start anchors it.
        anchor = max(0, start - 1)
        span = now - times[anchor]
        if now < window or span <= 0:
            continue
        out_times.append(now)
        rates.append((totals[index] - totals[anchor]) / span)
    return out_times, rates


def _loader_series(results: list[dict[str, Any]]) -> list[tuple[str, list[float], list[float]]]:
    """Per loader: (name, times, samples per second) from its batch arrivals; a run shorter than
    a few windows is measured on a fifth of its length instead, so that it still draws a line."""
    series = []
    for result in results:
        arrivals = result.get("arrivals") or []
        if len(arrivals) > 1:
            times = [time for time, _ in arrivals]
            window = min(_WINDOW_SECONDS, (times[-1] - times[0]) / 5) or _WINDOW_SECONDS
            times, rates = windowed_rate(times, [count for _, count in arrivals], window)
            series.append((shown(result["name"], _LABEL_LIMIT), times, rates))
    return series


def _stage_series(stats: dict[str, Any]) -> tuple[list[tuple[str, list[float], list[float]]], tuple[list[float], list[float]]]:
    """Per task-running stage: (name, times, share of slots busy); and the consumer's data-wait share."""
    timeline = [sample for sample in stats.get("timeline", []) if "busy_seconds" in sample]
    times = [sample["time"] for sample in timeline]
    busy = []
    for index, stage in enumerate(stats.get("stages", [])):
        if stage["kind"] not in ("source", "pipe"):
            continue
        stage_times, rates = windowed_rate(times, [sample["busy_seconds"][index] for sample in timeline])
        busy.append((shown(stage["name"], _LABEL_LIMIT), stage_times, [min(1.0, rate / max(1, stage["concurrency"])) for rate in rates]))
    wait = windowed_rate(times, [sample["consumer_wait"] for sample in timeline])
    return busy, (wait[0], [min(1.0, share) for share in wait[1]])


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _lines(path: Path, title: str, ylabel: str, series: list[tuple[str, list[float], list[float]]], *, share: bool = False) -> None:
    plt = _pyplot()

    figure, axes = plt.subplots(figsize=(8, 3.4), dpi=100)
    for name, times, values in series:
        axes.plot(times, [100 * value for value in values] if share else values, label=name, linewidth=1.6)
    axes.set_title(title)
    axes.set_xlabel("seconds into the run")
    axes.set_ylabel(ylabel)
    if share:
        axes.set_ylim(0, 105)
    else:
        axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    if series:
        axes.legend(loc="lower right", fontsize=8)
    else:
        axes.text(0.5, 0.5, "not enough samples (a run shorter than the 1 s window)", ha="center", transform=axes.transAxes)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _bars(path: Path, results: list[dict[str, Any]]) -> None:
    plt = _pyplot()

    names = [shown(result["name"], _LABEL_LIMIT) for result in results]
    rates = [float(result["images_per_second"]) for result in results]
    figure, axes = plt.subplots(figsize=(8, 0.6 + 0.5 * len(names)), dpi=100)
    colors = ["#e07000" if name.startswith("stoker") else "#6a8caf" for name in names]
    axes.barh(names[::-1], rates[::-1], color=colors[::-1])
    for index, rate in enumerate(rates[::-1]):
        axes.text(rate, index, f" {rate:,.0f}", va="center", fontsize=9)
    axes.set_xlabel("samples per second (higher is better)")
    axes.set_xlim(0, max(rates) * 1.18 if rates else 1)
    axes.set_title("Loaders side by side, same data, same output")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _storage_section(traffic: dict[str, Any]) -> str:
    """What reading network storage took over the run, with its price, or nothing."""
    if not traffic:
        return ""
    from ..storage.policies import describe_traffic

    per_epoch = f"; about ${traffic['dollars_per_epoch']:,.4f} an epoch" if "dollars_per_epoch" in traffic else ""
    return f'<h2>Storage</h2><p id="storage">{shown_html(describe_traffic(traffic) + per_epoch, _TEXT_LIMIT)}</p>'


def _row(result: dict[str, Any], bytes_per_image: float | None, cores: int) -> str:
    """One loader's row. Every loader reads the same files per image, so one whose own read bytes
    were not counted (a peer) is given the diagnosed run's bytes per image (marked *)."""
    if "megabytes_per_second" in result:
        megabytes = f"{result['megabytes_per_second']:.1f}"
    elif bytes_per_image:
        megabytes = f"{result['images_per_second'] * bytes_per_image / 1e6:.1f}*"
    else:
        megabytes = "-"
    cpu = f"{result['cpu_percent'] / cores:.0f}%" if "cpu_percent" in result else "-"
    return (
        f"<tr><td>{shown_html(result['name'])}</td><td>{result['images_per_second']:.0f}</td><td>{megabytes}</td>"
        f"<td>{cpu}</td><td>{result['peak_rss_mb']:.0f} MB</td><td>{result['first_batch_seconds']:.2f} s</td></tr>"
    )


def _check_run(run: dict[str, Any], source: Path) -> None:
    """Refuse, naming the field, a run whose fields the page shows are not of their kind: the
    file is input, and a string where a number belongs must not reach the page as markup."""

    def fail(field: str, value: Any, kind: str) -> ConfigurationError:
        return ConfigurationError(f"{source}: not a stoker bench run: {field} is not {kind} ({str(value)[:80]!r})")

    def number(value: Any, field: str, *, optional: bool = False) -> None:
        if value is None and optional:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise fail(field, value, "a finite number")

    def text(value: Any, field: str) -> None:
        if not isinstance(value, str):
            raise fail(field, value, "text")

    for field in ("dataset",):
        if field in run:
            text(run[field], field)
    for field in ("cores", "batch_size"):
        number(run.get(field), field, optional=True)
    results = run.get("results")
    if not isinstance(results, list) or not all(isinstance(result, dict) for result in results):
        raise fail("results", results, "a list of loaders' results")
    for place, result in enumerate(results):
        text(result.get("name"), f"results[{place}].name")
        for field in ("images_per_second", "peak_rss_mb", "first_batch_seconds"):
            number(result.get(field), f"results[{place}].{field}")
        for field in ("megabytes_per_second", "cpu_percent"):
            number(result.get(field), f"results[{place}].{field}", optional=True)
    diagnosis = run.get("diagnosis")
    if not isinstance(diagnosis, dict):
        raise fail("diagnosis", diagnosis, "an object")
    text(diagnosis.get("bottleneck"), "diagnosis.bottleneck")
    text(diagnosis.get("message"), "diagnosis.message")
    if not isinstance(run.get("stats"), dict):
        raise fail("stats", run.get("stats"), "an object")
    diagnosed = run.get("diagnosed_run")
    if diagnosed is not None and not isinstance(diagnosed, dict):
        raise fail("diagnosed_run", diagnosed, "an object")


def _read_run(source: Path) -> dict[str, Any]:
    """The run file, parsed and checked (see `_check_run`)."""
    try:
        run = read_json(source, what="a run file", max_bytes=MAX_RUN_FILE_BYTES)
    except ValueError as error:  # not JSON, or past a bound (JsonError)
        raise ConfigurationError(
            f"{source}: not a stoker bench run (the JSON that `stoker bench --json RUN.json` writes): {error}"
        ) from None
    if not isinstance(run, dict) or run.get("format") != "stoker.bench-run":
        found = run.get("format") if isinstance(run, dict) else type(run).__name__
        raise ConfigurationError(
            f"{source}: not a stoker bench run (format {str(found)[:80]!r}; `stoker bench --json RUN.json` writes one)"
        )
    _check_run(run, source)
    return run


def write_report(run_file: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write ``samples.png``, ``busy.png``, ``wait.png``, ``peers.png`` and ``index.html`` for a
    `stoker bench --json` run.

    Returns:
        The HTML page's path.

    Raises:
        ConfigurationError: The file is not a stoker bench run (a field of another kind is named).
        StorageError: Not a regular file, or larger than a run file can be.
        ImportError: matplotlib is not installed (``pip install matplotlib``).
    """
    source = Path(run_file)
    run = _read_run(source)
    target = Path(out_dir) if out_dir else source.with_suffix("")
    target.mkdir(parents=True, exist_ok=True)
    try:
        return _write_page(run, target)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError, OverflowError) as error:
        raise ConfigurationError(f"{source}: not a stoker bench run: a field has another shape ({type(error).__name__}: {error})") from None


def _write_page(run: dict[str, Any], target: Path) -> Path:
    """`write_report`'s work once the run is read and checked."""
    busy, wait = _stage_series(run["stats"])
    _lines(
        target / "samples.png",
        "Samples per second, by loader (1 s window, or a fifth of a shorter run)",
        "samples/s",
        _loader_series(run["results"]),
    )
    _lines(
        target / "busy.png",
        "How busy each stage of stoker's Loader is (share of its task slots, 1 s window)",
        "% of slots busy",
        busy,
        share=True,
    )
    _lines(
        target / "wait.png",
        "Time the training loop waited for data (1 s window)",
        "% of time waiting",
        [("stoker.Loader", *wait)],
        share=True,
    )
    _bars(target / "peers.png", run["results"])
    diagnosed = run.get("diagnosed_run") or {}
    bytes_per_image = (
        1e6 * diagnosed["megabytes_per_second"] / diagnosed["images_per_second"] if diagnosed.get("images_per_second") else None
    )
    cores = max(1, int(run.get("cores") or 1))
    rows = "".join(_row(result, bytes_per_image, cores) for result in run["results"])
    diagnosis = run["diagnosis"]
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>stoker bench: {shown_html(run.get("dataset", ""))}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:60em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 10px;text-align:right}}td:first-child,th:first-child{{text-align:left}}
.diagnosis{{background:#fff4d6;border-left:4px solid #e0a000;padding:0.8em 1em}}</style></head>
<body><h1>stoker bench</h1>
<p>Dataset: {shown_html(run.get("dataset", ""))}; {shown_html(run.get("cores", "?"))} cores; batch size {shown_html(run.get("batch_size", "?"))}.</p>
<h2>Diagnosis</h2><p class="diagnosis" id="diagnosis"><b>{shown_html(diagnosis["bottleneck"])}</b>: {shown_html(diagnosis["message"], _TEXT_LIMIT)}</p>
<h2>Results</h2><table id="results"><tr><th>loader</th><th>images/s</th><th>MB/s read</th><th>CPU (% of {cores} cores)</th><th>peak RSS</th><th>first batch</th></tr>{rows}</table>
<p>* the diagnosed run's bytes read per image times the loader's images/s (every loader reads the same files).</p>
{_storage_section(diagnosed.get("storage") or {})}
<h2>Side by side</h2><img id="peers" src="peers.png" alt="samples per second of each loader">
<h2>Over time</h2><img id="samples" src="samples.png" alt="samples per second of each loader over time">
<p>A stage near 100% of its slots is the one to give more concurrency or cheaper work; one far below is waiting on another.</p>
<img id="busy" src="busy.png" alt="share of each stage's task slots busy over time">
<img id="wait" src="wait.png" alt="share of time the training loop waited for data">
</body></html>"""
    page_path = target / "index.html"
    page_path.write_text(page)
    return page_path
