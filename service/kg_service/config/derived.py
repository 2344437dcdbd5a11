"""What follows from a validated config alone: the (activation, seed)
grid, registered model names, the tracking URI, a memory estimate (and
whether a machine's memory holds it), and the same sweep at smoke sizes.
"""

import dataclasses
import os

import keras_gelu_names
import numpy as np

from kg_service.config import catalog
from kg_service.config import tuning as tuning_lib
from kg_service.config.fields import template_fields
from kg_service.config.fields import VARIANCE_SOURCES
from kg_service.config.schema import SequentialSeeds
from kg_service.errors import ServiceError

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"


def grid(config):
    """Every (activation, seed) member of a sweep: activation-major, in
    config order, seeds in config order within each. A sequential sweep
    has a grid per look: `with_seeds(config, n)`'s."""
    if sequential(config):
        raise ServiceError(
            "a sweep with sequential seeds ({start, step, max}) has no fixed grid; "
            "its looks do (kg_service.config.derived.with_seeds)."
        )
    return [(a, s) for a in config.activations for s in config.seeds]


# --- Sources of variance: `vary: [init, order, split]` (issue 19). ----------


def source_seeds(seed, vary=VARIANCE_SOURCES, data_seed=0):
    """The seeds of member `seed`'s sources of variance: `{source: seed}`.

    Each source in `VARIANCE_SOURCES` (init: the initial weights, order:
    the batch order, split: the train / validation / test split) gets its
    own seed, `numpy.random.SeedSequence((data_seed, source index, 1,
    seed))`'s first 32-bit word, so two sources of one member are independent
    streams and a varied source differs between members. A source not in
    `vary` gets the same seed for every member: the split keeps
    `data_seed` itself (the split every member shared before issue 19;
    `kg_service.tasks.base` loads it for the report), init and order the
    word of `(data_seed, source index, 0)` (SeedSequence pads short
    entropy with zeros: the 0 and 1 keep the two kinds apart).

    >>> fixed = source_seeds(3, vary=("init",))
    >>> fixed["order"] == source_seeds(4, vary=("init",))["order"], fixed["split"]
    (True, 0)
    >>> len(set(source_seeds(3).values()))
    3
    """
    out = {}
    for index, source in enumerate(VARIANCE_SOURCES):
        if source not in vary:
            if source == "split":
                out[source] = int(data_seed)
                continue
            entropy = (data_seed, index, 0)
        else:
            entropy = (data_seed, index, 1, seed)
        out[source] = int(np.random.SeedSequence(entropy).generate_state(1)[0])
    return out


def member_source_seeds(config, seed):
    """`source_seeds` of member `seed` of `config` (its `vary`, its data seed)."""
    return source_seeds(seed, config.vary, config.data.seed)


# --- Sequential seeds: `seeds: {start, step, max}`. --------------------------


def sequential(config):
    """The sweep's `SequentialSeeds`, or None for a fixed list of seeds."""
    return config.seeds if isinstance(config.seeds, SequentialSeeds) else None


def look_counts(schedule):
    """The seeds trained by each look: start, start + step, ..., max.

    >>> look_counts(SequentialSeeds(start=4, step=4, max=14))
    (4, 8, 12, 14)
    """
    return tuple(range(schedule.start, schedule.max, schedule.step)) + (schedule.max,)


def with_seeds(config, n):
    """`config` at seeds 0..n-1: the config of a sequential sweep's look
    (its members, grid and report are those of a sweep of n seeds)."""
    return dataclasses.replace(config, seeds=tuple(range(n)))


def look_configs(config):
    """A sequential sweep's looks, planned once: `(n, config at seeds
    0..n-1)` for each look's seed count n (`look_counts`)."""
    return tuple((n, with_seeds(config, n)) for n in look_counts(sequential(config)))


def seed_budget(config):
    """The most seeds a sweep trains: its seeds, or a sequential one's max."""
    schedule = sequential(config)
    return schedule.max if schedule else len(config.seeds)


def seeds_at_once(config):
    """The most seeds of one activation trained (and evaluated) at once:
    all of them, or a sequential sweep's largest batch."""
    schedule = sequential(config)
    return max(schedule.start, schedule.step) if schedule else len(config.seeds)


def registered_model_name(config, activation):
    """The registered model (and export directory) name for one activation."""
    return config.registry.model_name.format(
        experiment=config.experiment, dataset=config.data.dataset, activation=activation
    )


def memory_estimate(config):
    """About how many bytes of memory a run of `config` needs at its peak.

    The data (the task's `data_bytes`) and the models
    (`parameter_estimate`): each member trained at once holds its weights,
    their gradients and the optimizer's two moments (Adam's), float32
    (issue 30 §13: `hidden_units: [1000000, 1000000]`, a trillion weights,
    passed the check and died out of memory after the data had loaded).
    An estimate, within a factor of about two: what it is for is refusing
    1e9 samples or 1e12 weights before numpy or the backend fails. A task
    that gives no estimate counts nothing.
    """
    members = seeds_at_once(config)
    weights = parameter_estimate(config) * members * 4 * BYTES_PER_PARAMETER_SLOT
    data_bytes = catalog.task(config.data.dataset).data_bytes
    return (data_bytes(config, members) if data_bytes else 0) + weights


BYTES_PER_PARAMETER_SLOT = 4  # weight, gradient, two optimizer moments


def check_memory(config, available):
    """Raises a ServiceError when a run of `config` needs more memory than
    the machine has (`available` bytes; no check if None: unknown)."""
    needed = memory_estimate(config)
    if available is None or needed <= available:
        return
    gib = 2**30
    raise ServiceError(
        f"this config needs about {needed / gib:,.1f} GiB of memory (data.n_samples "
        f"{config.data.n_samples:,}, {seeds_at_once(config)} seeds trained at once, "
        f"training.batch_size {config.training.batch_size:,}, about "
        f"{parameter_estimate(config):,} weights per model from model.hidden_units "
        f"{list(config.model.hidden_units)}), but this machine has "
        f"{available / gib:,.1f} GiB available. Lower data.n_samples, the seeds, the "
        f"batch size or the widths (--set data.n_samples=..., "
        f"--set model.hidden_units=[64,64]), or run it on a larger machine."
    )


def parameter_estimate(config):
    """About how many weights one member of `config` has: its task's
    `parameters` (an upper bound for the built-in tasks), else 0."""
    parameters = catalog.task(config.data.dataset).parameters
    return parameters(config) if parameters else 0


def gating_factor(activations):
    """2 where any activation is a gated unit (its projection twice as
    wide), else 1: the tasks' parameter estimates share it."""
    return 2 if any(keras_gelu_names.kind(a) == "gated" for a in activations) else 1


def feedforward_weights(d_model, widths, factor):
    """The weights of one residual `keras_gelu.FeedForward` per width on a
    d_model stream: up (and gate) `d_model x w`, down `w x d_model`."""
    return sum((d_model + 1) * w * factor + (w + 1) * d_model for w in widths)


def resolve_tracking_uri(config, environ=None):
    """The MLflow tracking URI a run uses.

    `config.tracking.uri` (which `--tracking-uri` sets), else the
    `MLFLOW_TRACKING_URI` environment variable, else `sqlite:///mlflow.db`
    (a file in the working directory).
    """
    return tracking_uri_and_origin(config, environ)[0]


def tracking_uri_for(flag, environ=None):
    """The tracking URI of a command that takes `--tracking-uri` but no
    config (kg serve, predict, models): the flag, else MLFLOW_TRACKING_URI,
    else `sqlite:///mlflow.db`, as for a sweep.

    Raises:
        ServiceError: for an empty flag.
    """
    if flag is not None and not flag.strip():
        raise ServiceError(
            "--tracking-uri: got an empty string; expected an MLflow tracking URI, "
            "e.g. sqlite:///mlflow.db."
        )
    return _uri_and_origin(flag and flag.strip(), "--tracking-uri", environ)[0]


def tracking_uri_and_origin(config, environ=None):
    """(the tracking URI a run uses, where it came from: words for the plan)."""
    return _uri_and_origin(config.tracking.uri, "tracking.uri", environ)


def _uri_and_origin(explicit, origin, environ):
    environ = os.environ if environ is None else environ
    if explicit:
        return explicit, origin
    if environ.get("MLFLOW_TRACKING_URI", "").strip():
        return environ["MLFLOW_TRACKING_URI"].strip(), "from MLFLOW_TRACKING_URI"
    return DEFAULT_TRACKING_URI, "default; set tracking.uri, MLFLOW_TRACKING_URI or --tracking-uri"


# --- Smoke sizes: the same sweep in seconds. -----------------------------

SMOKE_WIDTH = 8
# One hidden layer or transformer block: a smoke run's cost is mostly
# tracing each model's functions (training, evaluation, export), which
# grows with the layers; the loops over layers run all the same. Measured
# (issue 17, benchmarks/bench_smoke_sizes.py, load 24; docs/benchmarks.md):
# a glu-variants activation's 2 stacked seeds plus its export, 8.9 s of
# CPU at 2 blocks, 5.3 s at 1 (1.68x); 1 step per epoch instead of 2 at
# 2 blocks: 1.05x, so SMOKE_STEPS stays.
SMOKE_DEPTH = 1
SMOKE_EPOCHS = 2
SMOKE_SEEDS = 2
SMOKE_STEPS = 2  # a language model's steps per epoch (its own sizes: the task's `smoke`)


def smoke_name(name):
    """`name` with the `-smoke` suffix, once: tiny.yaml's experiment is
    `kg-smoke` already, and `--smoke` logged it to `kg-smoke-smoke`
    (issue 30 §18)."""
    return name if name.endswith("-smoke") else f"{name}-smoke"


def smoke(config):
    """`config` at smoke sizes: the same pipeline, done in seconds.

    Every activation and every stage stay (training, tracking, statistics,
    report, export, registry); what shrinks is the depth (the first
    `SMOKE_DEPTH` hidden layers or blocks), the widths (at most
    `SMOKE_WIDTH`), the epochs (at most `SMOKE_EPOCHS`), the steps per
    epoch (at most `SMOKE_STEPS`) and the seeds (the first `SMOKE_SEEDS`;
    a tuning block, its first value or trial and one seed), and each
    task's own keys, as its `smoke` says (the samples of a generated set,
    a corpus' bytes, context and evaluation windows). The experiment and registered model names get a
    `-smoke` suffix (once: a model name made from `{experiment}` has it
    already, and a name ending in `-smoke` keeps it; `smoke` applied twice
    is `smoke` once), and so does the study, so a smoke run never moves the real
    models' aliases nor mixes its runs into the real experiment or study.

    Example:

    >>> from kg_service.config.schema import Config
    >>> smoke(Config(seeds=(3, 4, 5))).seeds
    (3, 4)
    """
    schedule = sequential(config)
    if schedule:  # two looks of SMOKE_SEEDS: the sequential loop runs once
        small = dataclasses.replace(
            schedule, start=SMOKE_SEEDS, step=SMOKE_SEEDS, max=2 * SMOKE_SEEDS
        )
        return dataclasses.replace(smoke(with_seeds(config, SMOKE_SEEDS)), seeds=small)
    data, model = config.data, dataclasses.replace(
        config.model,
        hidden_units=tuple(min(w, SMOKE_WIDTH) for w in config.model.hidden_units[:SMOKE_DEPTH]),
        d_model=min(config.model.d_model, SMOKE_WIDTH),
    )
    # Every config holds every task's keys (`schema.composed`): each task
    # shrinks its own, once.
    for shrink in dict.fromkeys(t.smoke for t in catalog.tasks() if t.smoke):
        data, model = shrink(data, model)
    training = dataclasses.replace(
        config.training,
        epochs=min(config.training.epochs, SMOKE_EPOCHS),
        steps_per_epoch=min(config.training.steps_per_epoch or SMOKE_STEPS, SMOKE_STEPS),
    )
    # A template with {experiment} gets the experiment's suffix already.
    template = config.registry.model_name
    if "experiment" not in [field for field, _, _ in template_fields(template)]:
        template = smoke_name(template)
    registry = dataclasses.replace(config.registry, model_name=template)
    return dataclasses.replace(
        config,
        experiment=smoke_name(config.experiment),
        # Nor into the real study (`kg report --study`).
        study=None if config.study is None else smoke_name(config.study),
        seeds=tuple(config.seeds[:SMOKE_SEEDS]),
        data=data,
        model=model,
        training=training,
        registry=registry,
        tuning=tuning_lib.smoke(config.tuning),  # one value (or trial), one seed
    )
