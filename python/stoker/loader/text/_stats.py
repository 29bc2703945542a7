"""`TextStats`: what `TokenLoader` has done, in the figures a user sizes a job by: documents read,
tokens delivered per second, the bytes of text behind them, packing efficiency, bad documents,
and the text pipeline's own per-stage figures (which stage is the bottleneck, from
`stoker.observe.diagnose`).

Tokens are counted as the batches are delivered, not as documents enter the packer: the packer
and the pipeline read ahead, so what entered them says how far reading got, not what the loop
was fed. Documents are counted as they are read, those read again to rebuild a resumed packer's
unfinished rows included, so a resumed loader reports its own work from its first batch."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..._units import byte_rate

if TYPE_CHECKING:
    from ...pipeline import Pipeline, PipelineStats
    from .._failures import FailureLog

__all__ = ["TextStats"]


@dataclass
class TextStats:
    """Counters of a `TokenLoader` (this rank, since the loader was made, across epochs and a
    resume). Owned by the thread that iterates the loader.

    Attributes:
        documents: Documents this loader read (bad ones included), those read again to resume
            the packer's unfinished rows included.
        tokens: Real tokens (padding not counted) in the batches this loader delivered.
        text_bytes: Bytes of raw text read and tokenized (0 for tokenized documents).
        seconds: Time spent in the epochs' iteration (the consumer's work between batches
            included) and reading documents again to resume.
        efficiency: Real tokens over positions in the batches packed so far this epoch.
        bad_documents: Documents that failed (each in `TokenLoader.failures`), by stage and action.
        pipeline: The text pipeline's stats (per stage busy time, queues), or None before the first epoch.
        raw_text: Whether the documents are raw text (tokenized by the loader).
    """

    documents: int = 0
    tokens: int = 0
    text_bytes: int = 0
    seconds: float = 0.0
    efficiency: float = 0.0
    bad_documents: dict[str, int] = field(default_factory=dict)
    pipeline: PipelineStats | None = None
    raw_text: bool = True

    @property
    def tokens_per_second(self) -> float:
        """Real tokens delivered a second of iteration."""
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def megabytes_per_second(self) -> float:
        """Text read and tokenized, MB/s (10**6 bytes)."""
        return self.text_bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def read(self, documents: int, text_bytes: int = 0) -> None:
        """Count ``documents`` read (and ``text_bytes`` of their text)."""
        self.documents += documents
        self.text_bytes += text_bytes

    def delivered(self, tokens: int, seconds: float) -> None:
        """Count a batch of ``tokens`` real tokens delivered after ``seconds`` of iteration."""
        self.tokens += tokens
        self.seconds += seconds

    def snapshot(self, efficiency: float, failures: FailureLog, pipeline: Pipeline[Any] | None) -> TextStats:
        """A copy with the efficiency, the failures and the pipeline's stats filled in."""
        return replace(self, efficiency=efficiency, bad_documents=failures.counts(), pipeline=pipeline.stats() if pipeline else None)

    def __str__(self) -> str:
        bad = sum(self.bad_documents.values())
        text = f" from {byte_rate(self.text_bytes / self.seconds if self.seconds > 0 else 0.0)} of text" if self.raw_text else ""
        return (
            f"{self.documents:,} documents read, {self.tokens:,} tokens delivered in {self.seconds:.1f} s: "
            f"{self.tokens_per_second:,.0f} tokens/s{text}, packing efficiency {self.efficiency:.1%}, {bad} bad document(s)"
        )
