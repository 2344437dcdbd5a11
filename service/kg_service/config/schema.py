"""The sweep configuration: typed objects, validated once at the edge.

The dataclasses below are the schema, one line per key: its type (strict,
as YAML writes values: true is not 1, "5" is not 5; an integer is a fine
number), its constraint and its default; the value types and the checks
they run are `kg_service.config.fields`'. pydantic validates a file
against them (`kg_service.config.loading.load_config`, the edge) and
collects every problem in one pass; `kg_service.config.problems` phrases
each as the user wrote it. The checks that span fields (the baseline is
one of the activations, every split gets samples, registry names are
valid) read the fields validated before them.

Constructing these classes directly validates nothing (tests and callers
build them as plain values); everything after `load_config` trusts them.

Task facts (sizes, whether samples are split) come from
`kg_service.config.catalog`, where registered tasks leave them: this
package imports neither a task, Keras nor TensorFlow. A task's own keys
too: `DataConfig` and `ModelConfig` are `CommonData` and `CommonModel`
with every registered task's `data_settings` and `model_settings` added
(`composed`), so `schema.DataConfig`, `ModelConfig`, `Config` and `SCHEMA`
are made when first read and again when a task with keys of its own is
registered.
"""

import dataclasses
import math
import re
from typing import Annotated
from typing import Any
from typing import Literal
from typing import Optional
from typing import Union

import pydantic
from pydantic import AfterValidator
from pydantic import BeforeValidator
from pydantic import Discriminator
from pydantic import Field
from pydantic import Tag
from pydantic.json_schema import SkipJsonSchema

from kg_service.config import catalog
from kg_service.config import claims as claims_lib
from kg_service.config import fields
from kg_service.config.execution import ExecutionConfig
from kg_service.config import tuning as tuning_lib
from kg_service.config.excerpts import quoted
from kg_service.config.excerpts import show
from kg_service.config.sequential_seeds import SequentialSeeds
from kg_service.config.sequential_seeds import schedule_fits

# The form of `seeds`, told apart before validation so that a problem is
# reported against the form the user wrote (the tags never reach a message).
SEEDS_FORMS = ("sequential seeds", "seed list")


def _seeds_form(value):
    return SEEDS_FORMS[0] if isinstance(value, (dict, SequentialSeeds)) else SEEDS_FORMS[1]


_SeedsSetting = Annotated[
    Union[
        Annotated[Annotated[SequentialSeeds, AfterValidator(schedule_fits)], Tag(SEEDS_FORMS[0])],
        Annotated[fields.Seeds, Tag(SEEDS_FORMS[1])],
    ],
    Discriminator(_seeds_form),
    Field(
        description="a count n >= 1 (meaning seeds 0..n-1) or a list of distinct "
        "non-negative integers, or a mapping {start, step, max} of sequential seeds",
    ),
]

@dataclasses.dataclass(frozen=True)
class CommonData:
    """The `data:` keys of every task; `DataConfig` adds each registered
    task's own (`Task.data_settings`) after `dataset`."""

    __pydantic_config__ = fields.STRICT
    # A registered task; by default the first registered (`composed`).
    dataset: Annotated[fields.Str, AfterValidator(fields.task_name)] = None
    test_fraction: fields.Fraction = 0.2  # held out, used only for the final evaluation
    validation_fraction: fields.Fraction = 0.2  # of what remains after the test split
    seed: fields.Seed = 0  # data generation and split; separate from model seeds
    standardize: fields.Bool = True  # the model z-scores raw inputs (training-split statistics)


@dataclasses.dataclass(frozen=True)
class CommonModel:
    """The `model:` keys of every task; `ModelConfig` adds each registered
    task's own (`Task.model_settings`) after them."""

    __pydantic_config__ = fields.STRICT
    hidden_units: fields.Widths = (64, 64)  # one activated projection per width
    dropout: fields.number(ge=0, lt=1) = 0.0
    block: Literal[tuple(catalog.BLOCKS)] = "dense"
    # block: feedforward -> Dense(d_model) stem, then one residual
    # keras_gelu.FeedForward(hidden_dim=w, output_dim=d_model) per width w.
    d_model: fields.integer(ge=1, most=fields.MAX_WIDTH) = 32
    match_params: fields.Bool = False  # gated FFNs at the parameters of plain ones


def _section(name, common, section, after):
    """`common` with the registered tasks' keys of `section` (the catalog's
    `settings`) after its first `after` keys: the class a config's section is."""
    own = dataclasses.fields(common)
    keys = own[:after] + catalog.settings(section) + own[after:]
    # `data.dataset` when a config names none: the first task registered
    # (kg_service/tasks/__init__.py's first line).
    first = (catalog.task_names() or (None,))[0]
    return dataclasses.make_dataclass(
        name,
        [(f.name, f.type, dataclasses.field(default=first if f.name == "dataset" else f.default))
         for f in keys],
        frozen=True,
        namespace={"__pydantic_config__": fields.STRICT, "__doc__": common.__doc__,
                   "__module__": __name__},
    )


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    __pydantic_config__ = fields.STRICT
    optimizer: Literal[tuple(catalog.OPTIMIZERS)] = "adam"
    learning_rate: fields.number(gt=0) = 0.001
    epochs: fields.integer(ge=1, most=fields.MAX_EPOCHS) = 100
    batch_size: fields.integer(ge=1, most=fields.MAX_BATCH) = 32
    # A language model's training steps per epoch (None: one pass over the
    # training bytes); each step draws batch_size random windows.
    steps_per_epoch: Optional[fields.integer(ge=1, most=fields.MAX_STEPS)] = None
    weight_decay: Optional[fields.number(ge=0)] = None  # None: the optimizer's default
    # Convergence speed: first epoch whose validation accuracy reaches this.
    convergence_threshold: fields.number(gt=0, le=1) = 0.95
    # The curves (issue 19): epochs until the training loss is at or below
    # this; None: the largest final training loss of the sweep's members.
    loss_threshold: Optional[fields.number(gt=0)] = None


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    __pydantic_config__ = fields.STRICT
    uri: Optional[fields.Text] = None  # None: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db
    # How long a store that fails mid-sweep (server down, 5xx, sqlite
    # locked) is retried, with growing waits, before kg-train stops and
    # keeps what it trained for --resume; 0: stop at the first failure.
    retry_seconds: fields.number(ge=0, le=86400) = 120.0
    # One process writes a sweep (`kg_service.tracking.lease`): its lease
    # goes stale this long after its last heartbeat (beats every tenth of
    # it), and another --resume may then take the sweep over.
    lease_seconds: fields.number(ge=5, le=86400) = 300.0


@dataclasses.dataclass(frozen=True)
class RegistryConfig:
    __pydantic_config__ = fields.STRICT
    enabled: fields.Bool = True
    # Placeholders: {experiment}, {dataset}, {activation}.
    model_name: Annotated[fields.Text, AfterValidator(fields.name_template)] = "{dataset}-{activation}"
    alias: Annotated[fields.Str, AfterValidator(fields.alias)] = "champion"


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    __pydantic_config__ = fields.STRICT
    enabled: fields.Bool = True
    dir: fields.Folder = "exports"  # TF Serving layout: <dir>/<model_name>/<version>/
    tolerance: fields.number(gt=0) = 1e-5  # SavedModel vs in-memory model, max abs diff


@dataclasses.dataclass(frozen=True)
class DeviceConfig:
    __pydantic_config__ = fields.STRICT
    type: Literal["auto", "cpu", "gpu"] = "auto"
    mixed_precision: Optional[Literal["mixed_float16", "mixed_bfloat16"]] = None  # float32
    xla: fields.Bool = False  # jit_compile the training step
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
    devices: Optional[fields.DeviceNames] = None


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
    value = fields.number_text(value)
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _margin(value):
    """`margin: 0.003`, or `margin: {test_accuracy: 0.003, test_loss: 0.01}`."""
    if value is None:
        return None
    if isinstance(value, dict):
        if not value:
            fields.fail(_MARGIN_RULE)
        out = {}
        for metric, number in value.items():
            if metric not in DEFAULT_MARGINS:
                known = tuple(DEFAULT_MARGINS)
                fields.fail(at=(metric,), message=(
                    f"unknown metric {show(metric)}; expected one of {quoted(known)} (the "
                    f"metric a task compares).{catalog.closest(str(metric), known)}"))
            if not _positive(number):
                fields.fail(at=(metric,), message=(
                    f"got {show(number)}; expected a positive number in "
                    f"{metric}'s units (e.g. {DEFAULT_MARGINS[metric]:g})."))
            out[metric] = float(fields.number_text(number))
        return out
    if not _positive(value):
        fields.fail(_MARGIN_RULE)
    return float(fields.number_text(value))


def _contrast_sides(contrast):
    both = [a for a in contrast.plus if a in contrast.minus]
    if both:
        fields.fail(at=("minus",), message=(
            f"{show(both[0])} is on both sides of contrast {show(contrast.name)}; "
            "expected disjoint plus and minus lists."))
    return contrast


_CONTRAST_NAME = re.compile(r"[\w.\- ]{1,100}")


def _contrasts_valid(analysis, info):
    activations = info.data.get("activations")
    names = [c.name for c in analysis.contrasts]
    for i, contrast in enumerate(analysis.contrasts):
        if not _CONTRAST_NAME.fullmatch(contrast.name):
            fields.fail(at=("contrasts", i, "name"), message=(
                f"got {show(contrast.name)}; expected a contrast name of letters, digits, "
                "'_', '-', '.' and spaces (it names the MLflow metrics and tags of the "
                "contrast), e.g. gated-vs-plain."))
        if contrast.name in names[:i]:
            fields.fail(at=("contrasts", i, "name"), message=(
                f"contrast name {show(contrast.name)} appears twice; expected distinct names."))
        for side in ("plus", "minus"):
            for j, name in enumerate(getattr(contrast, side)):
                if activations is not None and name not in activations:
                    fields.fail(at=("contrasts", i, side, j), message=(
                        f"{show(name)} is not one of the activations "
                        f"({', '.join(activations)}); a contrast compares activations "
                        f"the sweep trains.{catalog.closest(name, activations)}"))
    return analysis


@dataclasses.dataclass(frozen=True)
class ContrastConfig:
    """A declared contrast: mean of `plus` minus mean of `minus`, paired by seed."""

    __pydantic_config__ = fields.STRICT
    name: fields.Text
    plus: fields.Activations
    minus: fields.Activations


@dataclasses.dataclass(frozen=True)
class AnalysisConfig:
    __pydantic_config__ = fields.STRICT
    # Equivalence margin, in the compared metric's units: a number, or a
    # mapping {metric: number}; None: DEFAULT_MARGINS for that metric.
    margin: Annotated[Any, BeforeValidator(_margin), Field(description=_MARGIN_RULE)] = None
    alpha: fields.number(gt=0, lt=0.5) = 0.05  # family-wise error rate of each kind of claim
    power: fields.number(gt=0, lt=1) = 0.8  # what the seed plan aims for
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

    __pydantic_config__ = fields.STRICT
    parameter: fields.Text  # a numeric model.* or training.* key
    values: Optional[Annotated[tuple[fields.number(), ...], Field(min_length=1),
                               AfterValidator(fields.distinct)]] = None
    low: Optional[fields.number()] = None
    high: Optional[fields.number()] = None
    log: fields.Bool = False  # a range: log-uniform
    trials: Optional[fields.integer(ge=1, most=tuning_lib.MAX_TRIALS)] = None
    seeds: fields.integer(ge=1, most=tuning_lib.MAX_SEEDS) = 2  # per candidate, its own range
    select_by: Literal[tuple(tuning_lib.SELECT_BY)] = "val_loss"  # on validation


def _tuning_valid(tuning, info):
    if tuning is None:
        return None
    for at, message in tuning_lib.problems(
        tuning, {"model": composed().ModelConfig, "training": TrainingConfig}
    ):
        fields.fail(at=at, message=message)
    seeds = info.data.get("seeds")
    if isinstance(seeds, tuple) and max(seeds) >= tuning_lib.SEED_BASE:
        fields.fail(message=(
            f"seed {max(seeds)} lies in the tuning seeds' range (from "
            f"{tuning_lib.SEED_BASE}); expected the comparison's seeds below it, so "
            "that no comparison member repeats a tuning member's seed."))
    return tuning


@dataclasses.dataclass(frozen=True)
class StudyFactor:
    """`study_factor:` the setting a study's sweeps differ by and its
    reference level (issue 30 §4). An interaction is always (gain at the
    other level) - (gain at the reference level): its sign is declared here,
    never read from which sweep started first."""

    __pydantic_config__ = fields.STRICT
    setting: fields.Text  # a key of this config, dotted: model.layer_norm
    reference: Annotated[  # that key's reference value
        Union[fields.Bool, fields.number(), fields.Text],
        Field(description="the setting's reference value (true, false, a number or text)")]


def setting_value(config, setting):
    """The value at the dotted key `setting` of a config (a `Config`'s
    sections or its config.json as a dict); KeyError where there is none."""
    value = config
    for part in setting.split("."):
        if isinstance(value, dict):
            value = value[part]
        elif dataclasses.is_dataclass(value) and part in {f.name for f in dataclasses.fields(value)}:
            value = getattr(value, part)
        else:
            raise KeyError(setting)
    return value


def _factor_valid(factor, info):
    if factor is None:
        return None
    if info.data.get("study") is None:
        fields.fail(message="study_factor without a `study:` name; expected `study: NAME` "
                            "beside it (the factor is that study's).")
    try:
        value = setting_value(dict(info.data), factor.setting)
    except KeyError:
        fields.fail(at=("setting",), message=(
            f"{factor.setting!r} is no setting of this config; expected a dotted key "
            "such as model.layer_norm."))
    if isinstance(value, (dict, list, tuple)) or dataclasses.is_dataclass(value):
        fields.fail(at=("setting",), message=(
            f"{factor.setting!r} is a section or a list; expected one value (e.g. "
            "model.layer_norm)."))
    if value is not None and not _same_kind(value, factor.reference):
        fields.fail(at=("reference",), message=(
            f"{factor.reference!r} is not a value {factor.setting} can take (it holds "
            f"{value!r} here); expected one of its values, e.g. {value!r}."))
    return factor


def _same_kind(value, reference):
    kinds = (bool,) if isinstance(value, bool) else (
        (int, float) if isinstance(value, (int, float)) else (str,))
    return isinstance(reference, kinds) and not (
        isinstance(reference, bool) and not isinstance(value, bool))


# --- The composed schema: the sections as the registered tasks make them. ---


@dataclasses.dataclass(frozen=True)
class Composed:
    """The schema of the tasks registered when it was made (`composed`)."""

    DataConfig: type
    ModelConfig: type
    Config: type
    SCHEMA: pydantic.TypeAdapter


_COMPOSED = {}


def composed():
    """The schema of the registered tasks: made once per set of task
    settings (a test's toy task adds its own, and removing it brings
    back the classes made before)."""
    key = (catalog.task_names()[:1],  # the default `data.dataset`
           tuple((t.data_settings, t.model_settings) for t in catalog.tasks()))
    if key not in _COMPOSED:
        _COMPOSED[key] = _compose()
    return _COMPOSED[key]


def __getattr__(name):
    # `schema.DataConfig`, `ModelConfig`, `Config`, `SCHEMA`: the composed
    # ones (PEP 562), so that every reader sees the registered tasks' keys.
    if name in {f.name for f in dataclasses.fields(Composed)}:
        return getattr(composed(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _compose():
    DataConfig = _section("DataConfig", CommonData, "data", after=1)
    ModelConfig = _section("ModelConfig", CommonModel, "model", after=len(dataclasses.fields(CommonModel)))

    @dataclasses.dataclass(frozen=True)
    class Config:
        __pydantic_config__ = fields.STRICT
        experiment: Annotated[fields.Text, AfterValidator(fields.experiment_name)] = "kg-sweep"
        activations: fields.Activations = ("relu", "gelu")  # keras_gelu.names(), canonical spelling
        # What every other activation is compared with; when absent: "relu" if
        # it is among the activations, else the first activation.
        baseline: Annotated[fields.Activation, AfterValidator(fields.in_activations)] = "relu"
        # YAML: a list, a count n -> 0..n-1, or {start, step, max}: sequential
        # seeds (SequentialSeeds; kg_service.config.derived.with_seeds gives
        # the config of the seeds a look has trained).
        seeds: _SeedsSetting = (0, 1, 2, 3, 4)
        output_dir: fields.Folder = "kg-output"  # report, plots, resolved config
        # Sweeps tagged with one study name are analysed as one family by
        # `kg report --study NAME` (docs/studies.md); null: a sweep on its own.
        study: Optional[Annotated[fields.Str, AfterValidator(fields.study_name)]] = None
        data: Annotated[fields.Section[DataConfig], AfterValidator(fields.splits_filled)] = DataConfig()
        model: Annotated[fields.Section[ModelConfig], AfterValidator(fields.task_checks)] = ModelConfig()
        training: fields.Section[TrainingConfig] = TrainingConfig()
        tracking: fields.Section[TrackingConfig] = TrackingConfig()
        registry: Annotated[fields.Section[RegistryConfig], AfterValidator(fields.names_valid)] = RegistryConfig()
        export: fields.Section[ExportConfig] = ExportConfig()
        device: Annotated[fields.Section[DeviceConfig], AfterValidator(fields.devices_need_mirrored)] = DeviceConfig()
        execution: fields.Section[ExecutionConfig] = ExecutionConfig()  # local, or a Ray cluster (issue 33)
        analysis: Annotated[fields.Section[AnalysisConfig], AfterValidator(_contrasts_valid)] = (
            AnalysisConfig()
        )
        # The sources of variance a member's seed varies (issue 19): init (the
        # initial weights), order (the batch order), split (the train / val /
        # test split); each gets its own seed derived from the member's
        # (kg_service.config.derived.source_seeds). A source left out is the
        # same for every member.
        vary: fields.Sources = fields.VARIANCE_SOURCES
        # Each activation's own value of one setting, chosen on validation
        # before the comparison (docs/tuning.md); null: the configured value.
        tuning: Annotated[Optional[TuningConfig], AfterValidator(_tuning_valid)] = None
        # The setting a study's sweeps differ by and its reference level
        # (`StudyFactor`): `kg report --study` reads each sweep's level from its
        # config and orients every interaction by it.
        study_factor: Annotated[Optional[StudyFactor], AfterValidator(_factor_valid)] = None
        # What the sweep claims, declared before the run (config/claims.py, issue 32 §1).
        claims: Annotated[claims_lib.Claims, AfterValidator(claims_lib.claims_valid)] = ()
        # The YAML file it came from: set by load_config, not a key.
        source: SkipJsonSchema[Annotated[Optional[str], BeforeValidator(fields.not_a_key)]] = None

    Config.__qualname__ = "Config"
    return Composed(DataConfig, ModelConfig, Config, pydantic.TypeAdapter(Config))
