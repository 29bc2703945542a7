"""What every rank saves alike in a Loader's state, read once for all of them and checked."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError

__all__ = ["the_same_on_every_rank"]


def the_same_on_every_rank(saved: list[Any], *, ranks: int, key: str) -> Any | None:
    """The one value of a part every rank saves alike (a schedule: the ranks move in lockstep),
    or None when no state has it.

    Raises:
        ConfigurationError: Some of the ``ranks`` states have it and others not, or they differ
            (was: the first one taken, so a state edited on one rank resumed every rank on it).
    """
    if not saved:
        return None
    if len(saved) != ranks or any(value != saved[0] for value in saved[1:]):
        raise ConfigurationError(
            f"Loader state: {len(saved)} of the {ranks} ranks' states hold a {key!r} part, and every rank saves the same one: "
            + ("some lack it" if len(saved) != ranks else "theirs differ")
            + " (states of different runs, or edited)"
        )
    return saved[0]
