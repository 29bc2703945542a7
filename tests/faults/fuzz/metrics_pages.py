"""Metrics pages for `stoker top`, hostile ones drawn by Hypothesis, and the child process that
reads and renders each (``python -m tests.faults.fuzz.metrics_pages``).

A page is Prometheus text as any server might answer at a URL a user typed: loader series with
label values meant for a terminal (ESC sequences, BEL, bidi overrides, carriage returns, NUL,
5,000 digits, 100,000 characters), numbers no loader writes (NaN, Inf, 1e309, 5,000-digit
integers, superscript digits, hex), ranks that are not ranks, names and comment lines of any
text, garbage lines, and the whole in another encoding (UTF-16, Latin-1, invalid UTF-8) or cut.

The child reads one JSON line per case, ``{"format": "metrics-page", "path": ..., "names": [...]}``
(the page in the file at ``path``), runs `stoker top`'s own refresh over two endpoints, a
loader's page and the case's, both scraped twice, and renders the screen at ``WIDTH``. It answers
``{"outcome": "decoded", "lines": [...], "rss_mb": ...}``, or ``"error"`` with the exception that
escaped; the parent judges the lines.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import strategies as st

WIDTH = 100
GOOD_URL = "http://good:9464/metrics"
CASE_URL = "http://case:9464/metrics"
# A loader's page, as serve_metrics writes one.
GOOD_PAGE = b"""# HELP stoker_stage_items_total Items a stage put out.
# TYPE stoker_stage_items_total counter
stoker_stage_items_total{rank="0",stage="decode"} 120.0
stoker_stage_busy_seconds_total{rank="0",stage="decode"} 3.5
stoker_stage_concurrency{rank="0",stage="decode"} 4.0
stoker_run_seconds_total{rank="0"} 10.0
stoker_data_wait_seconds_total{rank="0"} 2.0
stoker_batches_delivered_total{rank="0"} 40.0
"""
SERIES = [
    "stoker_stage_items_total",
    "stoker_stage_busy_seconds_total",
    "stoker_stage_concurrency",
    "stoker_stage_queue_items",
    "stoker_stage_queue_capacity",
    "stoker_run_seconds_total",
    "stoker_data_wait_seconds_total",
    "stoker_batches_delivered_total",
    "stoker_tuning_moves_total",
    "stoker_cores",
    "stoker_cores_busy_seconds_total",
    "stoker_process_cpu_seconds_total",
    "stoker_reads_from",
]
TERMINAL = [
    "\x1b]0;owned\x07",
    "\x1b[2J\x1b[H",
    "\x1b[31m",
    "\x07",
    "\x9b2J",
    "\x00",
    "\r",
    "\x7f",
    "\u202etxt.exe",
    "\u2066",
    "\u2028",
    "\x85",
    "\ufeff",
]
TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(TERMINAL),
    st.lists(st.sampled_from(TERMINAL) | st.text(max_size=4), max_size=6).map("".join),
    st.integers(0, 6000).map(lambda count: "9" * count),
    st.integers(0, 100_000).map(lambda count: "x" * count),
    st.sampled_from(["\u00b2", "\u0663", "\u2460", "\u216b", "\uff11", "1\u00b2", "-1", "0", "007", "4294967296"]),
)
NUMBERS = st.one_of(
    st.sampled_from(["NaN", "+Inf", "-Inf", "inf", "1e308", "-1e308", "1e309", "1e-400", "0x10", "1_000", "\u00b2", "", "-0", "7 "]),
    st.integers(-(10**30), 10**30).map(str),
    st.integers(0, 6000).map(lambda count: "9" * count),
    st.floats().map(repr),
    st.floats(0, 1e6).map(str),
)


def _quoted(value: str, escape: bool) -> str:
    """A label value as the text format writes one (``\\\\``, ``\\"``, ``\\n`` escaped), or raw."""
    if escape:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{value}"'


@st.composite
def _sample_line(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(SERIES) | st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True) | TEXT)
    labels = {"rank": draw(st.sampled_from(["0", "1"]) | TEXT)} if draw(st.booleans()) else {}
    for key in draw(st.lists(st.sampled_from(["stage", "reads_from", "knob", "action"]) | TEXT, max_size=3)):
        labels[key] = draw(st.sampled_from(["decode", "fetch"]) | TEXT)
    escape = draw(st.booleans())
    inside = ",".join(f"{key}={_quoted(value, escape)}" for key, value in labels.items())
    stamp = draw(st.sampled_from(["", " 1700000000000", " x"]))
    return f"{name}{{{inside}}} {draw(NUMBERS)}{stamp}" if labels or draw(st.booleans()) else f"{name} {draw(NUMBERS)}{stamp}"


LINES = st.one_of(
    _sample_line(),
    st.builds(
        lambda name, kind: f"# TYPE {name} {kind}", st.sampled_from(SERIES) | TEXT, st.sampled_from(["counter", "gauge", "info"]) | TEXT
    ),
    st.builds(lambda name, text: f"# HELP {name} {text}", st.sampled_from(SERIES) | TEXT, TEXT),
    TEXT,
)


@st.composite
def pages(draw: st.DrawFn) -> bytes:
    """A hostile metrics page: lines of the text format, in some encoding, perhaps cut."""
    text = "\n".join(draw(st.lists(LINES, min_size=1, max_size=12))) + draw(st.sampled_from(["\n", "", "\n# EOF\n"]))
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8", "utf-16", "latin-1", "surrogates"]))
    if encoding == "surrogates":  # invalid UTF-8: lone surrogates and bytes no decoder takes
        data = text.encode("utf-8", "surrogatepass") + b"\xff\xfe\xc0\x80"
    else:
        data = text.encode(encoding, "replace")
    cut = draw(st.none() | st.integers(0, max(0, len(data) - 1)))
    return data if cut is None else data[:cut]


def _case(page: bytes) -> list[str]:
    """`stoker top`'s screen for a loader's endpoint and one serving ``page``, each scraped twice."""
    from stoker.observe._metrics_page import read_page
    from stoker.observe._top import refresh, render

    clock = iter(range(10))
    served = {GOOD_URL: GOOD_PAGE, CASE_URL: page}

    def fetch(url: str) -> object:
        return read_page(served[url], float(next(clock)))

    previous: dict = {}
    refresh([GOOD_URL, CASE_URL], previous, fetch)  # type: ignore[arg-type]
    return render(refresh([GOOD_URL, CASE_URL], previous, fetch), WIDTH)  # type: ignore[arg-type]


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def main() -> None:
    for line in sys.stdin:
        case = json.loads(line)
        answer: dict[str, object]
        try:
            answer = {"outcome": "decoded", "lines": _case(Path(case["path"]).read_bytes())}
        except Exception as error:  # judged by the parent: nothing may escape `refresh`
            answer = {"outcome": "error", "type": type(error).__name__, "message": str(error)[:2000], "named": False}
        answer["rss_mb"] = _peak_rss_mb()
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
