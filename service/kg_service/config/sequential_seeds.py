"""`seeds: {start, step, max, ...}`: sequential seeds, and their checks.

A sweep with these seeds trains `start` seeds, then `step` more at a time,
looking after each batch (kg_service.analysis.numbers.sequential). With
`futility: true` and a `smallest_effect` (the metric's units) a look may
also stop a comparison that cannot reach that effect (non-binding;
kg_service.analysis.numbers.sequential_estimates).
"""

import dataclasses
from typing import Literal
from typing import Optional

from kg_service.config import fields


def schedule_fits(schedule):
    """Refuses a schedule whose `max` is below its `start`, and a futility
    rule without the smallest effect it needs (or that effect unread)."""
    if schedule.max < schedule.start:
        fields.fail(at=("max",), message=(
            f"{schedule.max} is below seeds.start {schedule.start}; expected "
            "max >= start (the most seeds the sweep may take, its first batch included)."
        ))
    if schedule.futility and schedule.smallest_effect is None:
        fields.fail(at=("futility",), message=(
            "true needs seeds.smallest_effect: the smallest difference of interest, in "
            "the compared metric's units (e.g. 0.005 for half a point of accuracy); "
            "a comparison stops for futility when that effect is out of reach."
        ))
    if schedule.smallest_effect is not None and not schedule.futility:
        fields.fail(at=("smallest_effect",), message=(
            f"{schedule.smallest_effect} is read only by the futility rule; expected "
            "seeds.futility: true beside it, or no smallest_effect."
        ))
    return schedule


@dataclasses.dataclass(frozen=True)
class SequentialSeeds:
    """`seeds: {start, step, max}`: seeds 0..start-1 first, then `step` more
    at a time until every comparison is decided (group-sequential, alpha
    spent by `spending`; kg_service.analysis.numbers.sequential) or `max` seeds
    are trained."""

    __pydantic_config__ = fields.STRICT
    start: fields.integer(ge=2, most=fields.MAX_SEEDS) = 4  # the first batch: a t-test needs 2
    step: fields.integer(ge=1, most=fields.MAX_SEEDS) = 4  # seeds added per look
    max: fields.integer(ge=2, most=fields.MAX_SEEDS) = 40  # the budget; the last look may add fewer
    spending: Literal["obrien_fleming", "pocock"] = "obrien_fleming"
    # Stop a comparison for futility (non-binding) when `smallest_effect`
    # is out of reach; the effect is in the compared metric's units, > 0.
    futility: fields.Bool = False
    smallest_effect: Optional[fields.number(gt=0)] = None
