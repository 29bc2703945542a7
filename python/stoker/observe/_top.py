"""`stoker top`: running loaders' figures, live in a terminal, from their metrics endpoints.

Each endpoint is one loader (one rank) served by `serve_metrics`. Every refresh scrapes them all;
the figures are rates between the last two scrapes: per stage items/s, how busy its task slots
were, how full its output queue is; the loop's data-wait share; tuning moves. Two verdicts in
words: each loader's bottleneck, and, with several loaders, the straggler: in a synchronous job
the rank that waits for data sets every rank's pace.

Plain text all through (no colour, no mouse), so it works over ssh in any terminal; ``q`` or
Ctrl-C quits. ``--once`` prints one refresh and exits, for scripts and logs. Verdicts and
messages wrap at the screen's width (a verdict cut there lost its advice); the exit status is 1
when no endpoint gave a loader's figures (every one unreachable or unreadable), so a script
that checks a job with ``--once`` sees a dead job.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from .._bounded import fetch_page, shown
from ..errors import ConfigurationError
from ._host_cpu import others_share
from ._metrics_page import Scrape, UnreadablePage, read_page
from ._straggler import RankFigures, StageFigures, straggler_verdict

__all__ = ["Endpoint", "Scrape", "render", "scrape", "top"]

# A data-wait share under this is a loop fed well enough to name no bottleneck.
_FED = 0.05
# A stage whose slots are this busy is the bottleneck.
_BUSY = 0.75
# Screen lines one wrapped line may take at most: a server's message is outside text, and a
# long one must not push the other loaders off the screen.
_MOST_LINES = 4


def scrape(url: str, timeout: float = 2.0) -> Scrape:
    """The metrics at ``url`` now, fetched within ``timeout`` seconds in all (a page that
    trickles ends there) under the HTTP body policy (`stoker._bounded.fetch_page`: a page is
    at most 4 MiB, whatever its server declares; at most 5 redirects).

    Raises:
        ConfigurationError: prometheus_client (its text-format parser) is not installed.
        OSError: The endpoint cannot be reached, answers with an error or a refused response,
            or not within ``timeout``; the message names the URL.
        UnreadablePage: The page's figures cannot be used (named: `read_page`).
    """
    try:
        import prometheus_client.parser  # noqa: F401 (read_page's parser: asked for here, by name)
    except ImportError as error:
        raise ConfigurationError("stoker top reads metrics with prometheus_client: pip install 'stoker[metrics]'") from error
    page = fetch_page(url, timeout=timeout)
    return read_page(page, time.monotonic())


@dataclass
class Endpoint:
    """One loader's figures between two scrapes."""

    url: str
    rank: str
    wait: float  # share of the loop's time spent waiting for data
    batches_per_second: float
    stages: list[tuple[str, float, float, float, float]]  # name, items/s, busy share, queue fill, seconds per item
    tuning_moves: int
    error: str = ""  # why there are no figures
    others_cpu_share: float | None = None  # share of its cores other processes used
    reads_from: str = ""
    failure: str = "unreachable"  # with an error: "unreachable" (no page) or "unreadable" (a page, not a loader's)

    @classmethod
    def failed(cls, url: str, failure: str, error: str) -> Endpoint:
        """An endpoint with no figures: ``failure`` says which way, ``error`` why."""
        return cls(url, "?", 0.0, 0.0, [], 0, error=error, failure=failure)

    @classmethod
    def between(cls, url: str, before: Scrape, after: Scrape) -> Endpoint:
        seconds = max(after.time - before.time, 1e-9)
        rank = after.rank()

        def change(name: str, **labels: str) -> float:
            return after.get(name, rank=rank, **labels) - before.get(name, rank=rank, **labels)

        run = change("stoker_run_seconds_total")
        stages = []
        for stage in after.stages():
            items = change("stoker_stage_items_total", stage=stage)
            busy = change("stoker_stage_busy_seconds_total", stage=stage)
            slots = max(after.get("stoker_stage_concurrency", rank=rank, stage=stage), 1.0)
            capacity = after.get("stoker_stage_queue_capacity", rank=rank, stage=stage)
            fill = after.get("stoker_stage_queue_items", rank=rank, stage=stage) / capacity if capacity else 0.0
            stages.append((stage, items / seconds, min(1.0, busy / seconds / slots), fill, busy / items if items else 0.0))
        moves = sum(value for (name, _), value in after.values.items() if name == "stoker_tuning_moves_total")
        cores = int(after.get("stoker_cores", rank=rank))
        taken = None
        if cores and ("stoker_cores_busy_seconds_total", (("rank", rank),)) in after.values:
            busy, own = change("stoker_cores_busy_seconds_total"), change("stoker_process_cpu_seconds_total")
            taken = others_share(busy, own, seconds, cores) if before is not after else None
        where = next(
            (value for (name, labels) in after.values for key, value in labels if name == "stoker_reads_from" and key == "reads_from"), ""
        )
        return cls(
            url,
            rank,
            min(1.0, change("stoker_data_wait_seconds_total") / run) if run > 0 else 0.0,
            change("stoker_batches_delivered_total") / seconds,
            stages,
            int(moves),
            others_cpu_share=taken,
            reads_from=where,
        )

    def bottleneck(self) -> str:
        """This loader's verdict in words."""
        if not self.stages:
            return "no pipeline running"
        name, _, busy, _, _ = max(self.stages, key=lambda stage: stage[2])
        if self.wait < _FED:
            return f"fed: the loop waits {self.wait:.1%} for data; the training step sets the pace"
        if busy >= _BUSY:
            return f"{name} is the bottleneck: its slots are busy {busy:.0%}; the loop waits {self.wait:.0%} for data"
        return (
            f"the loop waits {self.wait:.0%} for data though no stage is busy (the busiest, {name}, {busy:.0%}): "
            "the waits come in bursts (an epoch's start, slow reads) or from the storage's latency"
        )


def straggler(endpoints: Sequence[Endpoint]) -> str | None:
    """The rank that sets a synchronous job's pace, in words, or None when none stands out
    (`straggler_verdict` over the endpoints' figures per second)."""
    ranks = [
        RankFigures(
            rank=int(endpoint.rank) if endpoint.rank.isascii() and endpoint.rank.isdigit() and len(endpoint.rank) < 10 else index,
            host=urlsplit(endpoint.url).hostname or endpoint.url,
            seconds=1.0,
            wait_seconds=endpoint.wait,
            steps=round(endpoint.batches_per_second),
            stages=tuple(StageFigures(name, rate, rate * per_item) for name, rate, _, _, per_item in endpoint.stages),
            others_cpu_share=endpoint.others_cpu_share,
            reads_from=endpoint.reads_from,
        )
        for index, endpoint in enumerate(endpoints)
        if not endpoint.error
    ]
    return straggler_verdict(ranks)


def wrapped(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` shown (`shown`: control characters escaped) and wrapped into lines of at most
    ``width`` characters, the first after ``indent`` and the others two spaces further in, at
    most `_MOST_LINES` of them (the last cut with an ellipsis)."""
    width = max(width, len(indent) + 12)
    lines = textwrap.wrap(
        shown(text, width * _MOST_LINES),
        width,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=True,
        break_on_hyphens=False,
    )
    if len(lines) > _MOST_LINES:
        lines = [*lines[: _MOST_LINES - 1], lines[_MOST_LINES - 1][: width - 1] + "\u2026"]
    return lines or [indent]


def render(endpoints: Sequence[Endpoint], width: int = 120) -> list[str]:
    """The screen's lines for ``endpoints``, each at most ``width`` characters with every control
    character escaped: URLs, ranks, stage names, where reads go and servers' messages are outside
    text (`stoker._bounded.shown`). Verdicts, messages and each loader's heading wrap (`wrapped`);
    a table row is cut at the edge."""
    lines = [f"stoker top: {len(endpoints)} loader(s); q or Ctrl-C quits".ljust(width)[:width]]
    verdict = straggler(endpoints)
    lines += wrapped(("straggler: " + verdict) if verdict else "straggler: none (no rank waits for data much more than the others)", width)
    for endpoint in endpoints:
        lines.append("")
        if endpoint.error:
            lines += wrapped(f"{endpoint.url}: {endpoint.failure} ({endpoint.error})", width)
            continue
        lines += wrapped(
            f"rank {endpoint.rank}  {endpoint.url}  {endpoint.batches_per_second:,.1f} batches/s  "
            f"data wait {endpoint.wait:.1%}  tuning moves {endpoint.tuning_moves}",
            width,
        )
        lines.append(shown(f"  {'stage':<14}{'items/s':>12}{'busy':>8}{'queue':>8}", width))
        for name, rate, busy, fill, _ in endpoint.stages:
            lines.append(shown(f"  {name:<14}{rate:>12,.1f}{busy:>8.0%}{fill:>8.0%}", width))
        lines += wrapped(endpoint.bottleneck(), width, indent="  ")
    return lines


def refresh(urls: Sequence[str], previous: dict[str, Scrape], fetch: Callable[[str], Scrape] = scrape) -> list[Endpoint]:
    """Scrape ``urls`` (with ``fetch``) and the figures since ``previous`` (updated in place): an
    endpoint that cannot be reached or read is one with an error, never an exception."""
    endpoints = []
    for url in urls:
        try:
            now = fetch(url)
        except UnreadablePage as error:
            endpoints.append(Endpoint.failed(url, "unreadable", str(error)))
            continue
        except (OSError, ValueError) as error:
            endpoints.append(Endpoint.failed(url, "unreachable", str(getattr(error, "reason", error))))
            continue
        endpoints.append(figures(url, previous.get(url, now), now))
        previous[url] = now
    return endpoints


def figures(url: str, before: Scrape, after: Scrape) -> Endpoint:
    """`Endpoint.between` two scrapes of ``url``; an endpoint named unreadable, with why, when
    its figures do not add up (`read_page` bounds them; this keeps one endpoint's surprise from
    ending the tool)."""
    try:
        return Endpoint.between(url, before, after)
    except (ArithmeticError, ValueError) as error:
        return Endpoint.failed(url, "unreadable", f"its figures do not add up: {type(error).__name__}: {error}")


def top(urls: Sequence[str], *, interval: float = 1.0, once: bool = False, write: Callable[[str], object] = print) -> int:
    """Show ``urls``' loaders live until ``q`` or Ctrl-C (or one refresh with ``once``).

    Returns:
        The exit status: 0 when the last refresh showed a loader's figures, 1 when every
        endpoint was unreachable or unreadable (said on stderr).

    Raises:
        ConfigurationError: No URL, or prometheus_client is not installed.
    """
    if not urls:
        raise ConfigurationError("stoker top needs at least one metrics URL (http://HOST:PORT/metrics)")
    previous: dict[str, Scrape] = {}
    last = refresh(urls, previous)
    if once:
        time.sleep(interval)
        last = refresh(urls, previous)
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 120  # a log or a pipe: 120
        for line in render(last, width):
            write(line)
        return _status(last)
    import curses

    def run(screen: curses.window) -> None:
        nonlocal last
        curses.curs_set(0)
        screen.timeout(int(interval * 1000))
        while True:
            key = screen.getch()  # waits up to the interval: the refresh's pace
            if key in (ord("q"), ord("Q")):
                return
            height, width = screen.getmaxyx()
            screen.erase()
            last = refresh(urls, previous)
            for row, line in enumerate(render(last, max(width - 1, 20))[: height - 1]):
                try:
                    screen.addstr(row, 0, line)
                except curses.error:  # wide characters (a label's CJK) ran past the screen's edge
                    pass
            screen.refresh()

    try:
        curses.wrapper(run)
    except KeyboardInterrupt:
        pass
    return _status(last)


def _status(endpoints: Sequence[Endpoint]) -> int:
    """The exit status for the last refresh: 1, said on stderr, when no endpoint gave figures."""
    if any(not endpoint.error for endpoint in endpoints):
        return 0
    failures = {failure: sum(1 for endpoint in endpoints if endpoint.failure == failure) for failure in ("unreachable", "unreadable")}
    said = ", ".join(f"{count} {failure}" for failure, count in failures.items() if count)
    print(f"stoker top: no loader's figures at any of the {len(endpoints)} endpoint(s) ({said})", file=sys.stderr)
    return 1
