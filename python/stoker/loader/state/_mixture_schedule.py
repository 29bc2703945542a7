"""A curriculum as a function of the step: a mixture's weights set at chosen steps of the run.

`Loader.set_mixture_schedule({0: {...}, 20_000: {...}})` names the weights from each step on; the
Loader applies each point when its step (batches delivered since the run began, carried across
resumes) reaches it, through the same change `set_mixture_weights` makes between two batches, so
the change and the samples drawn after it are in the state like a change made by hand.

The schedule is data, not a function: it is saved in the state with the last point applied, so a
resume continues it without the schedule given again, applies no point twice and none late, and a
state is checked like any input (a schedule from a damaged or hostile file is refused by name).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import ConfigurationError

__all__ = ["MAX_SCHEDULE_POINTS", "MixtureSchedule"]

MAX_SCHEDULE_POINTS = 1024
"""A curriculum has a handful of points (a filter schedule's bound too); a state with more is not
ours. It also bounds the changes a schedule makes in one epoch, each redrawing the epoch's rest
(see `MAX_MIXTURE_CHANGES`)."""
_MAX_POINTS = MAX_SCHEDULE_POINTS


class MixtureSchedule:
    """The weights from each step on, and the last step applied.

    Args:
        points: ``{step: {source name: weight}}``, steps whole numbers >= 0.
        check_weights: The mixture's own check of one set of weights (raises ValueError).

    Raises:
        ValueError: A step that is not a whole number >= 0, more than 1,024 points, or weights
            the mixture refuses (named with their step).
    """

    def __init__(self, points: Mapping[int, Mapping[str, float]], check_weights: Callable[[dict[str, float]], None]) -> None:
        if not isinstance(points, Mapping) or not points:
            raise ConfigurationError(f"a mixture schedule is {{step: weights}} with at least one step, got {str(points)[:80]!r}")
        if len(points) > _MAX_POINTS:
            raise ConfigurationError(f"a mixture schedule holds at most {_MAX_POINTS:,} steps, got {len(points):,}")
        checked: dict[int, dict[str, float]] = {}
        for step, weights in points.items():
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                raise ConfigurationError(f"mixture schedule: steps are whole numbers >= 0, got {step!r}")
            if not isinstance(weights, Mapping) or not all(
                isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) for value in weights.values()
            ):
                raise ConfigurationError(f"mixture schedule, step {step}: weights are {{source name: number}}, got {str(weights)[:80]!r}")
            try:
                check_weights(dict(weights))
            except ValueError as error:
                raise ConfigurationError(f"mixture schedule, step {step}: {error}") from None
            checked[step] = {str(name): float(value) for name, value in weights.items()}
        self.points = dict(sorted(checked.items()))
        self.applied_through = -1  # the last step whose weights were applied (-1: none yet)

    def due(self, step: int) -> tuple[int, dict[str, float]] | None:
        """The point to apply before the batch of ``step``: the latest one at or before it that
        was not applied yet (points passed together, as after a resume, apply as the latest),
        as ``(its step, its weights)``; None when nothing is due."""
        latest = None
        for point, weights in self.points.items():
            if point > step:
                break
            if point > self.applied_through:
                latest = (point, weights)
        return latest

    def state(self) -> dict[str, Any]:
        """The schedule as plain data, for the Loader's state."""
        return {"points": [[step, weights] for step, weights in self.points.items()], "applied_through": self.applied_through}

    @classmethod
    def from_state(cls, saved: Any, check_weights: Callable[[dict[str, float]], None]) -> MixtureSchedule:
        """A schedule from a saved state's part.

        Raises:
            ValueError: Not what `state` writes, or weights the mixture refuses, named.
        """
        points = saved.get("points") if isinstance(saved, dict) else None
        applied = saved.get("applied_through") if isinstance(saved, dict) else None
        if (
            not isinstance(points, list)
            or len(points) > _MAX_POINTS
            or not all(isinstance(point, list) and len(point) == 2 and isinstance(point[0], int) for point in points)
            or isinstance(applied, bool)
            or not isinstance(applied, int)
            or applied < -1
        ):
            raise ConfigurationError(
                f"Loader state: 'mixture_schedule' must hold 'points' ([step, weights] pairs) and 'applied_through', got {str(saved)[:120]!r}"
            )
        steps = [point[0] for point in points]
        if len(set(map(str, steps))) != len(steps):
            raise ConfigurationError("Loader state: 'mixture_schedule' names a step twice")
        schedule = cls({step: weights for step, weights in points}, check_weights)
        schedule.applied_through = applied
        return schedule
