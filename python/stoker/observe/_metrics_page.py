"""A metrics page read for `stoker top`: Prometheus text from an endpoint, checked before use.

The page is another process's bytes, and any server can answer at a URL a user typed: every
value `stoker top` takes from it is parsed defensively. A page that cannot be parsed, a figure
that is not a finite number of a sane size (NaN, Inf, 1e300), a rank that is not a small whole
number (a superscript digit, 5,000 digits) or more stages than a pipeline has make the page
`UnreadablePage`, named with why; `stoker top` shows that endpoint so and the others as usual.
Label values (stage names, where reads go) are kept as the page has them and escaped when shown
(`stoker._bounded.shown`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .._bounded import shown

__all__ = ["Scrape", "UnreadablePage", "read_page"]

# Only these series are read; the rest of a page (the Python process's own metrics) is passed over.
_PREFIX = "stoker_"
# A figure's size at most: a counter of seconds this large ran 30 million years; anything larger
# is not a loader's, and differences of two stay finite.
_LARGEST = 1e15
# A rank as serve_metrics writes it: a small whole number in ASCII digits.
_RANK = re.compile(r"[0-9]{1,9}")
# Stages a pipeline has at most (a loader's has under ten): a bound on the lines one endpoint takes.
MAX_STAGES = 64


class UnreadablePage(ValueError):
    """A metrics page whose figures cannot be used; the message says why."""


@dataclass
class Scrape:
    """One endpoint's metrics at one moment: values by (metric name, labels)."""

    time: float
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    def get(self, name: str, **labels: str) -> float:
        return self.values.get((name, tuple(sorted(labels.items()))), 0.0)

    def stages(self) -> list[str]:
        """Stage names, in the order the endpoint lists them."""
        names: dict[str, None] = {}
        for metric, labels in self.values:
            if metric == "stoker_stage_items_total":
                names.update({value: None for key, value in labels if key == "stage"})
        return list(names)

    def rank(self) -> str:
        return next((value for (metric, labels) in self.values for key, value in labels if key == "rank"), "?")


def _samples(page: bytes) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every ``stoker_`` sample on the page."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as error:  # scrape() asks for it first; this is for direct callers
        raise UnreadablePage("prometheus_client (its text-format parser) is not installed") from error
    try:
        return [
            (sample.name, sample.labels, sample.value)
            for family in text_string_to_metric_families(page.decode("utf-8", "replace"))
            if family.name.startswith(_PREFIX)
            for sample in family.samples
        ]
    except Exception as error:  # noqa: BLE001 (the parser's errors on bad text are of many types)
        raise UnreadablePage(f"not Prometheus text: {type(error).__name__}: {shown(error, 120)}") from None


def _series(name: str, labels: dict[str, str]) -> str:
    """A series as the page names it, shown safe and short: ``stoker_step{rank='0'}``."""
    return shown(name + "{" + ",".join(f"{key}={label!r}" for key, label in labels.items()) + "}", 120)


def read_page(page: bytes, time: float) -> Scrape:
    """The figures on a metrics page (``page``, fetched at ``time``).

    Raises:
        UnreadablePage: The page cannot be parsed, or a figure, rank or stage count is not a
            loader's (the message names it, escaped and shortened).
    """
    result = Scrape(time)
    for name, labels, value in _samples(page):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or abs(value) > _LARGEST:
            raise UnreadablePage(f"{_series(name, labels)} is {shown(value, 40)}, not a loader's figure")
        rank = labels.get("rank")
        if rank is not None and _RANK.fullmatch(rank) is None:
            raise UnreadablePage(f"{_series(name, labels)}: rank {shown(rank, 40)} is not a rank (a whole number of at most 9 digits)")
        result.values[(name, tuple(sorted(labels.items())))] = float(value)
    if len(stages := result.stages()) > MAX_STAGES:
        raise UnreadablePage(f"{len(stages):,} stages, more than a pipeline has ({MAX_STAGES})")
    return result
