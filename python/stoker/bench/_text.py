"""`stoker bench CORPUS --tokenizer tokenizer.json`: the text path measured on the user's corpus.

`TokenLoader` alone over the corpus for a while (the loader measured alone, as the image run
is), then the figures a user sizes a job by: tokens per second, MB/s of text, packing
efficiency, CPU in cores of this machine and per million tokens a second (what a GPU eating N
tokens/s costs in CPU), peak memory, the bad documents by name, and the bottleneck in words.
The peers (Hugging Face ``datasets`` with a greedy packer, a torch DataLoader) are compared on a
generated corpus by ``python benchmarks/text/token_batches.py``.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass, field
from typing import Any

from .._units import byte_rate
from ..observe import CpuLimits, CpuWatch
from ._memory import PeakMemory

__all__ = ["TextRun", "format_text_run", "run_text_loader"]


@dataclass
class TextRun:
    """What `run_text_loader` measured."""

    source: str
    tokenizer: str
    seconds: float
    documents: int
    tokens: int
    text_bytes: int
    efficiency: float
    cpu_cores: float
    cores: int
    peak_rss_mb: float
    first_batch_seconds: float
    diagnosis: str
    bad_documents: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def run_text_loader(
    source: str, tokenizer: str, *, text_field: str = "text", context_length: int = 2048, batch_size: int = 8, duration: float = 20.0
) -> TextRun:
    """Run `TokenLoader` over ``source`` for about ``duration`` seconds (epochs repeat if the
    corpus is shorter) and measure it.

    Raises:
        StorageError, ConfigurationError: As `TokenLoader` raises them for the corpus or tokenizer.
    """
    from ..failures import Failure
    from ..loader import FailurePolicy, TokenLoader

    cores = CpuLimits.read().affinity
    usage_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    first_batch: float | None = None
    with CpuWatch() as watch, PeakMemory() as peak:
        loader = TokenLoader(
            source,
            tokenizer=tokenizer,
            text_field=text_field,
            context_length=context_length,
            batch_size=batch_size,
            failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None),
        )
        positions = real = 0
        epoch = 0
        while time.perf_counter() - started < duration:
            loader.set_epoch(epoch)
            for batch in loader:
                first_batch = first_batch if first_batch is not None else time.perf_counter() - started
                positions += batch.positions
                real += batch.real_tokens
                if time.perf_counter() - started >= duration:
                    break
            epoch += 1
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_seconds = (usage.ru_utime - usage_before.ru_utime) + (usage.ru_stime - usage_before.ru_stime)
    stats = loader.stats()
    failures: list[Failure] = loader.failures
    return TextRun(
        source=source,
        tokenizer=loader.text.tokenizer.name if loader.text else tokenizer,
        seconds=seconds,
        documents=stats.documents,
        tokens=real,
        text_bytes=stats.text_bytes,
        efficiency=real / positions if positions else 0.0,
        cpu_cores=cpu_seconds / seconds,
        cores=cores,
        peak_rss_mb=peak.megabytes,
        first_batch_seconds=first_batch or 0.0,
        diagnosis=loader.diagnose(training_step=False, contention=watch.contention).message,
        bad_documents=[
            {"key": failure.sample, "stage": failure.stage, "reason": failure.error, "action": failure.action} for failure in failures
        ],
    )


def format_text_run(run: TextRun) -> str:
    """The run as a person reads it."""
    rate = run.tokens_per_second
    per_million = run.cpu_cores / (rate / 1e6) if rate else float("nan")
    return "\n".join(
        [
            f"stoker bench: {run.source}; {run.tokenizer}; {run.cores} cores",
            f"TokenLoader ({run.seconds:.0f} s): {rate:,.0f} tokens/s from {byte_rate(run.text_bytes / run.seconds if run.seconds else 0.0)} of text "
            f"({run.documents:,} documents), packing efficiency {run.efficiency:.1%}, CPU {100 * run.cpu_cores / run.cores:.0f}% of "
            f"{run.cores} cores ({per_million:.2f} cores per million tokens/s), peak RSS {run.peak_rss_mb:.0f} MB, "
            f"first batch {run.first_batch_seconds:.2f} s",
            "peers on a generated corpus (HF datasets + a greedy packer, a torch DataLoader): python benchmarks/text/token_batches.py",
            f"\ndiagnosis: {run.diagnosis}",
        ]
    )
