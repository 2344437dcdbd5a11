"""The sweep configuration: typed objects, validated once at the edge.

Everything after `load_config` trusts these objects.
"""

import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class DataConfig:
    dataset: str = "moons"  # moons | circles | digits (scikit-learn, no downloads)
    n_samples: int = 2000  # moons/circles only; digits has 1797
    noise: float = 0.2  # moons/circles only
    test_fraction: float = 0.2  # held out, used only for the final evaluation
    validation_fraction: float = 0.2  # of what remains after the test split
    seed: int = 0  # data generation and split; separate from model seeds
    standardize: bool = True  # z-score features using training statistics


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    hidden_units: tuple = (64, 64)  # one activated projection per width
    dropout: float = 0.0
    block: str = "dense"  # dense | feedforward
    # block: feedforward -> Dense(d_model) stem, then one residual
    # keras_gelu.FeedForward(hidden_dim=w, output_dim=d_model) per width w.
    d_model: int = 32
    match_params: bool = False  # gated FFNs at the parameters of plain ones


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    optimizer: str = "adam"  # adam | adamw | sgd | rmsprop
    learning_rate: float = 0.001
    epochs: int = 100
    batch_size: int = 32
    # Convergence speed: first epoch whose validation accuracy reaches this.
    convergence_threshold: float = 0.95


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    # None: MLFLOW_TRACKING_URI, else MLflow's default sqlite:///mlflow.db.
    uri: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class RegistryConfig:
    enabled: bool = True
    # Placeholders: {experiment}, {dataset}, {activation}.
    model_name: str = "{dataset}-{activation}"
    alias: str = "champion"


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    enabled: bool = True
    dir: str = "exports"  # TF Serving layout: <dir>/<model_name>/<version>/
    tolerance: float = 1e-5  # SavedModel vs in-memory model, max abs diff


@dataclasses.dataclass(frozen=True)
class DeviceConfig:
    type: str = "auto"  # auto | cpu | gpu
    mixed_precision: Optional[str] = None  # None | mixed_float16 | mixed_bfloat16
    xla: bool = False  # jit_compile the training step


@dataclasses.dataclass(frozen=True)
class Config:
    experiment: str = "kg-sweep"
    activations: tuple = ("relu", "gelu")  # names from keras_gelu.names()
    baseline: str = "relu"  # what every other activation is compared with
    seeds: tuple = (0, 1, 2, 3, 4)  # YAML: a list, or a count n -> 0..n-1
    output_dir: str = "kg-output"  # report, plots, resolved config
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    training: TrainingConfig = TrainingConfig()
    tracking: TrackingConfig = TrackingConfig()
    registry: RegistryConfig = RegistryConfig()
    export: ExportConfig = ExportConfig()
    device: DeviceConfig = DeviceConfig()
    source: Optional[str] = None  # the YAML file it came from (not a key)
