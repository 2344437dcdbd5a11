"""`kg plan --config` (issue 32 §1): a config's claims planned before any
run; without a stored pilot it says so and creates nothing; a bad claim
or no option is exit 2 with one paragraph. (With a pilot in a real store:
tests/service/cli/test_results.py.)"""

import pathlib

from click.testing import CliRunner

from kg_service.cli.main import main as kg

REPO = pathlib.Path(__file__).resolve().parents[3]


def plan(*args):
    return CliRunner().invoke(kg, ["plan", *args], catch_exceptions=False)


def test_each_paper_claim_is_planned_before_any_run_and_nothing_is_created(tmp_path):
    store = tmp_path / "none.db"
    result = plan("--config", str(REPO / "configs" / "glu-variants.yaml"),
                  "--tracking-uri", f"sqlite:///{store}")
    assert result.exit_code == 0, result.output
    assert f"no pilot: sqlite:///{store} does not exist yet" in result.output
    for name in ("gated-beat-plain", "geglu-beats-relu", "swiglu-beats-relu"):
        assert name in result.output
    assert "14 if sd = effect; 45 if sd = 2×effect" in result.output  # d 1 and 0.5, alpha 0.05/3
    assert not store.exists()


def test_a_bad_claim_is_exit_2_naming_the_file_line_and_key(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("activations: [relu, gelu]\nclaims:\n  - {name: a, pair: [gelu, relu], "
                    "metric: test_acc, direction: greater, smallest_effect: 0.003}\n")
    result = plan("--config", str(path))
    assert result.exit_code == 2
    assert f"{path}" in result.output and "claims[0].metric (line 3)" in result.output
    assert 'Did you mean "test_accuracy"' in result.output and "Traceback" not in result.output


def test_plan_needs_one_of_experiment_or_config():
    result = plan()
    assert result.exit_code == 2 and "expected one of --experiment NAME" in result.output


def test_the_dry_run_plan_names_the_declared_claims():
    from kg_service.cli.plan import describe_plan
    from kg_service.config.loading import load_config

    path = REPO / "configs" / "glu-variants.yaml"
    (row,) = [line for line in describe_plan(load_config(path), environ={}).splitlines()
              if line.strip().startswith("claims")]
    assert "3 declared (gated-beat-plain, geglu-beats-relu, swiglu-beats-relu)" in row
    assert f"kg plan --config {path}" in row
