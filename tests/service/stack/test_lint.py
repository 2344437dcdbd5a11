"""docker/ through real linters (issue 21): hadolint on the Dockerfiles, and
compose.yaml against the compose-spec JSON schema that `docker compose
config` validates with (the copy check-jsonschema vendors, so it runs
offline), as written and with its variables filled from a generated .env.
Each linter is also shown a file it must refuse, so a linter that checks
nothing cannot pass.
"""

import importlib.resources
import json
import os
import subprocess

import jsonschema
import pytest

from tests.service import servers
from tests.service.stack import harness

HADOLINT = os.path.join(servers.VENV_BIN, "hadolint")


@pytest.fixture(scope="module")
def compose_schema():
    vendored = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    schema = json.loads(vendored.joinpath("compose-spec.json").read_text())
    assert schema["title"] == "Compose Specification"
    return jsonschema.validators.validator_for(schema)(schema)


def _hadolint(*args, stdin=None):
    return subprocess.run(
        [HADOLINT, "--no-color", "--failure-threshold", "info", *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("name", ["Dockerfile.train", "Dockerfile.serve"])
def test_hadolint_finds_nothing_in_the_dockerfiles(name):
    result = _hadolint(str(harness.DOCKER / name))
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr


def test_hadolint_refuses_what_the_dockerfiles_mended():
    # The two findings fixed in docker/ (issue 21): an install it reads as
    # an unpinned package, and a user name instead of a UID.
    result = _hadolint("-", stdin='FROM python:3.11.11-slim-bookworm\nENV PIP_NO_CACHE_DIR=1\n'
                       'RUN pip install ".[service]"\nUSER kg\n')  # fmt: skip
    assert result.returncode == 1
    assert "DL3013" in result.stdout and "DL3066" in result.stdout, result.stdout


def _interpolated(node, variables):
    if isinstance(node, dict):
        return {k: _interpolated(v, variables) for k, v in node.items()}
    if isinstance(node, list):
        return [_interpolated(v, variables) for v in node]
    return harness.interpolate(node, variables) if isinstance(node, str) else node


def test_compose_file_is_valid_compose_spec_as_written_and_interpolated(compose_schema):
    compose = harness.load_compose()
    errors = [e.message for e in compose_schema.iter_errors(compose)]
    assert errors == []
    filled = _interpolated(compose, harness.generate_dot_env())
    assert [e.message for e in compose_schema.iter_errors(filled)] == []


def test_compose_schema_refuses_a_misspelt_key(compose_schema):
    compose = harness.load_compose()
    compose["services"]["mlflow"]["healtcheck"] = compose["services"]["mlflow"].pop("healthcheck")
    (error,) = compose_schema.iter_errors(compose)
    assert "'healtcheck' was unexpected" in error.message

