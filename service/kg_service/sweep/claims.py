"""A config's claims against the tracking store: `kg plan --config`'s
seeds per claim before a run, from a pilot's per-seed sd (issue 32 §1).

The sd comes from where `kg plan` takes it for a sweep's comparisons: the
stored finished sweeps, here the study's (each at its level of the
study's factor, the newest sweep of a level), read through
`kg_service.tracking.studies`; the claim's own per-seed numbers there
(`analysis.numbers.claim_data.evidence`) give its sd. Where the store
holds none, the plan says so instead of guessing one.
"""

import dataclasses
import pathlib

from kg_service.analysis.numbers import claim_data
from kg_service.analysis.numbers import claims as rule
from kg_service.errors import ServiceError
from kg_service.sweep.studies import stored_levels
from kg_service.tracking import destinations
from kg_service.tracking import studies


@dataclasses.dataclass(frozen=True)
class Pilot:
    """The stored numbers a plan takes its sds from: `by_level` as
    `claim_data` reads it ({} with none), and where they came from."""

    by_level: dict
    source: str


def read_pilot(config, uri):
    """The study's finished sweeps in the store at `uri` as a `Pilot`.

    Nothing is created: a sqlite file that is not there is no pilot.
    """
    if not config.study:
        return Pilot({}, "no pilot: the config names no `study:`, so no stored sweeps are "
                         "read (kg plan --experiment NAME plans a lone sweep's comparisons)")
    database = destinations.sqlite_file(uri) if uri.startswith("sqlite:") else None
    if database is not None and not pathlib.Path(database).exists():
        return Pilot({}, f"no pilot: {uri} does not exist yet")
    try:
        stored = studies.read_study(uri, config.study)
    except studies.UnknownStudy:
        return Pilot({}, f"no pilot: no finished sweep of study {config.study!r} in {uri}")
    except ServiceError as error:
        return Pilot({}, f"no pilot: {error}")
    setting = config.study_factor.setting if config.study_factor else None
    by_level, names = stored_levels(uri, stored, setting)
    return Pilot(by_level, f"per-seed sd from the finished sweeps of study {config.study!r} "
                           f"in {uri}: {', '.join(names.values())}")


def plans_from(claims, pilot, power):
    """`claims.ClaimPlan`s from a pilot's per-seed numbers."""
    sds = {}
    for c in claims:
        e = claim_data.evidence(c, pilot.by_level) if pilot.by_level else None
        if e is not None and not e.missing and len(e.diffs) >= 2:
            sds[c.name] = rule.evidence_sd(e)
    return rule.plan_claims(claims, sds, power)
