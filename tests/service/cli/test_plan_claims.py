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


def test_revivals_change_and_constant_claims_are_planned_like_the_others(tmp_path):
    """Issue 32 §1, §4: GELU's overload (a level change) and the learnable
    slope (against its start) get their seeds before a run; from a pilot,
    the sd of their own per-seed numbers (statsmodels' TTestPower)."""
    import math

    import numpy as np
    from statsmodels.stats.power import TTestPower

    from kg_service.analysis.numbers import claim_data
    from kg_service.config.loading import load_config
    from kg_service.sweep import claims as sweep_claims

    path = REPO / "configs" / "revival.yaml"
    result = plan("--config", str(path), "--tracking-uri", f"sqlite:///{tmp_path / 'n.db'}")
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.output.splitlines()
            if line.startswith(("gelu-entropy-overload", "leaky-slope-falls"))}
    assert "gelu at the other level − at the reference level True" in rows[
        "gelu-entropy-overload"]
    assert "learnable_leaky_relu − 0.01 at level False" in rows["leaky-slope-falls"]
    assert all("if sd = effect" in row and "0.0125" in row for row in rows.values())
    entropy = {True: [0.60, 0.66, 0.58], False: [0.95, 0.97, 0.99]}
    slopes = [0.004, 0.009, 0.002]
    by_level = {lv: {"entropy_norm.block1": {"gelu": dict(enumerate(v))},
                     "leaky_slope_abs.block1": {"learnable_leaky_relu": dict(enumerate(slopes))}}
                for lv, v in entropy.items()}
    claims = claim_data.declared(load_config(path))
    plans = {p.claim.name: p for p in sweep_claims.plans_from(
        claims, sweep_claims.Pilot(by_level, "constructed"), 0.8)}
    for name, diffs, effect in (
            ("gelu-entropy-overload", np.subtract(entropy[False], entropy[True]), 0.02),
            ("leaky-slope-falls", np.subtract(slopes, 0.01), 0.005)):
        sd = float(np.std(diffs, ddof=1))
        assert plans[name].sd == sd and plans[name].pilot_seeds == 3
        solved = TTestPower().solve_power(effect_size=effect / sd, alpha=0.05 / 4, power=0.8)
        assert abs(plans[name].needed - math.ceil(solved)) <= 1
