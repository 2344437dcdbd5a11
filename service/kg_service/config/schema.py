"""The sweep configuration: typed objects, validated once at the edge.

The dataclasses below are the schema, one line per key: its type (strict,
as YAML writes values: true is not 1, "5" is not 5; an integer is a fine
number), its constraint and its default. pydantic validates a file
against them (`kg_service.config.loading.load_config`, the edge) and
collects every problem in one pass; `kg_service.config.problems` phrases
each as the user wrote it. The checks that span fields (the baseline is
one of the activations, every split gets samples, registry names are
valid) read the fields validated before them.

Constructing these classes directly validates nothing (tests and callers
build them as plain values); everything after `load_config` trusts them.

Task facts (sizes, whether samples are split) come from
`kg_service.config.catalog`, where registered tasks leave them: this
module imports neither a task, Keras nor TensorFlow.
"""

import dataclasses
import difflib
import math
import re
import string
from typing import Annotated
from typing import Any
from typing import Literal
from typing import Optional
from typing import TypeVar
from typing import Union

import pydantic
from pydantic import AfterValidator
from pydantic import BeforeValidator
from pydantic import Discriminator
from pydantic import Field
from pydantic import Tag
from pydantic import Strict
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from kg_service.config import catalog
from kg_service.config import tuning as tuning_lib
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


def _fail(expected="", hint="", **ctx):
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


def _number_text(value):
    # PyYAML reads 1e-3 (no dot) as a string; a user means the number.
    if isinstance(value, str) and FLOAT_TEXT.fullmatch(value.strip()):
        return float(value)
    return value


def _non_blank(value):
    if not value.strip():
        _fail("a non-empty string")
    return value


def _distinct(values):
    for i, value in enumerate(values):
        if value in values[:i]:
            _fail(f"distinct values; {show(value)} appears twice", at=(i,))
    return values


def _seed_count(value):
    """`seeds: n` means seeds 0..n-1; a list passes through."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            _fail("a count n >= 1 (meaning seeds 0..n-1) or a list of distinct seeds")
        if value > MAX_SEEDS:
            _fail(f"a count n <= {MAX_SEEDS} (meaning seeds 0..n-1) or a list of distinct seeds")
        return list(range(value))
    return value


def _activation(name):
    names = catalog.names_table()
    key = names.lookup(name)
    if key is None:
        valid = names.names()
        _fail(
            f"an activation name from keras_gelu.names(): {', '.join(valid)}",
            names.closest(names.clean(name), valid),
        )
    return key


def _task_name(name):
    """A task in the catalog (read when validating, so a task registered by
    the caller's code counts)."""
    names = catalog.task_names()
    if name not in names:
        _fail(f"one of {quoted(names)}", catalog.closest(name, names))
    return name


def _experiment_name(value):
    if len(value) > 500:  # MLflow's limit
        _fail("an MLflow experiment name of at most 500 characters")
    return value


def template_fields(template):
    """[(field, spec, conversion)] of a name template's placeholders."""
    try:
        parsed = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template)]
    except ValueError:  # an unmatched brace
        parsed = [("", "", "!")]
    return [(f, spec, conv) for f, spec, conv in parsed if f is not None]


def _name_template(template):
    used = template_fields(template)
    bad = [f for f, spec, conv in used if f not in MODEL_NAME_FIELDS or spec or conv]
    if bad:
        placeholders = ", ".join("{%s}" % f for f in MODEL_NAME_FIELDS)
        match = difflib.get_close_matches(bad[0], MODEL_NAME_FIELDS, n=1, cutoff=0.5)
        _fail(
            f"a name template whose only placeholders are {placeholders}, with no "
            "format spec (write {{ and }} for literal braces)",
            f' Did you mean "{{{match[0]}}}"?' if match else "",
        )
    return template


def _alias(value):
    # MLflow: alphanumerics, "_" and "-"; "latest" and "v<digits>" are taken.
    if not re.fullmatch(r"[\w-]{1,255}", value) or re.fullmatch(r"latest|[vV]\d+", value, re.I):
        _fail(
            'an MLflow alias of letters, digits, "_" and "-", other than "latest" and '
            '"v<number>"'
        )
    return value


def _study_name(value):
    # A tag value that `kg report --study` finds again in a store query.
    if not re.fullmatch(r"[\w.-]{1,250}", value):
        _fail('a study name of letters, digits, ".", "_" and "-" (e.g. revival)')
    return value


# The checks that span fields read `info.data`: the fields validated before
# theirs, without those that have a problem (reported already).


def _in_activations(baseline, info):
    activations = info.data.get("activations")
    if activations is not None and baseline not in activations:
        expected = f"one of the activations ({', '.join(activations)})"
        _fail(expected, catalog.closest(baseline, activations))
    return baseline


def _splits_filled(data):
    if not catalog.task(data.dataset).sample_splits:
        return data  # a corpus: its task checks its splits' bytes
    train, validation, test = split_sizes(data)
    if min(train, validation, test) < MIN_SPLIT_SAMPLES:
        _fail(message=(
            f"{train + validation + test} samples split into {train} train / {validation} "
            f"validation / {test} test; expected at least {MIN_SPLIT_SAMPLES} in each. Raise "
            "data.n_samples or move data.test_fraction / data.validation_fraction away "
            "from 0 and 1."
        ))
    return data


def _heads_divide(model, info):
    data = info.data.get("data")
    if data is not None and not catalog.task(data.dataset).sample_splits:
        if model.d_model % model.heads:
            _fail(at=("heads",), message=(
                f"{model.heads} heads do not divide model.d_model {model.d_model}; "
                "expected a head count that divides it (each head gets d_model / "
                "heads dimensions)."
            ))
    return model


# MLflow forbids "/" and ":" and path-like names; the name is also a
# directory under export.dir and a TF Serving model name.
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,255}")
_MODEL_NAME_RULE = (
    "a registered model name of letters, digits, '.', '_' and '-' that starts with a "
    "letter or digit, at most 256 characters (it is also a directory under export.dir "
    "and a TF Serving model name)"
)


def _names_valid(registry, info):
    if not {"experiment", "activations", "data"} <= info.data.keys():
        return registry
    template, config = registry.model_name, info.data
    dataset = config["data"].dataset
    names = [
        template.format(experiment=config["experiment"], dataset=dataset, activation=a)
        for a in config["activations"]
    ]
    for name in names:
        if not _MODEL_NAME.fullmatch(name):
            _fail(at=("model_name",), message=(
                f"{show(template)} gives {show(name)}; expected {_MODEL_NAME_RULE}."
            ))
    if len(set(names)) < len(names):
        _fail(at=("model_name",), message=(
            f"{show(template)} gives the same name for several activations; expected a "
            "template with {activation} in it, so that each activation gets its own "
            "registered model."
        ))
    return registry


def _devices_need_mirrored(device):
    if device.devices is not None and device.distribution != "mirrored":
        _fail(at=("devices",), message=(
            f"devices lists the devices of distribution: mirrored, but distribution is "
            f"{show(device.distribution)}. Set device.distribution to mirrored, or remove "
            "device.devices."
        ))
    return device


def _defaults_if_null(section):
    return {} if section is None else section  # `data:` with every key commented out


def _not_a_key(value):
    raise PydanticCustomError("unexpected_keyword_argument", "not a key")


# --- The schema. -------------------------------------------------------------


def _integer(most=None, **bounds):
    """An int setting within `bounds` (pydantic Field's gt, ge, lt, le),
    and at most `most`: a sanity bound, said apart from the range."""
    if most is None:
        return Annotated[int, Strict(), Field(**bounds)]
    return Annotated[int, Strict(), Field(**bounds), AfterValidator(_at_most(most))]


def _at_most(most):
    def check(value):
        if value > most:
            _fail(f"a value <= {most:_} (more is surely a typo)".replace("_", ","))
        return value

    return check


def _number(**bounds):
    """A float setting within `bounds`; an int is a fine float."""
    return Annotated[float, Strict(), Field(**bounds), BeforeValidator(_number_text)]


# Strict: YAML's true is not 1, "5" is not 5. A `description` is what a
# value of the wrong type is told the setting takes.
_Bool = Annotated[bool, Strict()]
_Str = Annotated[str, Strict()]
_Text = Annotated[_Str, AfterValidator(_non_blank)]
_Fraction = _number(gt=0, lt=1)
_Seed = _integer(ge=0, le=MAX_SEED)
_Activation = Annotated[_Str, AfterValidator(_activation)]
_Widths = Annotated[
    tuple[_integer(gt=0, most=MAX_WIDTH), ...],
    Field(min_length=1, description="a non-empty list of positive integers, e.g. [64, 64]"),
]
_Activations = Annotated[
    tuple[_Activation, ...],
    Field(min_length=1, description="a list of activation names, e.g. [relu, gelu]"),
    AfterValidator(_distinct),
]
_Seeds = Annotated[
    tuple[_Seed, ...],
    Field(
        min_length=1,
        description="a count n >= 1 (meaning seeds 0..n-1) or a list of distinct "
        "non-negative integers",
    ),
    AfterValidator(_distinct),
    BeforeValidator(_seed_count),
]


def _source(name):
    if name not in VARIANCE_SOURCES:
        _fail(f"one of {quoted(VARIANCE_SOURCES)}", catalog.closest(str(name), VARIANCE_SOURCES))
    return name


_Sources = Annotated[
    tuple[Annotated[_Str, AfterValidator(_source)], ...],
    # Empty would make every seed the same member: nothing to compare over.
    Field(min_length=1, description="a non-empty list of sources of variance, any of "
                                    "init, order, split (e.g. [init, order, split])"),
    AfterValidator(_distinct),
]

_DeviceNames = Annotated[
    tuple[_Text, ...],
    Field(min_length=1, description='a non-empty list of device names, e.g. ["/gpu:0", "/gpu:1"]'),
    AfterValidator(_distinct),
]
_S = TypeVar("_S")
_Section = Annotated[_S, BeforeValidator(_defaults_if_null)]

# Unknown keys are errors; NaN and infinity are not numbers a setting takes.
_STRICT = pydantic.ConfigDict(extra="forbid", allow_inf_nan=False)


def _schedule_fits(schedule):
    if schedule.max < schedule.start:
        _fail(at=("max",), message=(
            f"{schedule.max} is below seeds.start {schedule.start}; expected "
            "max >= start (the most seeds the sweep may take, its first batch included)."
        ))
    return schedule


@dataclasses.dataclass(frozen=True)
class SequentialSeeds:
    """`seeds: {start, step, max}`: seeds 0..start-1 first, then `step` more
    at a time until every comparison is decided (group-sequential, alpha
    spent by `spending`; kg_service.analysis.sequential) or `max` seeds
    are trained."""

    __pydantic_config__ = _STRICT
    start: _integer(ge=2, most=MAX_SEEDS) = 4  # the first batch: a t-test needs 2
    step: _integer(ge=1, most=MAX_SEEDS) = 4  # seeds added per look
    max: _integer(ge=2, most=MAX_SEEDS) = 40  # the budget; the last look may add fewer
    spending: Literal["obrien_fleming", "pocock"] = "obrien_fleming"


# The form of `seeds`, told apart before validation so that a problem is
# reported against the form the user wrote (the tags never reach a message).
SEEDS_FORMS = ("sequential seeds", "seed list")


def _seeds_form(value):
    return SEEDS_FORMS[0] if isinstance(value, (dict, SequentialSeeds)) else SEEDS_FORMS[1]


_SeedsSetting = Annotated[
    Union[
        Annotated[Annotated[SequentialSeeds, AfterValidator(_schedule_fits)], Tag(SEEDS_FORMS[0])],
        Annotated[_Seeds, Tag(SEEDS_FORMS[1])],
    ],
    Discriminator(_seeds_form),
    Field(
        description="a count n >= 1 (meaning seeds 0..n-1) or a list of distinct "
        "non-negative integers, or a mapping {start, step, max} of sequential seeds",
    ),
]



@dataclasses.dataclass(frozen=True)
class DataConfig:
    __pydantic_config__ = _STRICT
    dataset: Annotated[_Str, AfterValidator(_task_name)] = "moons"  # a registered task
    n_samples: _integer(ge=50, most=MAX_SAMPLES) = 2000  # moons/circles only; digits has 1797
    noise: _number(ge=0) = 0.2  # moons/circles only
    test_fraction: _Fraction = 0.2  # held out, used only for the final evaluation
    validation_fraction: _Fraction = 0.2  # of what remains after the test split
    seed: _Seed = 0  # data generation and split; separate from model seeds
    standardize: _Bool = True  # the model z-scores raw inputs (training-split statistics)
    # python_code only: bytes of stdlib source read (sorted files), the
    # window length in bytes (the model's context), and the validation
    # windows evaluated after each epoch (the test split is evaluated whole).
    corpus_bytes: _integer(ge=1000) = 2_000_000
    context: _integer(ge=2, most=MAX_CONTEXT) = 128
    eval_windows: _integer(ge=1, most=MAX_BATCH) = 64


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    __pydantic_config__ = _STRICT
    hidden_units: _Widths = (64, 64)  # one activated projection per width
    dropout: _number(ge=0, lt=1) = 0.0
    block: Literal[tuple(catalog.BLOCKS)] = "dense"
    # block: feedforward -> Dense(d_model) stem, then one residual
    # keras_gelu.FeedForward(hidden_dim=w, output_dim=d_model) per width w.
    d_model: _integer(ge=1, most=MAX_WIDTH) = 32
    match_params: _Bool = False  # gated FFNs at the parameters of plain ones
    # python_code only (a decoder-only transformer, one block per width in
    # hidden_units, each FFN keras_gelu.FeedForward(width, output_dim=d_model)):
    heads: _integer(ge=1) = 4  # attention heads; d_model must divide by it
    layer_norm: _Bool = True  # false: every LayerNorm removed (normalization-free)
    tie_embeddings: _Bool = True  # logits through the token embedding, transposed


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    __pydantic_config__ = _STRICT
    optimizer: Literal[tuple(catalog.OPTIMIZERS)] = "adam"
    learning_rate: _number(gt=0) = 0.001
    epochs: _integer(ge=1, most=MAX_EPOCHS) = 100
    batch_size: _integer(ge=1, most=MAX_BATCH) = 32
    # python_code: training steps per epoch (None: one pass over the
    # training bytes); each step draws batch_size random windows.
    steps_per_epoch: Optional[_integer(ge=1, most=MAX_STEPS)] = None
    weight_decay: Optional[_number(ge=0)] = None  # None: the optimizer's default
    # Convergence speed: first epoch whose validation accuracy reaches this.
    convergence_threshold: _number(gt=0, le=1) = 0.95
    # The curves (issue 19): epochs until the training loss is at or below
    # this; None: the largest final training loss of the sweep's members.
    loss_threshold: Optional[_number(gt=0)] = None


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    __pydantic_config__ = _STRICT
    uri: Optional[_Text] = None  # None: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db
    # How long a store that fails mid-sweep (server down, 5xx, sqlite
    # locked) is retried, with growing waits, before kg-train stops and
    # keeps what it trained for --resume; 0: stop at the first failure.
    retry_seconds: _number(ge=0, le=86400) = 120.0


@dataclasses.dataclass(frozen=True)
class RegistryConfig:
    __pydantic_config__ = _STRICT
    enabled: _Bool = True
    # Placeholders: {experiment}, {dataset}, {activation}.
    model_name: Annotated[_Text, AfterValidator(_name_template)] = "{dataset}-{activation}"
    alias: Annotated[_Str, AfterValidator(_alias)] = "champion"


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    __pydantic_config__ = _STRICT
    enabled: _Bool = True
    dir: _Text = "exports"  # TF Serving layout: <dir>/<model_name>/<version>/
    tolerance: _number(gt=0) = 1e-5  # SavedModel vs in-memory model, max abs diff


@dataclasses.dataclass(frozen=True)
class DeviceConfig:
    __pydantic_config__ = _STRICT
    type: Literal["auto", "cpu", "gpu"] = "auto"
    mixed_precision: Optional[Literal["mixed_float16", "mixed_bfloat16"]] = None  # float32
    xla: _Bool = False  # jit_compile the training step
    # Data-parallel training on the backend's own engine (docs/distribution.md):
    # none; mirrored, one process over this machine's devices
    # (tf.distribute.MirroredStrategy, keras.distribution.DataParallel on
    # JAX); multi_worker, one process per machine (TensorFlow:
    # MultiWorkerMirroredStrategy from TF_CONFIG). training.batch_size is
    # the global batch, split across the replicas.
    distribution: Literal["none", "mirrored", "multi_worker"] = "none"
    # mirrored only: the devices to replicate over, as the backend names them
    # ("/gpu:0" on TensorFlow, "gpu:0" on JAX); null: every GPU, else every
    # CPU device the backend sees.
    devices: Optional[_DeviceNames] = None


# --- analysis: how the statistics decide (issue 18). -------------------------

# The equivalence margin when a config sets none, by compared metric, in its
# units: 0.3 pp of accuracy (about one test example in 300), 0.01 nats per
# byte of a language model's test loss. A metric not listed gets no margin
# (no equivalence verdict) unless the config gives one.
DEFAULT_MARGINS = {"test_accuracy": 0.003, "test_loss": 0.01}
_MARGIN_RULE = (
    "a positive number in the compared metric's units (0.003 = 0.3 pp of accuracy), or "
    "a mapping of metric to number, e.g. {test_accuracy: 0.003, test_loss: 0.01}"
)


def _positive(value):
    value = _number_text(value)
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _margin(value):
    """`margin: 0.003`, or `margin: {test_accuracy: 0.003, test_loss: 0.01}`."""
    if value is None:
        return None
    if isinstance(value, dict):
        if not value:
            _fail(_MARGIN_RULE)
        out = {}
        for metric, number in value.items():
            if metric not in DEFAULT_MARGINS:
                known = tuple(DEFAULT_MARGINS)
                _fail(at=(metric,), message=(
                    f"unknown metric {show(metric)}; expected one of {quoted(known)} (the "
                    f"metric a task compares).{catalog.closest(str(metric), known)}"))
            if not _positive(number):
                _fail(at=(metric,), message=(
                    f"got {show(number)}; expected a positive number in "
                    f"{metric}'s units (e.g. {DEFAULT_MARGINS[metric]:g})."))
            out[metric] = float(_number_text(number))
        return out
    if not _positive(value):
        _fail(_MARGIN_RULE)
    return float(_number_text(value))


def _contrast_sides(contrast):
    both = [a for a in contrast.plus if a in contrast.minus]
    if both:
        _fail(at=("minus",), message=(
            f"{show(both[0])} is on both sides of contrast {show(contrast.name)}; "
            "expected disjoint plus and minus lists."))
    return contrast


_CONTRAST_NAME = re.compile(r"[\w.\- ]{1,100}")


def _contrasts_valid(analysis, info):
    activations = info.data.get("activations")
    names = [c.name for c in analysis.contrasts]
    for i, contrast in enumerate(analysis.contrasts):
        if not _CONTRAST_NAME.fullmatch(contrast.name):
            _fail(at=("contrasts", i, "name"), message=(
                f"got {show(contrast.name)}; expected a contrast name of letters, digits, "
                "'_', '-', '.' and spaces (it names the MLflow metrics and tags of the "
                "contrast), e.g. gated-vs-plain."))
        if contrast.name in names[:i]:
            _fail(at=("contrasts", i, "name"), message=(
                f"contrast name {show(contrast.name)} appears twice; expected distinct names."))
        for side in ("plus", "minus"):
            for j, name in enumerate(getattr(contrast, side)):
                if activations is not None and name not in activations:
                    _fail(at=("contrasts", i, side, j), message=(
                        f"{show(name)} is not one of the activations "
                        f"({', '.join(activations)}); a contrast compares activations "
                        f"the sweep trains.{catalog.closest(name, activations)}"))
    return analysis


@dataclasses.dataclass(frozen=True)
class ContrastConfig:
    """A declared contrast: mean of `plus` minus mean of `minus`, paired by seed."""

    __pydantic_config__ = _STRICT
    name: _Text
    plus: _Activations
    minus: _Activations


@dataclasses.dataclass(frozen=True)
class AnalysisConfig:
    __pydantic_config__ = _STRICT
    # Equivalence margin, in the compared metric's units: a number, or a
    # mapping {metric: number}; None: DEFAULT_MARGINS for that metric.
    margin: Annotated[Any, BeforeValidator(_margin), Field(description=_MARGIN_RULE)] = None
    alpha: _number(gt=0, lt=0.5) = 0.05  # family-wise error rate of each kind of claim
    power: _number(gt=0, lt=1) = 0.8  # what the seed plan aims for
    contrasts: Annotated[
        tuple[Annotated[ContrastConfig, AfterValidator(_contrast_sides)], ...],
        Field(description="a list of {name, plus: [activations], minus: [activations]}"),
    ] = ()

    def margin_for(self, metric):
        """The margin for the compared `metric` ("test_accuracy"), or None."""
        if isinstance(self.margin, dict):
            return self.margin.get(metric, DEFAULT_MARGINS.get(metric))
        if self.margin is not None:
            return self.margin
        return DEFAULT_MARGINS.get(metric)


@dataclasses.dataclass(frozen=True)
class TuningConfig:
    """`tuning:` each activation's own value of `parameter`, chosen on
    validation before the comparison: a grid (`values`) or a range searched
    by Optuna's TPE (`low`, `high`, `trials`, `log`). The checks:
    `kg_service.config.tuning.problems`."""

    __pydantic_config__ = _STRICT
    parameter: _Text  # a numeric model.* or training.* key
    values: Optional[Annotated[tuple[_number(), ...], Field(min_length=1),
                               AfterValidator(_distinct)]] = None
    low: Optional[_number()] = None
    high: Optional[_number()] = None
    log: _Bool = False  # a range: log-uniform
    trials: Optional[_integer(ge=1, most=tuning_lib.MAX_TRIALS)] = None
    seeds: _integer(ge=1, most=tuning_lib.MAX_SEEDS) = 2  # per candidate, its own range
    select_by: Literal[tuple(tuning_lib.SELECT_BY)] = "val_loss"  # on validation


def _tuning_valid(tuning, info):
    if tuning is None:
        return None
    for at, message in tuning_lib.problems(
        tuning, {"model": ModelConfig, "training": TrainingConfig}
    ):
        _fail(at=at, message=message)
    seeds = info.data.get("seeds")
    if isinstance(seeds, tuple) and max(seeds) >= tuning_lib.SEED_BASE:
        _fail(message=(
            f"seed {max(seeds)} lies in the tuning seeds' range (from "
            f"{tuning_lib.SEED_BASE}); expected the comparison's seeds below it, so "
            "that no comparison member repeats a tuning member's seed."))
    return tuning


@dataclasses.dataclass(frozen=True)
class Config:
    __pydantic_config__ = _STRICT
    experiment: Annotated[_Text, AfterValidator(_experiment_name)] = "kg-sweep"
    activations: _Activations = ("relu", "gelu")  # keras_gelu.names(), canonical spelling
    # What every other activation is compared with; when absent: "relu" if
    # it is among the activations, else the first activation.
    baseline: Annotated[_Activation, AfterValidator(_in_activations)] = "relu"
    # YAML: a list, a count n -> 0..n-1, or {start, step, max}: sequential
    # seeds (SequentialSeeds; kg_service.config.derived.with_seeds gives
    # the config of the seeds a look has trained).
    seeds: _SeedsSetting = (0, 1, 2, 3, 4)
    output_dir: _Text = "kg-output"  # report, plots, resolved config
    # Sweeps tagged with one study name are analysed as one family by
    # `kg report --study NAME` (docs/studies.md); null: a sweep on its own.
    study: Optional[Annotated[_Str, AfterValidator(_study_name)]] = None
    data: Annotated[_Section[DataConfig], AfterValidator(_splits_filled)] = DataConfig()
    model: Annotated[_Section[ModelConfig], AfterValidator(_heads_divide)] = ModelConfig()
    training: _Section[TrainingConfig] = TrainingConfig()
    tracking: _Section[TrackingConfig] = TrackingConfig()
    registry: Annotated[_Section[RegistryConfig], AfterValidator(_names_valid)] = RegistryConfig()
    export: _Section[ExportConfig] = ExportConfig()
    device: Annotated[_Section[DeviceConfig], AfterValidator(_devices_need_mirrored)] = (
        DeviceConfig()
    )
    analysis: Annotated[_Section[AnalysisConfig], AfterValidator(_contrasts_valid)] = (
        AnalysisConfig()
    )
    # The sources of variance a member's seed varies (issue 19): init (the
    # initial weights), order (the batch order), split (the train / val /
    # test split); each gets its own seed derived from the member's
    # (kg_service.config.derived.source_seeds). A source left out is the
    # same for every member.
    vary: _Sources = VARIANCE_SOURCES
    # Each activation's own value of one setting, chosen on validation
    # before the comparison (docs/tuning.md); null: the configured value.
    tuning: Annotated[Optional[TuningConfig], AfterValidator(_tuning_valid)] = None
    # The YAML file it came from: set by load_config, not a key.
    source: SkipJsonSchema[Annotated[Optional[str], BeforeValidator(_not_a_key)]] = None


SCHEMA = pydantic.TypeAdapter(Config)


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
