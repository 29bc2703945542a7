"""How an op ends a whole run (`AbortPipeline`), and how a failed item is shown (`short_repr`).

The errors a pipeline raises to its consumer are `stoker.errors`' `PipelineError` family; a failed
item is recorded as a `stoker.failures.Failure`."""

from __future__ import annotations

from typing import Any

__all__ = ["AbortPipeline", "short_repr"]


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


def short_repr(item: Any, limit: int = 200) -> str:
    """``repr`` of an item for logs and errors, cut to ``limit`` characters."""
    try:
        text = repr(item)
    except Exception as error:  # a broken __repr__ must not hide the real failure
        text = f"<{type(item).__name__} with failing repr: {error}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
