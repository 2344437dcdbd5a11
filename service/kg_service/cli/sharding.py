"""`--shard` and `--sweep-id`: which job of a sharded sweep this is.

A job's shard comes from `--shard i/n` or, with no value, from the
scheduler's environment (a Kubernetes Indexed Job, a Slurm job array).
Pure: no MLflow, no Keras; the CLI checks both flags here before any
heavy import. The shard's members are `kg_service.sweep.shards`'.
"""

import os
import re

from kg_service.errors import ServiceError
from kg_service.sweep.shards import Shard

# Kubernetes gives an Indexed Job's pod its index (0-based) but not the
# Job's completion count: the manifest passes it in this variable
# (docs/scaling/indexed-job.yaml sets it equal to spec.completions).
KUBERNETES_INDEX = "JOB_COMPLETION_INDEX"
KUBERNETES_COUNT = "KG_SHARD_COUNT"
SLURM_ID = "SLURM_ARRAY_TASK_ID"
SLURM_COUNT = "SLURM_ARRAY_TASK_COUNT"
SLURM_MIN = "SLURM_ARRAY_TASK_MIN"
SLURM_STEP = "SLURM_ARRAY_TASK_STEP"

# What a sweep id may contain: it goes into MLflow search filters and tags.
_SWEEP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def parse(text, environ=None):
    """The shard a job is, from `--shard i/n` or, with no value, from the
    scheduler's environment.

    Args:
        text: `"i/n"` (1-based), or `""`/None for the environment:
            Kubernetes Indexed Jobs (`JOB_COMPLETION_INDEX`, 0-based, and
            `KG_SHARD_COUNT`), else Slurm job arrays (`SLURM_ARRAY_TASK_ID`
            relative to `SLURM_ARRAY_TASK_MIN` and `SLURM_ARRAY_TASK_STEP`,
            and `SLURM_ARRAY_TASK_COUNT`).
        environ: default `os.environ`.

    Raises:
        ServiceError: for a malformed or out-of-range value, or no
            scheduler variables.

    Example:

    >>> parse("2/3")
    Shard(index=2, count=3, origin='--shard')
    >>> parse("", {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4",
    ...            "SLURM_ARRAY_TASK_COUNT": "3"}).index
    2
    """
    environ = os.environ if environ is None else environ
    if text:
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not match:
            raise ServiceError(
                f"--shard {text}: expected INDEX/COUNT, two whole numbers with "
                f"1 <= INDEX <= COUNT, e.g. --shard 1/4 (or --shard alone inside "
                f"a Kubernetes Indexed Job or a Slurm job array)."
            )
        return _checked(int(match.group(1)), int(match.group(2)), "--shard", text)
    if environ.get(KUBERNETES_INDEX, "").strip():
        index = _whole(environ, KUBERNETES_INDEX)
        if not environ.get(KUBERNETES_COUNT, "").strip():
            raise ServiceError(
                f"--shard: {KUBERNETES_INDEX}={environ[KUBERNETES_INDEX]} says this "
                f"is a Kubernetes Indexed Job, but {KUBERNETES_COUNT} is not set. "
                f"Kubernetes does not tell a pod the Job's completions: set "
                f"{KUBERNETES_COUNT} to spec.completions in the pod's env (see "
                f"docs/scaling/indexed-job.yaml), or pass --shard INDEX/COUNT."
            )
        count = _whole(environ, KUBERNETES_COUNT)
        return _checked(
            index + 1, count, "Kubernetes",
            f"{KUBERNETES_INDEX}={index} (0-based), {KUBERNETES_COUNT}={count}",
        )
    if environ.get(SLURM_ID, "").strip():
        task = _whole(environ, SLURM_ID)
        if not environ.get(SLURM_COUNT, "").strip():
            raise ServiceError(
                f"--shard: {SLURM_ID} is set but {SLURM_COUNT} is not; run "
                f"kg-train inside an sbatch --array job (Slurm sets both), or "
                f"pass --shard INDEX/COUNT."
            )
        count = _whole(environ, SLURM_COUNT)
        first = _whole(environ, SLURM_MIN) if environ.get(SLURM_MIN) else 0
        step = _whole(environ, SLURM_STEP) if environ.get(SLURM_STEP) else 1
        offset = task - first
        if step < 1 or offset % step:
            raise ServiceError(
                f"--shard: Slurm array task {task} is not min + k * step "
                f"({SLURM_MIN}={first}, {SLURM_STEP}={step}); use a contiguous "
                f"array such as --array=1-{count}, or pass --shard INDEX/COUNT."
            )
        return _checked(
            offset // step + 1, count, "Slurm",
            f"{SLURM_ID}={task}, {SLURM_MIN}={first}, {SLURM_COUNT}={count}",
        )
    raise ServiceError(
        f"--shard without a value takes the shard from the scheduler, but "
        f"neither {KUBERNETES_INDEX} (Kubernetes Indexed Job) nor {SLURM_ID} "
        f"(Slurm job array) is set. Pass --shard INDEX/COUNT, e.g. --shard 1/2."
    )


def _whole(environ, name):
    value = environ[name].strip()
    if not value.isdigit():
        raise ServiceError(
            f"--shard: {name}={environ[name]!r} is not a whole number >= 0."
        )
    return int(value)


def _checked(index, count, origin, shown):
    if count < 1 or not 1 <= index <= count:
        raise ServiceError(
            f"--shard: {shown} gives shard {index} of {count}; expected "
            f"1 <= INDEX <= COUNT (1-based: the first of 4 is 1/4)."
            + (
                " A Slurm array that does not start at its minimum, or a list "
                "such as --array=1,5,9, cannot be mapped: use --array=1-N."
                if origin == "Slurm"
                else ""
            )
        )
    return Shard(index=index, count=count, origin=origin)


def check_sweep_id(value):
    """Returns `value` if it can name a sweep, else raises ServiceError."""
    if not _SWEEP_ID.fullmatch(value or ""):
        raise ServiceError(
            f"--sweep-id {value!r}: expected 1 to 64 letters, digits, '.', '_' "
            f"or '-', starting with a letter or digit (e.g. "
            f"--sweep-id $SLURM_ARRAY_JOB_ID)."
        )
    return value
