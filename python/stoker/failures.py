"""One way to say "failed": the `OnError` policy and the `Failure` record.

Every part of stoker that meets a sample (or an item) it cannot deliver describes it with one
`Failure`: which sample, from which source, in which stage, the error, and what was done about
it. Storage reads (``read_many(on_error="skip")``), batch decoding (`stoker.ops.decode_batch`),
the pipeline engine (an op that raised) and the Loader (``on_error``) all record the same type,
so a log, a quarantine file or a report reads them alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ._bounded import shown
from ._deprecation import warn_deprecated

__all__ = ["Failure", "OnError"]

# Characters of a sample's name and of an error in a failure's line: any real one fits.
_NAME_LIMIT = 300
_ERROR_LIMIT = 1_000

OnError = Literal["raise", "skip", "zero"]
"""What to do with a sample that cannot be read or decoded: ``"raise"`` stops with an error
naming it; ``"skip"`` leaves it out (or, in a Loader, puts another sample in its slot);
``"zero"`` zero-fills its slot and marks it invalid. Storage reads take ``"raise"`` and
``"skip"`` only (a read has no slot to zero)."""


@dataclass(frozen=True)
class Failure:
    """One sample (or pipeline item) that was not delivered as read.

    Attributes:
        sample: The sample's key or name (for a pipeline item, its ``repr``, truncated).
        stage: Where it failed: ``"read"`` (a storage read), ``"fetch"`` (the Loader's read),
            ``"decode"``, or a pipeline stage's name.
        error: What went wrong, naming the sample or file (``"Type: message"`` where the type
            says more than the message).
        action: What was done: ``"raised"``, ``"skipped"``, ``"zero-filled"``,
            ``"replaced by <key>"``, or ``"dropped"`` (a pipeline item, counted against its
            stage's ``max_failures``).
        source: The storage or pipeline it came from (``S3Storage(s3://bucket/x)``), where known.
        epoch: The epoch it failed in, where there are epochs.
        position: Its position: in the epoch's order (Loader), in the batch (decode), or in the
            stage's input (pipeline).
        error_type: The exception's qualified class name, where there was an exception.
        traceback: The formatted traceback, where one was logged (pipeline ops).
    """

    sample: str
    stage: str
    error: str
    action: str = "raised"
    source: str = ""
    epoch: int | None = None
    position: int | None = None
    error_type: str = ""
    traceback: str = field(default="", repr=False)

    @property
    def outcome(self) -> str:
        """The action without the replacement's key: ``"raised"``, ``"zero-filled"``, ``"replaced"``..."""
        return self.action.split(" by ")[0]

    # The names each part used before there was one record; each warns and says the new one.
    @property
    def key(self) -> str:
        """Deprecated: `sample`."""
        warn_deprecated("Failure.key is now Failure.sample")
        return self.sample

    @property
    def name(self) -> str:
        """Deprecated: `sample`."""
        warn_deprecated("Failure.name is now Failure.sample")
        return self.sample

    @property
    def reason(self) -> str:
        """Deprecated: `error`."""
        warn_deprecated("Failure.reason is now Failure.error")
        return self.error

    @property
    def message(self) -> str:
        """Deprecated: `error`."""
        warn_deprecated("Failure.message is now Failure.error")
        return self.error

    @property
    def index(self) -> int | None:
        """Deprecated: `position`."""
        warn_deprecated("Failure.index is now Failure.position")
        return self.position

    def describe(self) -> str:
        """One line: the sample, where and why it failed, and what was done. The sample's name
        and the error come from outside (a file, a server's answer): shown escaped and bounded
        (`stoker._bounded.shown`), so a log line, an exception's message or a terminal shows them
        as text."""
        where = f"stage {shown(repr(self.stage), _NAME_LIMIT)}" + (f", item #{self.position}" if self.position is not None else "")
        return f"{shown(repr(self.sample), _NAME_LIMIT)} ({where}): {shown(self.error, _ERROR_LIMIT)} -> {shown(self.action, _NAME_LIMIT)}"

    def __str__(self) -> str:
        return self.describe()

    def to_json(self) -> dict[str, object]:
        """The record as a quarantine file's line holds it (key, stage, reason, epoch, position,
        action, source): the file's format, kept stable whatever the attribute names."""
        return {
            "key": self.sample,
            "stage": self.stage,
            "reason": self.error,
            "epoch": self.epoch,
            "position": self.position,
            "action": self.action,
            "source": self.source,
        }


def error_text(error: BaseException) -> str:
    """``"Type: message"`` for a failure record."""
    return f"{type(error).__name__}: {error}"


def qualified_name(error: BaseException) -> str:
    """The exception's class as ``module.Qualified``."""
    return f"{type(error).__module__}.{type(error).__qualname__}"
