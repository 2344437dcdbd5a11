"""`tuning:`: each activation's own value of one setting, chosen on
validation before the comparison (issue 19; docs/tuning.md).

What follows from a tuning block alone, pure and cheap (no Keras, no
Optuna): which settings may be tuned (the numeric keys of the schema's
model and training sections), the checks the schema runs on a block, the
candidates of a grid, the seeds a candidate trains on, the config a
candidate trains with, and the block at smoke sizes. The stage that
trains the candidates is `kg_service.sweep.tuning`; the choice and the
table, `kg_service.analysis.reports.tuning`.

The schema (`kg_service.config.schema.TuningConfig`) imports this module,
never the other way round: the sections are handed in.
"""

import dataclasses
import difflib
import math
import typing

import pydantic

# What a candidate is scored by, on the validation split (never the test
# split), and which way is better.
SELECT_BY = {"val_loss": False, "val_accuracy": True}  # name -> higher is better
MAX_TRIALS = 100  # candidates per activation; more is surely a typo
MAX_SEEDS = 100  # tuning seeds per candidate
# Tuning seeds: candidate c's j-th seed is SEED_BASE + c * SEED_STRIDE + j.
# A range of its own, so no tuning member shares a seed (its initial
# weights, its batch order) with a comparison member: the comparison's
# seeds must lie below SEED_BASE (the schema checks).
SEED_BASE = 2**31
SEED_STRIDE = 1000  # > MAX_SEEDS: candidates' seeds never overlap
SECTIONS = ("model", "training")  # what a member's training reads; data is loaded once
# --smoke: the first value (or one trial), one seed: the stage runs whole
# (train, track, choose, report) at the least cost; each value is one more
# stacked model per activation (what two cost digits --smoke, measured:
# docs/tuning.md).
SMOKE_VALUES = 1
SMOKE_SEEDS = 1


def tuning_seeds(candidate, count):
    """The seeds candidate `candidate` (0-based) of every activation trains on.

    >>> tuning_seeds(1, 2)
    (2147484648, 2147484649)
    """
    start = SEED_BASE + candidate * SEED_STRIDE
    return tuple(range(start, start + count))


def _kind(annotation):
    """int or float for a numeric setting's annotation (Optional too), else None."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kind(typing.get_args(annotation)[0])
    if origin is typing.Union:
        kinds = {_kind(a) for a in typing.get_args(annotation) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else None
    return annotation if annotation in (int, float) else None


def tunable(sections):
    """`{"training.learning_rate": (section class, field, int or float)}`:
    every numeric key of `sections` ({"model": ModelConfig, ...})."""
    found = {}
    for name, cls in sections.items():
        for field in dataclasses.fields(cls):
            kind = _kind(field.type)
            if kind is not None:
                found[f"{name}.{field.name}"] = (cls, field.name, kind)
    return found


def value_problem(section, field, kind, value):
    """Why `value` is not a value the setting takes (its schema's own
    bounds), or None. An int setting takes whole numbers only."""
    if kind is int:
        if not float(value).is_integer():
            return "expected a whole number"
        value = int(value)
    try:
        pydantic.TypeAdapter(section).validate_python({field: value})
    except pydantic.ValidationError as error:
        return error.errors()[0]["msg"].lower()
    return None


def problems(tuning, sections):
    """`[(key path under tuning, sentence)]`: what is wrong with a block.

    Checks that `parameter` is a numeric model/training key (with the
    closest one), that exactly one of `values` or `low`/`high`/`trials` is
    given, that a range is ordered (positive, with `log`), and that every
    value is in the setting's own range.
    """
    keys = tunable(sections)
    if tuning.parameter not in keys:
        close = difflib.get_close_matches(tuning.parameter, list(keys), n=1, cutoff=0.5)
        hint = f' Did you mean "{close[0]}"?' if close else ""
        return [(("parameter",), (
            f"{tuning.parameter!r} is not a setting that can be tuned; expected a numeric "
            f"key of the model or training section: {', '.join(keys)}.{hint}"))]
    section, field, kind = keys[tuning.parameter]
    ranged = [k for k in ("low", "high", "trials") if getattr(tuning, k) is not None]
    if tuning.values is not None and ranged:
        return [((ranged[0],), (
            "give either values (a grid) or low, high and trials (a range searched by "
            f"Optuna's TPE), not both; got values and {', '.join(ranged)}."))]
    if tuning.values is None and len(ranged) < 3:
        missing = [k for k in ("low", "high", "trials") if k not in ranged]
        return [((), (
            "expected values: [...] (a grid), or low, high and trials (a range searched "
            f"by Optuna's TPE); missing {', '.join(missing)}."))]
    if tuning.values is not None and tuning.log:
        return [(("log",), "log applies to a range (low, high, trials); a grid lists its values.")]
    found = []
    named = (
        [(("values", i), v) for i, v in enumerate(tuning.values)]
        if tuning.values is not None
        else [(("low",), tuning.low), (("high",), tuning.high)]
    )
    for at, value in named:
        why = value_problem(section, field, kind, value)
        if why:
            found.append((at, f"{value:g} is not a value {tuning.parameter} takes: {why}."))
    if tuning.values is None and not found:
        if tuning.low >= tuning.high:
            found.append((("high",), f"expected high > low; got low {tuning.low:g}, "
                                     f"high {tuning.high:g}."))
        elif tuning.log and tuning.low <= 0:
            found.append((("low",), f"a log range needs low > 0; got {tuning.low:g}."))
    return found


def kind_of(tuning, sections):
    """int or float: the tuned setting's kind."""
    return tunable(sections)[tuning.parameter][2]


def grid(tuning, kind):
    """The candidates in order, when they are a grid: `values`, or every
    whole number of an int range no larger than `trials`; None for a range
    searched by TPE."""
    if tuning.values is not None:
        return tuple(int(v) if kind is int else float(v) for v in tuning.values)
    if kind is int:
        low, high = math.ceil(tuning.low), math.floor(tuning.high)
        if high - low + 1 <= tuning.trials:
            return tuple(range(low, high + 1))
    return None


def candidate_count(tuning, kind):
    """How many candidates each activation trains (the plan's count)."""
    values = grid(tuning, kind)
    return len(values) if values is not None else tuning.trials


def with_value(config, parameter, value):
    """`config` with the tuned `parameter` ("training.learning_rate") set."""
    section, field = parameter.split(".")
    return dataclasses.replace(
        config, **{section: dataclasses.replace(getattr(config, section), **{field: value})}
    )


def candidate_config(config, activation, index, value):
    """The config of `activation`'s candidate `index`, at `value`: that
    activation alone (its own baseline), the candidate's tuning seeds
    (`tuning_seeds`), the tuned setting at `value`, and no tuning block."""
    alone = dataclasses.replace(
        config, activations=(activation,), baseline=activation,
        seeds=tuning_seeds(index, config.tuning.seeds), tuning=None,
    )  # fmt: skip
    return with_value(alone, config.tuning.parameter, value)


def smoke(tuning):
    """The block at smoke sizes: its first `SMOKE_VALUES` value (or that
    many trials), `SMOKE_SEEDS` seed."""
    if tuning is None:
        return None
    if tuning.values is not None:
        return dataclasses.replace(tuning, values=tuning.values[:SMOKE_VALUES], seeds=SMOKE_SEEDS)
    return dataclasses.replace(tuning, trials=min(tuning.trials, SMOKE_VALUES), seeds=SMOKE_SEEDS)
