"""The schema's building blocks: strict value types and the checks pydantic
runs on top of them.

A setting's type says what YAML may write for it (strict: true is not 1,
"5" is not 5; an integer is a fine number; NaN and infinity are not), its
range and its sanity bound (`integer(ge=1, most=MAX_EPOCHS)`); a check
rejects a value with `fail`, which `kg_service.config.problems` phrases
as the user wrote it. The checks that span fields (`in_activations`,
`splits_filled`, `names_valid`, `task_checks`) read the fields validated before theirs.
`kg_service.config.schema` puts these together into the sections of a
sweep's configuration.
"""

import difflib
import math
import os
import re
import string
from typing import Annotated
from typing import TypeVar

import keras_gelu_names
import pydantic
from pydantic import AfterValidator
from pydantic import BeforeValidator
from pydantic import Field
from pydantic import Strict
from pydantic_core import PydanticCustomError

from kg_service.config import catalog
from kg_service.config.excerpts import quoted
from kg_service.config.excerpts import show

MIN_SPLIT_SAMPLES = 10  # fewer makes validation/test accuracy meaningless
MAX_SEED = 2**32 - 1  # numpy's seed range
MAX_SEEDS = 10_000  # a count beyond is a typo: each seed is a training run per activation
# Sizes beyond these are typos (1e10 samples, 1e12 epochs); what fits in
# this machine's memory is checked before training (`memory_estimate`).
MAX_SAMPLES = 100_000_000
MAX_EPOCHS = 1_000_000
MAX_BATCH = 1_000_000  # a classifier's batch beyond its split is the split
MAX_STEPS = 1_000_000
MAX_WIDTH = 1_000_000
MAX_CONTEXT = 65_536
GENERATED_FEATURES = 2  # a generated data set: one (x, y) point per sample
MODEL_NAME_FIELDS = ("experiment", "dataset", "activation")
# What a member's seed may vary (`vary`): initial weights, batch order, data split.
VARIANCE_SOURCES = ("init", "order", "split")


# --- Checks pydantic runs on top of the types. -------------------------------


def fail(expected="", hint="", **ctx):
    """Rejects the value being checked.

    Args:
        expected: What the value should be ("a non-empty string").
        hint: Appended to the message (' Did you mean "x"?').
        **ctx: `at`, a key path below the checked value to report the
            problem at (a list index, `("model_name",)`); `message`, a whole
            sentence instead of "got ...; expected ...".
    """
    ctx = dict(expected=expected, hint=hint, **ctx)
    raise PydanticCustomError("config", "expected {expected}", ctx)


FLOAT_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def number_text(value):
    # PyYAML reads 1e-3 (no dot) as a string; a user means the number.
    if isinstance(value, str) and FLOAT_TEXT.fullmatch(value.strip()):
        return float(value)
    return value


def non_blank(value):
    if not value.strip():
        fail("a non-empty string")
    return value


def folder(value):
    """A folder setting: no control character (a newline split the plan's
    lines in two); `~` is the home folder, as a shell reads it."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        fail("a folder path without control characters (newlines, tabs...)")
    return os.path.expanduser(value)


def distinct(values):
    for i, value in enumerate(values):
        if value in values[:i]:
            fail(f"distinct values; {show(value)} appears twice", at=(i,))
    return values


def seed_count(value):
    """`seeds: n` means seeds 0..n-1; a list passes through."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            fail("a count n >= 1 (meaning seeds 0..n-1) or a list of distinct seeds")
        if value > MAX_SEEDS:
            fail(f"a count n <= {MAX_SEEDS} (meaning seeds 0..n-1) or a list of distinct seeds")
        return list(range(value))
    return value


def activation(name):
    key = keras_gelu_names.lookup(name)
    if key is None:
        valid = keras_gelu_names.names()
        fail(
            f"an activation name from keras_gelu.names(): {', '.join(valid)}",
            keras_gelu_names.closest(keras_gelu_names.clean(name), valid),
        )
    return key


def task_name(name):
    """A task in the catalog (read when validating, so a task registered by
    the caller's code counts)."""
    names = catalog.task_names()
    if name not in names:
        fail(f"one of {quoted(names)}", catalog.closest(name, names))
    return name


# One file or folder name: at most 255 bytes (Linux, macOS, Windows).
NAME_MAX = 255
# What the service appends to a name that becomes a folder: --smoke's
# "-smoke", and the report folder's "-YYYYmmdd-HHMMSS" (an experiment's
# under output_dir; a study's "study-" prefix under kg-output, `kg report
# --study`).
SMOKE_SUFFIX = len("-smoke")
STAMP = len("-20260101-000000")


def path_component(value, what, room):
    """Refuses a name that, with `room` bytes added, is not one safe file
    or folder name: a path separator, "." or "..", a control character
    (issue 30 §11: `../../x` wrote the report outside output_dir, a 300
    character name failed with an OSError after every member trained)."""
    most = NAME_MAX - room
    if (
        "/" in value or "\\" in value or value.strip(".") == ""
        or any(ord(c) < 32 or ord(c) == 127 for c in value)
    ):
        fail(f'{what} without "/", "\\", control characters, and other than "." or ".." '
             f"(it also names a folder)")
    if len(value.encode("utf-8")) > most:
        fail(f"{what} of at most {most} bytes (it also names a folder, and a file "
             f"name holds {NAME_MAX} bytes with what kg-train adds to it)")
    return value


def experiment_name(value):
    # MLflow allows 500 characters; the report folder under output_dir
    # (`<experiment>[-smoke]-YYYYmmdd-HHMMSS`) is one file name.
    return path_component(value, "an experiment name", SMOKE_SUFFIX + STAMP)


def template_fields(template):
    """[(field, spec, conversion)] of a name template's placeholders."""
    try:
        parsed = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template)]
    except ValueError:  # an unmatched brace
        parsed = [("", "", "!")]
    return [(f, spec, conv) for f, spec, conv in parsed if f is not None]


def name_template(template):
    used = template_fields(template)
    bad = [f for f, spec, conv in used if f not in MODEL_NAME_FIELDS or spec or conv]
    if bad:
        placeholders = ", ".join("{%s}" % f for f in MODEL_NAME_FIELDS)
        match = difflib.get_close_matches(bad[0], MODEL_NAME_FIELDS, n=1, cutoff=0.5)
        fail(
            f"a name template whose only placeholders are {placeholders}, with no "
            "format spec (write {{ and }} for literal braces)",
            f' Did you mean "{{{match[0]}}}"?' if match else "",
        )
    return template


def alias(value):
    # MLflow: alphanumerics, "_" and "-"; "latest" and "v<digits>" are taken.
    if not re.fullmatch(r"[\w-]{1,255}", value) or re.fullmatch(r"latest|[vV]\d+", value, re.I):
        fail(
            'an MLflow alias of letters, digits, "_" and "-", other than "latest" and '
            '"v<number>"'
        )
    return value


def study_name(value):
    # A tag value that `kg report --study` finds again in a store query,
    # and its report folder `study-<name>[-smoke]-YYYYmmdd-HHMMSS`.
    if not re.fullmatch(r"[\w.-]{1,250}", value):
        fail('a study name of letters, digits, ".", "_" and "-" (e.g. revival)')
    return path_component(value, "a study name", len("study-") + SMOKE_SUFFIX + STAMP)


# The checks that span fields read `info.data`: the fields validated before
# theirs, without those that have a problem (reported already).


def in_activations(baseline, info):
    activations = info.data.get("activations")
    if activations is not None and baseline not in activations:
        expected = f"one of the activations ({', '.join(activations)})"
        fail(expected, catalog.closest(baseline, activations))
    return baseline


def splits_filled(data):
    if not catalog.task(data.dataset).sample_splits:
        return data  # a corpus: its task checks its splits' bytes
    train, validation, test = split_sizes(data)
    if min(train, validation, test) < MIN_SPLIT_SAMPLES:
        fail(message=(
            f"{train + validation + test} samples split into {train} train / {validation} "
            f"validation / {test} test; expected at least {MIN_SPLIT_SAMPLES} in each. Raise "
            "data.n_samples or move data.test_fraction / data.validation_fraction away "
            "from 0 and 1."
        ))
    return data


def task_checks(model, info):
    """The configured task's own check of `model:` (`Task.check_model`),
    beside the types of its keys: a language model's heads divide d_model."""
    data = info.data.get("data")
    check = catalog.task(data.dataset).check_model if data is not None else None
    if check is not None:
        check(model)
    return model


# MLflow forbids "/" and ":" and path-like names; the name is also a
# directory under export.dir and a TF Serving model name.
# At most one file name, with --smoke's "-smoke" added.
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,%d}" % (NAME_MAX - SMOKE_SUFFIX - 1))
MODEL_NAME_RULE = (
    "a registered model name of letters, digits, '.', '_' and '-' that starts with a "
    f"letter or digit, at most {NAME_MAX - SMOKE_SUFFIX} characters (it is also a "
    "directory under export.dir and a TF Serving model name)"
)


def names_valid(registry, info):
    if not {"experiment", "activations", "data"} <= info.data.keys():
        return registry
    template, config = registry.model_name, info.data
    dataset = config["data"].dataset
    names = [
        template.format(experiment=config["experiment"], dataset=dataset, activation=a)
        for a in config["activations"]
    ]
    for name in names:
        if not MODEL_NAME.fullmatch(name):
            fail(at=("model_name",), message=(
                f"{show(template)} gives {show(name)}; expected {MODEL_NAME_RULE}."
            ))
    if len(set(names)) < len(names):
        fail(at=("model_name",), message=(
            f"{show(template)} gives the same name for several activations; expected a "
            "template with {activation} in it, so that each activation gets its own "
            "registered model."
        ))
    return registry


def devices_need_mirrored(device):
    if device.devices is not None and device.distribution != "mirrored":
        fail(at=("devices",), message=(
            f"devices lists the devices of distribution: mirrored, but distribution is "
            f"{show(device.distribution)}. Set device.distribution to mirrored, or remove "
            "device.devices."
        ))
    return device


def defaults_if_null(section):
    return {} if section is None else section  # `data:` with every key commented out


def not_a_key(value):
    raise PydanticCustomError("unexpected_keyword_argument", "not a key")



def integer(most=None, **bounds):
    """An int setting within `bounds` (pydantic Field's gt, ge, lt, le),
    and at most `most`: a sanity bound, said apart from the range."""
    if most is None:
        return Annotated[int, Strict(), Field(**bounds)]
    return Annotated[int, Strict(), Field(**bounds), AfterValidator(at_most(most))]


def at_most(most):
    def check(value):
        if value > most:
            fail(f"a value <= {most:_} (more is surely a typo)".replace("_", ","))
        return value

    return check


def number(**bounds):
    """A float setting within `bounds`; an int is a fine float."""
    return Annotated[float, Strict(), Field(**bounds), BeforeValidator(number_text)]


# Strict: YAML's true is not 1, "5" is not 5. A `description` is what a
# value of the wrong type is told the setting takes.
Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]
Text = Annotated[Str, AfterValidator(non_blank)]
Folder = Annotated[Str, AfterValidator(non_blank), AfterValidator(folder)]
Fraction = number(gt=0, lt=1)
Seed = integer(ge=0, le=MAX_SEED)
Activation = Annotated[Str, AfterValidator(activation)]
Widths = Annotated[
    tuple[integer(gt=0, most=MAX_WIDTH), ...],
    Field(min_length=1, description="a non-empty list of positive integers, e.g. [64, 64]"),
]
Activations = Annotated[
    tuple[Activation, ...],
    Field(min_length=1, description="a list of activation names, e.g. [relu, gelu]"),
    AfterValidator(distinct),
]
Seeds = Annotated[
    tuple[Seed, ...],
    Field(
        min_length=1,
        description="a count n >= 1 (meaning seeds 0..n-1) or a list of distinct "
        "non-negative integers",
    ),
    AfterValidator(distinct),
    BeforeValidator(seed_count),
]


def source(name):
    if name not in VARIANCE_SOURCES:
        fail(f"one of {quoted(VARIANCE_SOURCES)}", catalog.closest(str(name), VARIANCE_SOURCES))
    return name


Sources = Annotated[
    tuple[Annotated[Str, AfterValidator(source)], ...],
    # Empty would make every seed the same member: nothing to compare over.
    Field(min_length=1, description="a non-empty list of sources of variance, any of "
                                    "init, order, split (e.g. [init, order, split])"),
    AfterValidator(distinct),
]

DeviceNames = Annotated[
    tuple[Text, ...],
    Field(min_length=1, description='a non-empty list of device names, e.g. ["/gpu:0", "/gpu:1"]'),
    AfterValidator(distinct),
]
S = TypeVar("S")
Section = Annotated[S, BeforeValidator(defaults_if_null)]

# Unknown keys are errors; NaN and infinity are not numbers a setting takes.
STRICT = pydantic.ConfigDict(extra="forbid", allow_inf_nan=False)
# --- Split sizes: what validation checks and the plan shows. ----------------


def split_sizes(data):
    """Returns (train, validation, test) sample counts for a DataConfig.

    As scikit-learn's `train_test_split` with float sizes: the test split
    takes ceil(test_fraction * n), validation ceil(validation_fraction *
    rest), training the remainder. A task of `fixed_samples` has that many.
    """
    n = catalog.task(data.dataset).fixed_samples or data.n_samples
    test = math.ceil(data.test_fraction * n)
    validation = math.ceil(data.validation_fraction * (n - test))
    return n - test - validation, validation, test
