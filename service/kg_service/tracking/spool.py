"""Members trained but not yet in the tracking store, kept on local disk.

When the tracking store fails mid-sweep and its retries run out, the
members that trained but could not be logged are written here, one folder
each: `member.json` (what `MemberResult` holds), `model.keras` (the
trained model) and `test_correct.npy` (which test examples it got right). `--resume RUN_ID` reads them back, logs them to the store
and deletes them, instead of training them again.

Layout: `<output_dir>/spool/<sweep run id>/<activation>-seed<seed>/`.
"""

import dataclasses
import json
import pathlib
import shutil

import numpy as np

from kg_service.results import MemberResult

_RESULT = "member.json"
_MODEL = "model.keras"
_TEST_CORRECT = "test_correct.npy"  # which test examples it got right


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
            if f.name not in ("model", "test_correct")
        }
        # default: numpy scalars (a metric, an epoch) as Python numbers.
        (partial / _RESULT).write_text(json.dumps(fields, default=lambda v: v.item()))
        if result.model is not None:
            result.model.save(partial / _MODEL)
        if result.test_correct is not None:
            np.save(partial / _TEST_CORRECT, np.asarray(result.test_correct))
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)


def read(where):
    """The members kept in `where`: `{(activation, seed): MemberResult}`."""
    # Keras (TensorFlow): only where members wait; importing the spool
    # stays cheap, before pre-flight's checks.
    import keras

    import keras_gelu  # noqa: F401 -- registers its layers for loading

    found = {}
    for member in sorted(pathlib.Path(where).glob(f"*/{_RESULT}")):
        result = MemberResult(**json.loads(member.read_text()))
        model = member.with_name(_MODEL)
        if model.exists():
            result.model = keras.saving.load_model(model)
        test_correct = member.with_name(_TEST_CORRECT)
        if test_correct.exists():
            result.test_correct = np.load(test_correct)
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
