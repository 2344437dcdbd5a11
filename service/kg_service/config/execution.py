"""`execution:` where a sweep's members train (issue 33; docs/scaling.md).

    execution:
      engine: local            # local | ray
      address: null            # ray only: null (a local Ray, as ray.init() starts),
                               # auto, host:port, ray://host:10001
      members_per_task: null   # ray only: members per Ray task; null: a whole group
      group_resources: {num_cpus: 1, num_gpus: 0}

`engine: local` trains every member in the kg-train process, as before.
`engine: ray` sends each stacked group (an activation's seeds, a tuning
candidate's seeds, a sequential look's new seeds) to a Ray cluster as a
task with `group_resources`; the task trains its members and logs their
runs; the kg-train process (the driver) keeps the tuning choice, the
looks, the statistics, export and registration (`kg_service.execution`).
"""

import dataclasses
import re
from typing import Annotated
from typing import Literal
from typing import Optional

from pydantic import AfterValidator

from kg_service.config import fields

# host:port, or ray://host:port (Ray Client); `auto`: the cluster this
# machine belongs to (ray start ran here, or RAY_ADDRESS).
ADDRESS = re.compile(r"^(ray://)?[A-Za-z0-9_.\-\[\]:]+:[0-9]{1,5}$")


def _address(value):
    if value != "auto" and not ADDRESS.match(value):
        fields.fail(message=(
            f"{value!r} is no Ray address; expected auto, host:port (a cluster's "
            "head, e.g. 10.0.0.5:6379) or ray://host:port (Ray Client, e.g. "
            "ray://head:10001), or null to start a local Ray."))
    return value


@dataclasses.dataclass(frozen=True)
class GroupResources:
    """What one Ray task (one stacked group) reserves on its node."""

    __pydantic_config__ = fields.STRICT
    num_cpus: fields.number(ge=0) = 1
    # Fractions share a GPU: 0.5 puts two groups on one (benchmarks/gpu_check.sh).
    num_gpus: fields.number(ge=0) = 0


@dataclasses.dataclass(frozen=True)
class ExecutionConfig:
    __pydantic_config__ = fields.STRICT
    engine: Literal["local", "ray"] = "local"
    address: Optional[Annotated[fields.Str, AfterValidator(_address)]] = None
    # Splits a group into tasks of this many members, so that a group
    # spreads over nodes; null: one task per stacked group, the grouping
    # engine local trains (the same members stacked together).
    members_per_task: Optional[fields.integer(ge=1, most=fields.MAX_SEEDS)] = None
    group_resources: fields.Section[GroupResources] = GroupResources()
    # How often Ray runs a task again whose worker or node died (Ray's
    # max_retries); members a try logged are not trained again.
    max_retries: fields.integer(ge=0, most=100) = 3
