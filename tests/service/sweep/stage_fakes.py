"""What the compare stage reads, without training: the moons task's
metrics (no figures: drawing them is seconds, and not the point), a temp
folder, and fixed members as a `stages.Trained`."""

import types

from kg_service import tasks as _registered  # noqa: F401 -- registers moons
from kg_service.config.loading import config_to_dict
from kg_service.sweep import stages
from kg_service.tasks import base as tasks


def pre(out_dir, config):
    """A pre-flight of `config` with the moons task's metrics, writing into
    `out_dir`; the config as plain data, as pre-flight resolves it."""
    moons = tasks.get("moons")
    task = types.SimpleNamespace(compared=moons.compared, selects=moons.selects, figures=())
    return types.SimpleNamespace(task=task, out_dir=out_dir, dataset=None,
                                 resolved=config_to_dict(config),
                                 tuning=None)


def trained(results):
    """`results` (MemberResults) as a trained, untracked sweep."""
    return stages.Trained(results=tuple(results),
                          tracked=stages.Tracked(sweep_run_id="r", run_ids={}))
