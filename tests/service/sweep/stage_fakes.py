"""What the compare stage reads, without training: the moons task's
metrics (no figures: drawing them is seconds, and not the point), a temp
folder, and fixed members as a `stages.Trained`."""

import types

from kg_service import tasks as _registered  # noqa: F401 -- registers moons
from kg_service.sweep import stages
from kg_service.tasks import base as tasks


def pre(out_dir):
    """A pre-flight with the moons task's metrics, writing into `out_dir`."""
    moons = tasks.get("moons")
    task = types.SimpleNamespace(compared=moons.compared, selects=moons.selects, figures=())
    return types.SimpleNamespace(task=task, out_dir=out_dir, dataset=None, resolved=None,
                                 tuning=None)


def trained(results):
    """`results` (MemberResults) as a trained, untracked sweep."""
    return stages.Trained(results=tuple(results),
                          tracked=stages.Tracked(sweep_run_id="r", run_ids={}))
