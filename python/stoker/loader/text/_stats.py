"""`TextStats`: what the text path of `TokenLoader` has done, in the figures a user sizes a job by:
tokens per second, the bytes of text behind them, packing efficiency, bad documents, and the
pipeline's own per-stage figures (which stage is the bottleneck, from `stoker.observe.diagnose`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...pipeline import Pipeline, PipelineStats
    from .._failures import FailureLog
    from ._documents import TextChunk

__all__ = ["TextStats"]


@dataclass
class TextStats:
    """Counters of the text path (this rank, since the loader was made).

    Attributes:
        documents: Documents handed to the packer (bad ones included, with no tokens).
        tokens: Tokens handed to the packer.
        text_bytes: Bytes of text tokenized.
        seconds: Time spent in the epochs' iteration (the consumer's work between batches included).
        efficiency: Real tokens over positions in the batches packed so far this epoch.
        bad_documents: Documents that failed (each in `TokenLoader.failures`), by stage and action.
        pipeline: The text pipeline's stats (per stage busy time, queues), or None before the first epoch.
    """

    documents: int = 0
    tokens: int = 0
    text_bytes: int = 0
    seconds: float = 0.0
    efficiency: float = 0.0
    bad_documents: dict[str, int] = field(default_factory=dict)
    pipeline: PipelineStats | None = None

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def megabytes_per_second(self) -> float:
        """Text read and tokenized, MB/s."""
        return self.text_bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def add(self, chunk: TextChunk) -> None:
        self.documents += len(chunk.lengths)
        self.tokens += int(chunk.tokens.size)
        self.text_bytes += chunk.text_bytes

    def snapshot(self, efficiency: float, failures: FailureLog, pipeline: Pipeline[Any] | None) -> TextStats:
        """A copy with the efficiency, the failures and the pipeline's stats filled in."""
        return replace(self, efficiency=efficiency, bad_documents=failures.counts(), pipeline=pipeline.stats() if pipeline else None)

    def __str__(self) -> str:
        bad = sum(self.bad_documents.values())
        return (
            f"{self.documents:,} documents, {self.tokens:,} tokens in {self.seconds:.1f} s: {self.tokens_per_second:,.0f} tokens/s "
            f"({self.megabytes_per_second:.1f} MB/s of text), packing efficiency {self.efficiency:.1%}, {bad} bad document(s)"
        )
