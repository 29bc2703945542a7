"""The metrics-page fuzz target: `stoker top`'s parse and render over hostile Prometheus text
(`tests.faults.fuzz.metrics_pages`), each case read and rendered in a child process.

A case passes when the screen is drawn: the loader's endpoint beside it shown as usual, the
case's endpoint shown with its figures or named unreadable with why, every line within the
screen's width, and no raw control character anywhere (ESC, BEL, CR, C1, bidi overrides are
shown escaped). It fails on anything that escapes `refresh`, a death or a hang of the child, or
an RSS past `MAX_RSS_MB`. Budget: 300 cases in CI (``STOKER_FUZZ_EXAMPLES`` sets another
number; ``make fuzz`` runs 2,000 with fresh randomness). A case it finds becomes an ``@example``
below, run in every run from then on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings

from .fuzz.metrics_pages import CASE_URL, GOOD_PAGE, GOOD_URL, WIDTH, pages
from .test_fuzz import FRESH, MAX_RSS_MB, Worker

pytest.importorskip("prometheus_client")

# Cases per run: make fuzz's STOKER_FUZZ_EXAMPLES when it is set, else 300 (pages are cheap to judge).
CASES = int(os.environ.get("STOKER_FUZZ_EXAMPLES", "300"))
# What a terminal acts on: C0 but newline (none inside a line), DEL, C1, bidi controls, separators.
RAW_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    started = Worker("tests.faults.fuzz.metrics_pages")
    yield started
    started.close()


def _verdict(answer: dict) -> str | None:
    """Why this case fails the target, or None."""
    if answer["outcome"] != "decoded":
        return f"{answer['outcome']}: {answer.get('type', '')} {answer['message'][:300]}"
    if answer["rss_mb"] > MAX_RSS_MB:
        return f"peak RSS {answer['rss_mb']:.0f} MB"
    lines: list[str] = answer["lines"]
    for line in lines:
        if len(line) > WIDTH:
            return f"a line of {len(line)} characters, past the width {WIDTH}: {line[:200]!r}"
        if RAW_CONTROL.search(line):
            return f"a raw control character on the screen: {line[:200]!r}"
    if not any(line.startswith(f"rank 0  {GOOD_URL}") for line in lines):
        return "the loader's endpoint beside the case is not shown"
    shown = any(line.startswith("rank ") and CASE_URL in line for line in lines)
    named = any(line.startswith(f"{CASE_URL}: unreadable (") and len(line) > len(CASE_URL) + 16 for line in lines)
    if not (shown or named):
        return "the case's endpoint is neither shown nor named unreadable with why"
    return None


def _judge(worker: Worker, page: bytes, where: Path) -> None:
    where.write_bytes(page)
    reason = _verdict(worker.run("metrics-page", where, [CASE_URL]))
    assert reason is None, f"{reason} (page: {page[:300]!r})"


@settings(max_examples=CASES, deadline=None, derandomize=not FRESH, database=None, suppress_health_check=list(HealthCheck))
@given(page=pages())
@example(page=GOOD_PAGE.replace(b'stage="decode"', b'stage="\x1b]0;owned\x07decode"'))  # the title rewritten (issue 72)
@example(page=GOOD_PAGE.replace(b"120.0", b"NaN"))
@example(page=GOOD_PAGE.replace(b"120.0", b"+Inf"))
@example(page=GOOD_PAGE.replace(b'rank="0"', 'rank="\u00b2"'.encode()))
@example(page=GOOD_PAGE.replace(b'rank="0"', b'rank="' + b"9" * 5000 + b'"'))
def test_any_metrics_page_renders_within_the_screen_or_is_named_unreadable(
    page: bytes, worker: Worker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _judge(worker, page, tmp_path_factory.getbasetemp() / "metrics-page.txt")
