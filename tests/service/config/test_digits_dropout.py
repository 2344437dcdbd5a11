"""configs/digits-dropout.yaml is the GELU paper's second digits run (issue
19, item 5): configs/digits.yaml with dropout 0.5, under its own names.
Its `--smoke` run is tests/service/test_smoke_configs.py's (every config)."""

import dataclasses
import pathlib

from kg_service.config.loading import load_config

CONFIGS = pathlib.Path(__file__).resolve().parents[3] / "configs"


def test_digits_dropout_is_digits_at_dropout_half_under_its_own_names():
    plain = load_config(CONFIGS / "digits.yaml")
    dropout = load_config(CONFIGS / "digits-dropout.yaml")
    assert (plain.model.dropout, dropout.model.dropout) == (0.0, 0.5)
    assert dropout.experiment != plain.experiment
    assert dropout.registry.model_name != plain.registry.model_name
    assert dropout.output_dir != plain.output_dir
    assert dropout.study != plain.study
    same = dataclasses.replace(
        dropout, model=plain.model, experiment=plain.experiment, output_dir=plain.output_dir,
        registry=plain.registry, source=plain.source, study=plain.study)
    assert same == plain
