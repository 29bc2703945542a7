"""A curriculum of filters by step: which filter an epoch reads under, chosen by the step it begins at.

`Loader.set_filter_schedule({0: "length < 512", 40_000: "length < 2048", 90_000: None})` names
the filter in force from each step on (None: none beyond the Loader's own ``where=``). A filter
decides which samples an epoch holds, and every rank must agree on that without talking to the
others, so a point takes effect at the first epoch that begins at or after its step: the epoch's
samples, its order, equal steps per rank and `verify_epoch`'s proof are all over the samples
that filter keeps. Within an epoch, samples are cut out with `Loader.exclude`.

The schedule is data, not a function: it is saved in the state with the filter the current epoch
reads under, so a resume continues it without it being given again, and a state is checked like
any input (a schedule from a damaged or hostile file is refused by name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ConfigurationError

__all__ = ["FilterSchedule"]

_MAX_POINTS = 1024  # a curriculum has a handful of points; a state with more is not ours
_LONGEST = 4000  # characters of one filter (as `Sampling(where=...)` takes)


class FilterSchedule:
    """The filter from each step on.

    Args:
        points: ``{step: expression or None}``, steps whole numbers >= 0; an expression as
            `Sampling(where=...)` takes over the storage's own columns, None for no filter.

    Raises:
        ConfigurationError: Not such a mapping, a step that is not a whole number >= 0, an
            expression that is not text, or more than 1,024 points (each named).
    """

    def __init__(self, points: Mapping[int, str | None]) -> None:
        if not isinstance(points, Mapping) or not points:
            raise ConfigurationError(f"a filter schedule is {{step: expression or None}} with at least one step, got {str(points)[:80]!r}")
        if len(points) > _MAX_POINTS:
            raise ConfigurationError(f"a filter schedule holds at most {_MAX_POINTS:,} steps, got {len(points):,}")
        checked: dict[int, str | None] = {}
        for step, expression in points.items():
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                raise ConfigurationError(f"filter schedule: steps are whole numbers >= 0, got {step!r}")
            if expression is not None and (not isinstance(expression, str) or not expression.strip() or len(expression) > _LONGEST):
                raise ConfigurationError(
                    f"filter schedule, step {step}: a filter expression (text up to {_LONGEST} characters over the storage's "
                    f"own columns) or None, got {str(expression)[:80]!r}"
                )
            checked[step] = expression
        self.points = dict(sorted(checked.items()))

    def in_force(self, step: int) -> int | None:
        """The step of the latest point at or before ``step`` (None: before the first point)."""
        latest = None
        for point in self.points:
            if point > step:
                break
            latest = point
        return latest

    def state(self) -> dict[str, Any]:
        """The schedule as plain data, for the Loader's state."""
        return {"points": [[step, expression] for step, expression in self.points.items()]}

    @classmethod
    def from_state(cls, saved: Any) -> FilterSchedule:
        """A schedule from a saved state's part.

        Raises:
            ConfigurationError: Not what `state` writes, named.
        """
        points = saved.get("points") if isinstance(saved, dict) else None
        if (
            not isinstance(points, list)
            or len(points) > _MAX_POINTS
            or not all(isinstance(point, list) and len(point) == 2 for point in points)
            or len({str(point[0]) for point in points}) != len(points)
        ):
            raise ConfigurationError(
                f"Loader state: 'filter_schedule' must hold 'points', [step, expression] pairs with each step once, got {str(saved)[:120]!r}"
            )
        try:
            return cls({step: expression for step, expression in points})
        except (ConfigurationError, TypeError) as error:  # TypeError: a step that cannot be a key
            raise ConfigurationError(f"Loader state: 'filter_schedule': {error}"[:300]) from None
