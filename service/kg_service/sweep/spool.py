"""Members trained but not yet in the tracking store, kept on local disk.

When the tracking store fails mid-sweep and its retries run out, the
members that trained but could not be logged are written here, one folder
each: `member.json` (what `MemberResult` holds) and `model.keras` (the
trained model). `--resume RUN_ID` reads them back, logs them to the store
and deletes them, instead of training them again.

Layout: `<output_dir>/spool/<sweep run id>/<activation>-seed<seed>/`.
"""

import dataclasses
import json
import pathlib
import shutil

_RESULT = "member.json"
_MODEL = "model.keras"


def folder(output_dir, sweep_run_id):
    """Where the members of sweep `sweep_run_id` wait for the store."""
    return pathlib.Path(output_dir) / "spool" / sweep_run_id


def write(where, results):
    """Keeps each `MemberResult` of `results` (with its model) in `where`.

    A member is written to a temporary folder and renamed into place, so a
    member folder is either whole or absent.
    """
    for result in results:
        target = where / _name(result.activation, result.seed)
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        fields = {
            f.name: getattr(result, f.name)
            for f in dataclasses.fields(result)
            if f.name != "model"
        }
        # default: numpy scalars (a metric, an epoch) as Python numbers.
        (partial / _RESULT).write_text(json.dumps(fields, default=lambda v: v.item()))
        if result.model is not None:
            result.model.save(partial / _MODEL)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)


def read(where):
    """The members kept in `where`: `{(activation, seed): MemberResult}`."""
    import keras

    import keras_gelu.api  # noqa: F401 -- registers its layers for loading
    from kg_service.results import MemberResult

    found = {}
    for member in sorted(pathlib.Path(where).glob(f"*/{_RESULT}")):
        result = MemberResult(**json.loads(member.read_text()))
        model = member.with_name(_MODEL)
        if model.exists():
            result.model = keras.saving.load_model(model)
        found[(result.activation, result.seed)] = result
    return found


def count(where):
    """How many members wait in `where`."""
    return len(list(pathlib.Path(where).glob(f"*/{_RESULT}")))


def discard(where, activation, seed):
    """Deletes one member (once it is in the store); the folder goes with
    its last member."""
    shutil.rmtree(where / _name(activation, seed), ignore_errors=True)
    if where.is_dir() and not any(where.iterdir()):
        where.rmdir()
        if not any(where.parent.iterdir()):
            where.parent.rmdir()


def _name(activation, seed):
    return f"{activation}-seed{seed}"
