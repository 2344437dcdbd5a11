"""One column-name rule for both servers (issue 31): kg serve's scoring app
(`serving.columns`) and the registered classifier's pyfunc, which
`mlflow models serve` runs without kg_service, match names with the same
`named_columns` module; the pyfunc carries it as an MLflow code path.
A bare SavedModel is wrapped by the pyfunc file its task declares."""

import pathlib

import pytest

from kg_service import named_columns
from kg_service.serving import columns
from kg_service.serving.request_checks import BadRequest
from kg_service.tasks import base as tasks
from kg_service.tasks.classification import pyfunc
from kg_service.tasks.classification import serving

NAMES = ("x", "y")


def test_the_served_classifier_carries_the_rule_file_that_its_pyfunc_imports():
    assert serving.SERVING.code_paths == (named_columns.__file__,)
    assert pyfunc.named_columns.order is named_columns.order
    assert "import kg_service" not in pathlib.Path(named_columns.__file__).read_text()


@pytest.mark.parametrize(
    "given, reason",
    [
        (["y", "x"], None),
        (["x", "yy"], "unknown{} 'yy' (did you mean 'y'?); this model's features are 'x', 'y'."),
        (["x", "x", "y"], "'x' named twice; this model's features are 'x', 'y'."),
        (["y"], "'x' missing; this model's features are 'x', 'y'."),
    ],
)
def test_both_servers_match_names_alike_and_say_the_same_reason(given, reason):
    if reason is None:
        assert columns.order(given, NAMES, "where") == pyfunc.order(given, NAMES) == [1, 0]
        return
    with pytest.raises(BadRequest) as kg_serve:
        columns.order(given, NAMES, "where")
    with pytest.raises(pyfunc.MlflowException) as mlflow_serve:
        pyfunc.order(given, NAMES)
    assert str(kg_serve.value) == "where: " + reason.format("")
    assert mlflow_serve.value.message == "bad model input: " + reason.format(" column")


def test_a_number_is_what_json_or_csv_may_write():
    assert [named_columns.number(t) for t in (" 1.5", "1e3", "-0")] == [1.5, 1000.0, 0.0]
    assert [named_columns.number(t) for t in ("", " ", "1_000", "x")] == [None] * 4


def test_a_bare_savedmodel_is_wrapped_by_the_file_its_task_declares():
    code = pathlib.Path(tasks.saved_model_code())
    assert code.is_file() and code.name == "saved_model_code.py"
    assert "SavedModelModel()" in code.read_text()
