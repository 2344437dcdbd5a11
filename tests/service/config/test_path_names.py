"""Config values that become file or folder names (issue 30 §11): the
experiment (the report folder `<output_dir>/<experiment>-<time>`), the
study (`kg-output/study-<study>-<time>`) and the registered model names
(`<export.dir>/<model name>/<version>`) are refused with the config, before
anything trains, when they would leave their folder or not fit in one
file name (255 bytes, with --smoke's `-smoke` and the time stamp)."""

import pytest

from kg_service.config.loading import load_config
from kg_service.errors import ServiceError
from tests.service import in_process
from tests.service.config.test_config import write

PLACES = ["../../x", "/tmp/elsewhere", "a/b", "..", "a\\b", "tab\there"]


def _refused(tmp_path, overrides):
    with pytest.raises(ServiceError) as info:
        load_config(write(tmp_path, "seeds: 2\n"), overrides)
    return str(info.value)


@pytest.mark.parametrize("name", PLACES)
def test_an_experiment_name_that_is_a_path_is_refused_with_the_config(tmp_path, name):
    message = _refused(tmp_path, [f"experiment={name!r}"])
    assert "experiment" in message and "names a folder" in message, message


def test_an_experiment_name_longer_than_a_file_name_holds_is_refused(tmp_path):
    message = _refused(tmp_path, ["experiment=" + "e" * 300])
    assert "at most 233 bytes" in message, message
    # The longest accepted name still makes its smoke report folder.
    config = load_config(write(tmp_path, "seeds: 2\n"), ["experiment=" + "é" * 116])
    from kg_service.config.derived import smoke

    folder = tmp_path / f"{smoke(config).experiment}-20260101-000000"
    folder.mkdir()


def test_a_study_name_too_long_for_its_report_folder_is_refused(tmp_path):
    message = _refused(tmp_path, ["study=" + "s" * 240])
    assert "study" in message and "bytes" in message, message


def test_a_model_name_too_long_for_its_export_folder_is_refused(tmp_path):
    message = _refused(tmp_path, ["registry.model_name={activation}-" + "m" * 250])
    assert "at most 249 characters" in message, message


def test_kg_train_refuses_a_path_as_experiment_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = write(tmp_path, "seeds: 2\n")
    result = in_process.kg_train("--config", config, "--set", "experiment=../../x")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "experiment" in result.stderr and not list(tmp_path.parent.parent.glob("x-*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.yaml"]
