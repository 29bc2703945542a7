"""The straggler of a synchronous job, named in words with its cause.

In a synchronous job (data-parallel training: an all-reduce every step) the slowest rank's input
sets every rank's pace: it waits for data, and the others wait for it inside the step's
collective, so their own data wait stays low. The rank that waits for data much more than the
others is therefore the one holding the job back, and its own figures say why, compared with the
others':

- other processes use much more of the cores it may run on than of the others' (the kernel's
  per-core busy time, less the rank's own CPU time): its host's CPU is taken;
- one of its stages takes several times the others' median time per item: for the storage
  reads, where they go (over the network, or from a local disk) names the slow part.

`RankFigures` is one rank's figures over an interval; `straggler_verdict` compares them. The
figures travel between ranks as JSON (`RankFigures.from_json` checks every field: they are
another process's bytes), gathered by `StragglerWatch` or read from metrics endpoints by
`stoker top`.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .._bounded import parse_json

__all__ = ["RankFigures", "StageFigures", "straggler_verdict"]

# The straggler waits this share of its time more than the others' median, and this many times it.
STRAGGLER_WAIT = 0.10
STRAGGLER_FACTOR = 3.0
# A stage this many times slower per item than the others' median is the cause.
SLOW_STAGE_FACTOR = 1.5
# Other processes that use this share of a rank's cores, and this many times the others'
# median, take its CPU.
CPU_TAKEN = 0.3
CPU_FACTOR = 1.5
# The storage-read stage of a Loader.
READ_STAGE = "fetch"
# Bytes a rank's figures may take as JSON (a few hundred in practice; a bound for a bad peer).
MAX_FIGURES_BYTES = 64 << 10


@dataclass(frozen=True)
class StageFigures:
    """One stage over an interval: items put out and task-seconds spent (over its concurrency)."""

    name: str
    items: float
    busy_seconds: float

    @property
    def seconds_per_item(self) -> float:
        return self.busy_seconds / self.items if self.items > 0 else 0.0


@dataclass(frozen=True)
class RankFigures:
    """One rank's figures over an interval.

    Attributes:
        rank: The rank.
        host: Its host's name.
        seconds: Wall time of the interval.
        wait_seconds: Of it, time the training loop waited for data.
        steps: Batches taken in the interval.
        stages: Its pipeline's stages.
        others_cpu_share: Share of the cores it may run on (its affinity) that other processes
            used (None: not measured here).
        reads_from: Where its storage reads go, in words (``"over the network (s3://b/d)"``,
            ``"from local disk (/data/shards)"``); empty when unknown.
    """

    rank: int
    host: str
    seconds: float
    wait_seconds: float
    steps: int
    stages: tuple[StageFigures, ...] = ()
    others_cpu_share: float | None = None
    reads_from: str = ""

    @property
    def wait_share(self) -> float:
        return min(1.0, self.wait_seconds / self.seconds) if self.seconds > 0 else 0.0

    def stage(self, name: str) -> StageFigures | None:
        return next((stage for stage in self.stages if stage.name == name), None)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "rank": self.rank,
                "host": self.host,
                "seconds": self.seconds,
                "wait_seconds": self.wait_seconds,
                "steps": self.steps,
                "stages": [[stage.name, stage.items, stage.busy_seconds] for stage in self.stages],
                "others_cpu_share": self.others_cpu_share,
                "reads_from": self.reads_from,
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> RankFigures:
        """Figures another rank sent.

        Raises:
            ValueError: ``data`` is not a rank's figures (too long, not JSON, a field missing,
                of the wrong type, negative or not finite).
        """
        if len(data) > MAX_FIGURES_BYTES:
            raise ValueError(f"a rank's figures of {len(data)} bytes (at most {MAX_FIGURES_BYTES})")
        try:
            raw = parse_json(data, "a rank's straggler figures", max_bytes=MAX_FIGURES_BYTES)
            share = raw["others_cpu_share"]
            stages = tuple(StageFigures(_text(name), _amount(items), _amount(busy)) for name, items, busy in _list(raw["stages"])[:64])
            return cls(
                rank=int(_amount(raw["rank"])),
                host=_text(raw["host"]),
                seconds=_amount(raw["seconds"]),
                wait_seconds=_amount(raw["wait_seconds"]),
                steps=int(_amount(raw["steps"])),
                stages=stages,
                others_cpu_share=None if share is None else min(1.0, _amount(share)),
                reads_from=_text(raw["reads_from"]),
            )
        except (KeyError, TypeError, ValueError, UnicodeDecodeError) as error:
            raise ValueError(f"not a rank's straggler figures: {error}") from error


def _amount(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{value!r} is not a finite amount")
    return float(value)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not text")
    return value[:200]


def _list(value: object) -> list[list[object]]:
    if not isinstance(value, list) or not all(isinstance(item, list) and len(item) == 3 for item in value):
        raise ValueError("stages are not [name, items, busy seconds] triples")
    return value


def straggler_verdict(ranks: Sequence[RankFigures]) -> str | None:
    """The rank that holds a synchronous job back and why, in one sentence; None when no rank
    waits for data much more than the others (or there is only one).

    Example: ``rank 1 (host h1) waits for data 31% of its steps, the others 2%: its storage reads
    (over the network, s3://b/d) take 3.4x the others' median time per item; the others wait for
    it at every step``.
    """
    live = [figures for figures in ranks if figures.seconds > 0]
    if len(live) < 2:
        return None
    slowest = max(live, key=lambda figures: figures.wait_share)
    others = [figures for figures in live if figures is not slowest]
    usual = statistics.median(figures.wait_share for figures in others)
    if slowest.wait_share < usual + STRAGGLER_WAIT or slowest.wait_share < STRAGGLER_FACTOR * max(usual, 0.01):
        return None
    return (
        f"rank {slowest.rank} (host {slowest.host}) waits for data {slowest.wait_share:.0%} of its steps, "
        f"the others {usual:.0%}: {_cause(slowest, others)}; the others wait for it at every step"
    )


def _cause(slowest: RankFigures, others: Sequence[RankFigures]) -> str:
    """What differs in the straggler's own figures, most telling first."""
    stage, ratio = _slowest_stage(slowest, others)
    stage_words = ""
    if stage is not None:
        if stage == READ_STAGE:
            where = f" ({slowest.reads_from})" if slowest.reads_from else ""
            stage_words = f"its storage reads{where} take {ratio:.1f}x the others' median time per item"
        else:
            stage_words = f"its {stage} stage takes {ratio:.1f}x the others' median time per item"
    shares = [figures.others_cpu_share for figures in others if figures.others_cpu_share is not None]
    mine = slowest.others_cpu_share
    if mine is not None and shares:
        usual = statistics.median(shares)
        if mine >= CPU_TAKEN and mine >= CPU_FACTOR * max(usual, 0.05):
            cpu = (
                f"other processes on host {slowest.host} use {mine:.0%} of the cores it may run on, "
                f"on the others' hosts {usual:.0%}: its CPU is taken"
            )
            return f"{cpu} ({stage_words})" if stage_words else cpu
    if stage_words:
        return stage_words
    return "none of its stages is slower per item than the others' and its CPU is not taken; its batches wait elsewhere"


def _slowest_stage(slowest: RankFigures, others: Sequence[RankFigures]) -> tuple[str | None, float]:
    """The straggler's stage with the largest time per item against the others' median, if it
    is at least `SLOW_STAGE_FACTOR` times slower."""
    found: tuple[str | None, float] = (None, 0.0)
    for stage in slowest.stages:
        theirs = [
            other.seconds_per_item for figures in others if (other := figures.stage(stage.name)) is not None and other.seconds_per_item > 0
        ]
        if stage.seconds_per_item <= 0 or not theirs:
            continue
        ratio = stage.seconds_per_item / statistics.median(theirs)
        if ratio >= SLOW_STAGE_FACTOR and ratio > found[1]:
            found = (stage.name, ratio)
    return found
