"""The GPU presets of benchmarks/gpu_check.py (issue 20 §6): each is a set
of `--set` overrides that kg-train's own config loading accepts, and
docs/gpu.md shows each one as the script applies it. No Keras, no GPU."""

import importlib.util
import shlex
from pathlib import Path

import pytest
import yaml

from kg_service.config.loading import load_config
from kg_service.errors import ServiceError

ROOT = Path(__file__).resolve().parents[2]


def _gpu_check():
    spec = importlib.util.spec_from_file_location(
        "gpu_check", ROOT / "benchmarks" / "gpu_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_check = _gpu_check()


@pytest.mark.parametrize("name", list(gpu_check.PRESETS))
@pytest.mark.parametrize("tiny", [False, True], ids=["preset", "tiny"])
def test_every_gpu_preset_is_a_valid_set_override_of_its_config(name, tiny):
    preset = gpu_check.PRESETS[name]
    overrides = gpu_check.preset_overrides(name, tiny=tiny)
    config = load_config(ROOT / preset.config, overrides)
    assert preset.activation in config.activations
    if not tiny:
        assert config.device.xla is True
        for override in preset.overrides:
            key, value = override.split("=", 1)
            section, field = key.split(".")
            shown = getattr(getattr(config, section), field)
            shown = list(shown) if isinstance(shown, tuple) else shown
            assert shown == yaml.safe_load(value), override


def test_a_broken_preset_fails_as_kg_train_set_would():
    with pytest.raises(ServiceError, match="mixed_precison"):
        load_config(
            ROOT / "configs/moons.yaml", ("device.mixed_precison=mixed_bfloat16",)
        )


def test_docs_show_every_preset_as_the_script_applies_it():
    text = (ROOT / "docs" / "gpu.md").read_text()
    for name, preset in gpu_check.PRESETS.items():
        command = " ".join(
            f"--set {shlex.quote(o)}" for o in preset.overrides
        )
        assert f"kg-train --config {preset.config} {command}" in text, name


def test_require_gpu_exits_2_naming_the_devices_when_jax_has_no_gpu(capsys):
    with pytest.raises(SystemExit) as stop:
        gpu_check.require_gpu(["cpu", "cpu"])
    assert stop.value.code == 2
    message = capsys.readouterr().err
    assert "--require-gpu" in message and "devices: cpu" in message
    gpu_check.require_gpu(["cpu", "gpu"])  # returns: a GPU is there


def test_flops_per_token_counts_attention_beside_six_per_parameter():
    config = load_config(
        ROOT / "configs/revival.yaml", gpu_check.PRESETS["revival"].overrides
    )
    # Kaplan et al. 2020: 6 N + 6 n_layer n_ctx d_model per token.
    assert gpu_check.flops_per_item(config, 1000) == 6000 + 6 * 12 * 512 * 768
