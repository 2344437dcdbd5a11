"""The `data:` keys of a generated data set (moons, circles, a test's
blobs): how many samples and how much noise.

A task declares its keys as a dataclass (`Task.data_settings`); the
config schema adds them to `data:` (`kg_service.config.schema`), typed
and bounded by `kg_service.config.fields` as every key is.
"""

import dataclasses

from kg_service.config import fields


@dataclasses.dataclass(frozen=True)
class GeneratedData:
    """`data:` keys of a data set drawn by a generator."""

    n_samples: fields.integer(ge=50, most=fields.MAX_SAMPLES) = 2000  # a fixed-size set ignores it
    noise: fields.number(ge=0) = 0.2  # the generator's noise
