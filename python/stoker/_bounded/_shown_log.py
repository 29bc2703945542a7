"""stoker's log lines carry outside text (sample keys, file names, servers' messages) shown safe.

Every stoker module takes its logger from `shown_logger`: a logger whose filter passes each
argument of a record through `shown` before any handler formats it, so a key that holds an ESC or
a newline reaches a terminal or a log file escaped, on one line, and bounded. The message
templates are stoker's own and stay as written; numbers stay numbers (``%d``, ``%.1f`` work on
them as before). A traceback logged with ``exc_info`` is shown the same way, its lines kept.
Text stoker composes over several lines itself (a stage table) is passed as `Lines`, which keeps
its newlines and escapes the rest.

A filter on a logger sees only the records logged to that very logger, so the filter goes on
every logger stoker logs to, when the module asks for it; tests/test_architecture.py holds that
no module takes a logger another way.
"""

from __future__ import annotations

import logging
import numbers
import threading
from collections.abc import Mapping

from ._shown_text import shown

__all__ = ["LOG_LIMIT", "Lines", "shown_logger"]

# Characters of one argument in a log line: an error message with its file and sample names fits.
LOG_LIMIT = 2_000
# Characters of a traceback or of `Lines`: a deep traceback fits; a hostile message does not fill the log.
_LINES_LIMIT = 20_000
# Guards the check-then-add of the filter: two threads may import modules that share a logger.
_adding = threading.Lock()


class Lines(str):
    """Text stoker composed over several lines (a table of stages): its newlines kept in a log
    record, everything else escaped as any argument's."""


class _Shown:
    """One argument of a log record, formatted (``%s``, ``%r``) through `shown`."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __str__(self) -> str:
        if isinstance(self.value, Lines):
            return shown(self.value, _LINES_LIMIT, lines=True)
        return shown(str(self.value), LOG_LIMIT)

    def __repr__(self) -> str:
        return shown(repr(self.value), LOG_LIMIT)


def _argument(value: object) -> object:
    # Numbers are formatted by %d, %g and the like, and carry no text.
    return value if isinstance(value, numbers.Number) else _Shown(value)


class _ShownArguments(logging.Filter):
    """Passes every argument of a record, and its traceback, through `shown`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str):  # an object logged as the message itself
            record.msg = _Shown(record.msg)
        arguments = record.args
        if isinstance(arguments, Mapping):
            record.args = {key: _argument(value) for key, value in arguments.items()}
        elif arguments:
            record.args = tuple(_argument(value) for value in arguments)
        if record.exc_info and not record.exc_text:
            # Handlers reuse exc_text when it is set (logging.Formatter.format).
            record.exc_text = shown(logging.Formatter().formatException(record.exc_info), _LINES_LIMIT, lines=True)
        return True


_FILTER = _ShownArguments()


def shown_logger(name: str) -> logging.Logger:
    """The logger ``name``, its records' arguments shown safe (`shown`).

    Args:
        name: The logger's name (``"stoker.storage"``).

    Returns:
        The logger, with the filter added once.
    """
    logger = logging.getLogger(name)
    with _adding:
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    return logger
