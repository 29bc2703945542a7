"""Errors the pipeline raises to its consumer, and the record of one failed item."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AbortPipeline", "FailureRecord", "PipelineError", "PipelineFailureError", "PipelineStoppedError"]

# How many failures an error message spells out; the full list is on the exception.
_LISTED_IN_MESSAGE = 10


@dataclass(frozen=True)
class FailureRecord:
    """One item an op failed on: which stage, which item, what went wrong.

    Attributes:
        stage: Name of the stage whose op raised.
        index: Position of the item in that stage's input (0-based).
        item: ``repr`` of the item, truncated, so the record never keeps the item alive.
        error_type: Qualified name of the exception class.
        message: ``str`` of the exception.
        traceback: The formatted traceback, as logged.
    """

    stage: str
    index: int
    item: str
    error_type: str
    message: str
    traceback: str

    def describe(self) -> str:
        """One line naming the stage, the item and the error."""
        return f"stage {self.stage!r}, item #{self.index} {self.item}: {self.error_type}: {self.message}"


class PipelineError(RuntimeError):
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

    def __init__(self, stage: str, max_failures: int, failure_count: int, failures: list[FailureRecord]) -> None:
        self.stage = stage
        self.failure_count = failure_count
        self.max_failures = max_failures
        self.failures = list(failures)
        lines = [f"  - {record.describe()}" for record in self.failures[:_LISTED_IN_MESSAGE]]
        if failure_count > _LISTED_IN_MESSAGE:
            lines.append(f"  ... and {failure_count - _LISTED_IN_MESSAGE} more (see .failures and the log)")
        super().__init__(
            f"stage {stage!r} failed on {failure_count} items, more than its "
            f"max_failures={max_failures}; the pipeline stopped. Failures:\n" + "\n".join(lines)
        )


class AbortPipeline(Exception):
    """Raised by an op or a source to end the pipeline at once and hand ``error`` to the
    consumer: a verdict about the whole run (a store that stays down, a failure budget spent),
    not an item that failed, so it is neither counted nor logged as one, whatever the stage's
    ``max_failures``. Items not yet taken are not delivered.

    Attributes:
        error: What the consumer's next request raises.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error
