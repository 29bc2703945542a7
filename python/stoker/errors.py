"""Every exception stoker raises on its own account, under one base: `StokerError`.

One family per concern, so ``except`` can be as wide or as narrow as a training script needs::

    StokerError
    ├── ConfigurationError        a bad option or combination, when it is built (also ValueError)
    ├── StorageError              a dataset cannot be opened or read (also OSError)
    │   ├── ShardError, StaleIndexError, CorruptSampleError
    │   ├── JsonError             outside JSON not read: not JSON, or past a bound (also ValueError)
    │   ├── StorageUnavailableError   the store stayed down past the retry deadline
    │   │   └── StorageUnreachableError   at once: its name does not resolve, its TLS fails
    │   └── StorageClosedError
    ├── DecodeError               a sample's bytes cannot be decoded (also ValueError)
    │   ├── ImageDecodeError, MediaDecodeError
    │   └── BatchDecodeError      samples of a `decode_batch` call failed under "raise"
    ├── MediaUnavailableError     no FFmpeg this stoker supports (also ImportError)
    ├── NativePanicError          the native code (or a Rust library it runs) panicked, caught
    │                             before it could end the process (also RuntimeError)
    ├── SampleError               a Loader's sample failed under on_error="raise" (also RuntimeError)
    ├── TooManyBadSamplesError    an epoch's bad-sample budget ran out (also RuntimeError)
    ├── ProvenanceError           what was recorded does not match: a replayed sample changed, a
    │                             resume on another dataset or configuration (also ValueError)
    └── PipelineError             the engine stopped (also RuntimeError)
        ├── PipelineStoppedError, PipelineFailureError

Each keeps the built-in base it had (``OSError``, ``ValueError``...), so code written against
those still catches them. Errors that list samples carry `stoker.failures.Failure` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # For annotations only: at run time errors imports nothing of stoker's, so that the bounded
    # parts can raise its types while a failure record shows its text through them.
    from .failures import Failure, OnError

__all__ = [
    "BatchDecodeError",
    "ConfigurationError",
    "CorruptSampleError",
    "DecodeError",
    "ImageDecodeError",
    "JsonError",
    "MediaDecodeError",
    "MediaUnavailableError",
    "NativePanicError",
    "PipelineError",
    "PipelineFailureError",
    "PipelineStoppedError",
    "ProvenanceError",
    "SampleError",
    "ShardError",
    "StaleIndexError",
    "StokerError",
    "StorageClosedError",
    "StorageError",
    "StorageUnavailableError",
    "StorageUnreachableError",
    "TooManyBadSamplesError",
]

# How many failures an error message spells out; the full list is on the exception.
_LISTED = 10


def _listing(failures: Sequence[Failure], total: int, where: str) -> str:
    lines = [f"  - {failure.describe()}" for failure in failures[:_LISTED]]
    if total > _LISTED:
        lines.append(f"  ... and {total - _LISTED} more (see {where})")
    return "\n".join(lines)


def check_on_error(value: object, allowed: Sequence[str] = ("raise", "skip", "zero"), *, why: str = "") -> OnError:
    """``value`` as an `OnError`, or `ConfigurationError` naming what is allowed: the one check of
    ``on_error`` wherever it is taken (a read allows ``"raise"`` and ``"skip"`` only, ``why``
    says so)."""
    if value not in allowed:
        choices = ", ".join(f'"{choice}"' for choice in allowed[:-1]) + f' or "{allowed[-1]}"'
        raise ConfigurationError(f"on_error must be {choices}{f' ({why})' if why else ''}, got {value!r}")
    return value  # type: ignore[return-value]


class StokerError(Exception):
    """The base of every error stoker raises on its own account."""


class ConfigurationError(StokerError, ValueError):
    """An option, or a combination of options, that cannot work; raised where it is built."""


# ---- storage -------------------------------------------------------------------------------


class StorageError(StokerError, OSError):
    """A dataset cannot be opened or read; the message names the file (and the sample)."""


class ShardError(StorageError):
    """A tar shard is truncated, malformed, or does not match its index."""


class StaleIndexError(StorageError):
    """An index no longer matches the data it describes (the data changed after indexing)."""


class CorruptSampleError(StorageError):
    """A sample's bytes fail their checksum."""


class JsonError(StorageError, ValueError):
    """JSON from outside (an index, a state, metadata, a manifest, a document) that stoker does
    not read: not JSON, or past a bound of its reader (size, nesting depth, digits of a number).
    The message names where it came from and the bound. Also a ``ValueError``, as the standard
    library's ``json`` raises, so code that caught that still catches it.

    Attributes:
        source: Where the JSON came from (a path, a URL, a file and line).
        reason: What is wrong, without the source (for a caller that names it its own way).
    """

    def __init__(self, message: str, *, source: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.source = source
        self.reason = reason or message

    def __reduce__(self) -> tuple[object, ...]:  # keeps the attributes across processes
        return (_rebuild_json_error, (str(self), self.source, self.reason))


def _rebuild_json_error(message: str, source: str, reason: str) -> JsonError:
    return JsonError(message, source=source, reason=reason)


class StorageUnavailableError(StorageError):
    """A store stayed unreachable (refused or lost connections, timeouts, 5xx, throttling) past
    the retry deadline, or cannot be reached at all (`StorageUnreachableError`). Never a
    per-sample failure to skip: the samples were not read, so nothing was delivered, and a resume
    reads them again.

    Attributes:
        store: The store, e.g. ``s3://bucket/prefix`` (never credentials).
        samples: The samples that could not be read (names or URLs).
        seconds: How long the reads kept trying.
    """

    def __init__(self, message: str, *, store: str = "", samples: tuple[str, ...] = (), seconds: float = 0.0) -> None:
        super().__init__(message)
        self.store = store
        self.samples = samples
        self.seconds = seconds

    def __reduce__(self) -> tuple[object, ...]:  # keeps the attributes across processes
        return (_rebuild_unavailable, (str(self), self.store, self.samples, self.seconds))


def _rebuild_unavailable(message: str, store: str, samples: tuple[str, ...], seconds: float) -> StorageUnavailableError:
    return StorageUnavailableError(message, store=store, samples=samples, seconds=seconds)


class StorageUnreachableError(StorageUnavailableError):
    """A store cannot be read for a reason that waiting does not change, raised at once instead
    of retried to the deadline: its host name does not resolve, or its TLS certificate is not
    trusted (or the TLS handshake fails). The message names the host and the cause in one line.
    A `StorageUnavailableError` all the same: nothing was read, never a sample to skip.

    Attributes:
        store: The host (``host:port``), as the message names it.
        cause: The cause in words (``"the TLS certificate is not trusted: ..."``).
    """

    def __init__(self, message: str, *, store: str = "", cause: str = "") -> None:
        super().__init__(message, store=store)
        self.cause = cause or message

    def __reduce__(self) -> tuple[object, ...]:  # keeps the attributes across processes
        return (_rebuild_unreachable, (str(self), self.store, self.cause))


def _rebuild_unreachable(message: str, store: str, cause: str) -> StorageUnreachableError:
    return StorageUnreachableError(message, store=store, cause=cause)


class StorageClosedError(StorageError):
    """The storage was closed while something (a Loader) still read from it: close a storage
    after the loop that reads it ends, or open it with ``with`` around that loop."""


# ---- decoding ------------------------------------------------------------------------------


class DecodeError(StokerError, ValueError):
    """A sample's bytes could not be decoded or transformed; the message names it."""


class ImageDecodeError(DecodeError):
    """One image could not be decoded or transformed; the message names it."""


class MediaDecodeError(DecodeError):
    """One audio or video sample could not be decoded; the message names it and says why."""


class BatchDecodeError(DecodeError):
    """Samples of a batch failed under ``on_error="raise"``; ``.failures`` lists them all.

    ``.batch`` holds the batch as decoded (a `stoker.ops.DecodedBatch`), failed slots
    zero-filled, for callers that want to log and go on.
    """

    def __init__(self, failures: list[Failure], batch: Any) -> None:
        self.failures = failures
        self.batch = batch
        super().__init__(f"{len(failures)} of {len(batch.valid)} samples failed:\n{_listing(failures, len(failures), '.failures')}")


class MediaUnavailableError(StokerError, ImportError):
    """Audio and video decoding cannot run here: no FFmpeg this build of stoker supports was found.

    Images, storage, the Loader and the CLI are unaffected; the message says what to install.
    """


class NativePanicError(StokerError, RuntimeError):
    """Native code panicked (stoker's own, or the Rust library it ran: the tokenizers package),
    and the panic was caught before it could end the process: a bug, reported by name instead of
    the ``PanicException`` that ``except Exception`` does not catch. The message names the call
    and, where it has one, the sample or file. The failure policy handles it as any bad sample;
    please report it with the input that caused it.
    """


# ---- the Loader's bad samples --------------------------------------------------------------


class SampleError(StokerError, RuntimeError):
    """A sample failed under ``on_error="raise"``; ``.failures`` lists the batch's bad samples."""

    def __init__(self, failures: list[Failure]) -> None:
        self.failures = failures
        super().__init__(
            f"{len(failures)} sample(s) of a batch failed and on_error='raise' (use on_error='skip' or 'zero' "
            f"with max_bad_samples to go on):\n{_listing(failures, len(failures), 'loader.failures')}"
        )


class TooManyBadSamplesError(StokerError, RuntimeError):
    """More samples failed in an epoch than ``max_bad_samples`` allows; ``.failures`` lists them."""

    def __init__(self, count: int, budget: int, failures: list[Failure]) -> None:
        self.count = count
        self.budget = budget
        self.failures = failures
        super().__init__(
            f"{count} samples failed this epoch, more than max_bad_samples={budget}; the epoch stopped:\n"
            f"{_listing(failures, count, 'loader.failures')}"
        )


class ProvenanceError(StokerError, ValueError):
    """What a run recorded does not match what is there now: a replayed batch's sample changed
    since (each one is named), or a state is loaded into a Loader over another dataset or
    configuration (the message says what differs)."""


# ---- the pipeline engine -------------------------------------------------------------------


class PipelineError(StokerError, RuntimeError):
    """Base class of errors raised by a running pipeline."""


class PipelineStoppedError(PipelineError):
    """The pipeline was stopped (or already consumed) and yields no more items."""


class PipelineFailureError(PipelineError):
    """A stage failed on more items than its ``max_failures`` allows; the pipeline stopped.

    Attributes:
        stage: The stage whose failure budget ran out.
        failure_count: How many items failed in that stage.
        failures: The failures recorded in that stage, oldest first (up to the stage's record cap).
    """

    def __init__(self, stage: str, max_failures: int, failure_count: int, failures: list[Failure]) -> None:
        self.stage = stage
        self.failure_count = failure_count
        self.max_failures = max_failures
        self.failures = list(failures)
        super().__init__(
            f"stage {stage!r} failed on {failure_count} items, more than its "
            f"max_failures={max_failures}; the pipeline stopped. Failures:\n"
            + _listing(self.failures, failure_count, ".failures and the log")
        )
