"""Sharded sweeps: which slice of the (activation, seed) grid a job trains,
and which sweep it joins.

A sharded sweep is one sweep (one parent run in the tracking store) whose
members are trained by n jobs. The jobs never talk to each other: each
finds the sweep in the store by experiment and sweep id, trains the
members of its slice that the store does not hold yet (so a restarted
job resumes), and the job that finds the grid complete when it ends
registers, once (see `sweep.sharded.run_shard`).

Pure: no MLflow, no Keras. Which shard a job is (`--shard`, or the
scheduler's environment) is read in `kg_service.cli.sharding`.
"""

import dataclasses
import hashlib
import json

from kg_service.config.derived import grid
from kg_service.config.loading import config_to_dict
from kg_service.config.loading import flatten

# Config keys that say where a sweep's outputs go, not what its members
# are: jobs of one sweep may differ in them (and a resumed sweep too).
FREE_KEYS = ("output_dir", "tracking.", "export.dir", "execution.")


@dataclasses.dataclass(frozen=True)
class Shard:
    """Job `index` (1-based) of `count`; `origin` says where it came from."""

    index: int
    count: int
    origin: str = "--shard"

    def __str__(self):
        return f"{self.index}/{self.count}"

    @property
    def scope(self):
        """This job's slice's lease (`tracking.lease`): each job writes its
        own slice, so a second copy of one shard is refused."""
        return f"shard-{self.index}-of-{self.count}"


def members(config, shard):
    """The (activation, seed) members that `shard` trains, in grid order.

    The grid is activation-major (config order, then seed order) and cut
    into `shard.count` contiguous slices whose sizes differ by at most one.
    Contiguous keeps each activation's seeds together, so a shard's
    members of one activation still train as one stacked model: a shard
    trains at most two partial activation groups, never scattered seeds.
    A shard beyond the grid's size gets no members (it still joins, and
    may be the one that registers).

    Example:

    >>> from kg_service.config.schema import Config
    >>> members(Config(activations=("relu", "gelu"), seeds=(0, 1, 2)), Shard(2, 2))
    (('gelu', 0), ('gelu', 1), ('gelu', 2))
    """
    keys = grid(config)
    start = (shard.index - 1) * len(keys) // shard.count
    end = shard.index * len(keys) // shard.count
    return tuple(keys[start:end])



def sweep_id(config):
    """The id n jobs started with the same config agree on without talking.

    A hash of everything that defines the sweep (experiment, activations,
    seeds, data, model, training, registry, export settings, device), not
    of where its outputs go (`FREE_KEYS`). The same config always joins
    the same sweep, so a rerun of a job resumes it and a rerun after it
    finished finds nothing to do; to run the same config again as a new
    sweep, pass `--sweep-id`.
    """
    kept = {
        k: v
        for k, v in flatten(config_to_dict(config)).items()
        if not k.startswith(FREE_KEYS)
    }
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]
