"""`kg report --study` on a real sqlite MLflow store (issue 18 §6, §7).

Two tiny moons sweeps (the halves of a toy study, as Revival's two
halves) are trained in-process into one store; `kg report --study` reads
the study back from the store alone.
The numbers are checked against the members' runs as MLflow holds them,
read here with MLflow's own client, and against statsmodels and scipy.
"""

import json
import pathlib

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from kg_service.cli.report import report
from kg_service.errors import ServiceError
from kg_service.sweep import studies as sweep_studies
from kg_service.tracking import store as tracking_store
from kg_service.tracking import studies as tracking_studies
from tests.service import toy_store

HALF = """\
experiment: {experiment}
activations: [relu, gelu]
seeds: 3
output_dir: {out}
study: toy
# The later-started sweep is the reference: the interaction's sign comes from
# this declaration, not from the order the store returns (issue 30 §4).
study_factor: {{setting: experiment, reference: toy-narrow}}
data: {{dataset: moons, n_samples: 120}}
model: {{hidden_units: [{width}]}}
training: {{epochs: 1, batch_size: 32}}
tracking: {{uri: "{uri}"}}
registry: {{enabled: false}}
export: {{enabled: false}}
claims:
  - {{name: narrowing-hurts-gelu-less, interaction: [gelu, relu], reference: toy-narrow,
     metric: test_loss, direction: less, smallest_effect: 0.01}}
  - {{name: gelu-wins-wide, pair: [gelu, relu], level: toy-wide, metric: test_accuracy,
     direction: greater, smallest_effect: 0.003}}
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A sqlite store with study "toy": two tiny sweeps (about 10 s each)."""
    tmp = tmp_path_factory.mktemp("study")
    for experiment, width in (("toy-wide", 8), ("toy-narrow", 3)):
        toy_store.train(tmp, experiment, HALF, experiment=experiment, width=width)
    return tmp, toy_store.uri(tmp)


def kg_report(*args):
    return CliRunner().invoke(report, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def reported(store):
    tmp, uri = store
    result = kg_report("--study", "toy", "--tracking-uri", uri,
                       "--output-dir", str(tmp / "toy-report"))
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp / "toy-report" / "summary.json").read_text())
    return result.output, summary, tmp / "toy-report"


def member_values(uri, experiment, metric):
    """{activation: {seed: value}} as MLflow's client reads the member runs."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    out = {}
    for run in client.search_runs([exp.experiment_id], "tags.`kg.role` = 'member'"):
        tags = run.data.tags
        out.setdefault(tags["activation"], {})[int(tags["seed"])] = run.data.metrics[metric]
    return out


def test_the_study_is_its_two_tagged_sweeps_one_holm_family(reported):
    output, summary, folder = reported
    assert [s["name"] for s in summary["sweeps"]] == ["toy-wide", "toy-narrow"]
    # 2 sweeps x 2 metrics (accuracy, loss) x 1 comparison with the baseline.
    assert summary["family_size"] == 4
    raw = [c["paired"]["p_value"] for c in summary["comparisons"]]
    np.testing.assert_allclose([c["p_holm"] for c in summary["comparisons"]],
                               multipletests(raw, method="holm")[1], rtol=1e-9)
    assert {p.name for p in folder.iterdir()} == {
        "report.md", "summary.json", "report.html", "forest_test_accuracy.png",
        "forest_test_loss.png", "performance_profile.png"}
    assert 'Study "toy": 2 sweeps (toy-wide, toy-narrow)' in output
    # issue 34: the study's page, its verdicts first, its path printed.
    assert f"Page:       {(folder / 'report.html').resolve().as_uri()}" in output
    page = (folder / "report.html").read_text()
    assert page.index("<h2>Verdicts</h2>") < page.index("<h2>Comparisons (one family)</h2>")
    assert page.count("data:image/png;base64,") == 3  # a forest plot per metric, the profile


def test_the_study_page_is_logged_on_each_of_its_sweeps_runs(reported, store):
    """A study has no run of its own: its report.html (and report.md, the
    figures) go on every one of its sweeps' runs, under study/<name>/, and
    the printed MLflow address points at one of them (issue 34 §1)."""
    import mlflow

    output, _, folder = reported
    client = mlflow.MlflowClient(store[1])
    parents = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        f"tags.`kg.study` = 'toy' and tags.`kg.role` = '{tracking_store.SWEEP_ROLE}'")
    assert len(parents) == 2
    for run in parents:
        logged = {a.path for a in client.list_artifacts(run.info.run_id, "study/toy")}
        assert {"study/toy/report.html", "study/toy/report.md",
                "study/toy/performance_profile.png"} <= logged
        there = client.download_artifacts(run.info.run_id, "study/toy/report.html",
                                          str(folder.parent / run.info.run_id))
        assert pathlib.Path(there).read_text() == (folder / "report.html").read_text()
    shown = [line for line in output.splitlines() if line.startswith("In MLflow:")]
    assert len(shown) == 1 and "/artifactPath/study/toy/report.html" in shown[0]
    assert any(f"/runs/{run.info.run_id}/" in shown[0] for run in parents)


def test_study_numbers_are_the_member_runs_in_the_store(reported, store):
    _, summary, _ = reported
    _, uri = store
    diffs = {}
    for experiment in ("toy-wide", "toy-narrow"):
        v = member_values(uri, experiment, "test_accuracy")
        diffs[experiment] = [v["gelu"][s] - v["relu"][s] for s in range(3)]
        (c,) = [c for c in summary["comparisons"]
                if c["sweep"] == experiment and c["metric"] == "test_accuracy"]
        assert c["paired"]["mean_diff"] == pytest.approx(np.mean(diffs[experiment]))
    (i,) = [i for i in summary["interactions"] if i["metric"] == "test_accuracy"]
    assert (i["first"], i["second"]) == ("toy-narrow", "toy-wide")
    assert i["estimate"] == pytest.approx(
        np.mean(diffs["toy-wide"]) - np.mean(diffs["toy-narrow"]))
    if np.std(diffs["toy-wide"]) + np.std(diffs["toy-narrow"]) > 0:
        ref = st.ttest_ind(diffs["toy-wide"], diffs["toy-narrow"], equal_var=False)
        assert i["p_value"] == pytest.approx(ref.pvalue, rel=1e-9)


def test_the_studys_claims_are_labelled_from_the_stored_members(reported, store):
    """Issue 32 §1: a study's declared claims in its report, each number
    from the member runs as MLflow holds them; the interaction measured
    from the declared reference level."""
    output, _, folder = reported
    tmp, uri = store
    ref, other = (member_values(uri, e, "test_loss") for e in ("toy-narrow", "toy-wide"))
    change = np.mean([(other["gelu"][s] - other["relu"][s]) - (ref["gelu"][s] - ref["relu"][s])
                      for s in range(3)])
    text = (folder / "report.md").read_text()
    row = next(line for line in text.splitlines()
               if line.startswith("| narrowing-hurts-gelu-less |"))
    assert [c.strip() for c in row.split("|")[1:-1]][5].startswith(f"{change:+.4g}")
    assert "| gelu-wins-wide | gelu − relu at level 'toy-wide' |" in text
    assert "narrowing-hurts-gelu-less: " in output and "gelu-wins-wide: " in output


def test_every_activation_is_aggregated_over_both_sweeps(reported):
    _, summary, _ = reported
    rows = summary["aggregate"]["activations"]
    assert {r["activation"] for r in rows} == {"relu", "gelu"}
    assert all(r["tasks"] == ["toy-wide", "toy-narrow"] and r["runs"] == 6 for r in rows)
    assert all(r["ci_low"] <= r["iqm"] <= r["ci_high"] for r in rows)
    assert "min-max over every run" in summary["aggregate"]["note"]


def test_an_unknown_study_exits_2_naming_the_studies_there_are(store):
    _, uri = store
    result = CliRunner().invoke(report, ["--study", "tyo", "--tracking-uri", uri])
    assert result.exit_code == 2
    assert "--study 'tyo'" in result.output and "studies there: 'toy'" in result.output
    assert "Did you mean 'toy'?" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [[], ["--study", "toy", "--experiment", "x"],
                                  ["--study", "toy", "--register"]])
def test_report_needs_exactly_one_of_experiment_or_study(args):
    result = CliRunner().invoke(report, args)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--study" in result.output


def test_a_store_that_cannot_be_used_exits_2_in_one_paragraph(tmp_path):
    result = CliRunner().invoke(report, ["--study", "toy", "--tracking-uri", "bogus://x"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "cannot use the MLflow tracking store 'bogus://x'" in result.output


# --- The declared reference level, without a store (issue 30 §4). -----------


def _stored(experiment, layer_norm, relu_gap, factor=True):
    config = {"study": "revival", "model": {"layer_norm": layer_norm}}
    if factor:
        config["study_factor"] = {"setting": "model.layer_norm", "reference": True}
    gelu = {s: 2.5 + 0.01 * s for s in range(3)}
    relu = {s: v + relu_gap + 0.002 * s * s for s, v in gelu.items()}
    return tracking_studies.StoredSweep(
        experiment=experiment, run_id=experiment, baseline="gelu", metric="test_loss",
        higher_is_better=False, values={"test_loss": {"gelu": gelu, "relu": relu}},
        failed={}, config=config)


def test_stored_halves_give_one_signed_interaction_in_either_start_order():
    ln, no = _stored("ln", True, 0.01), _stored("no-ln", False, -0.05)
    gaps = {h.experiment: [h.values["test_loss"]["relu"][s] - h.values["test_loss"]["gelu"][s]
                           for s in range(3)] for h in (ln, no)}
    ref = st.ttest_ind(gaps["no-ln"], gaps["ln"], equal_var=False)
    for order in ([ln, no], [no, ln]):
        (i,) = sweep_studies.analyse_stored("revival", order).interactions
        assert (i.first, i.second, i.first_level, i.second_level) == ("ln", "no-ln", True, False)
        assert i.test.estimate == pytest.approx(np.mean(gaps["no-ln"]) - np.mean(gaps["ln"]))
        assert i.test.p_value == pytest.approx(ref.pvalue, rel=1e-10)


def test_a_study_without_a_declared_reference_exits_2_instead_of_guessing():
    halves = [_stored("ln", True, 0.01, factor=False), _stored("no-ln", False, -0.05, factor=False)]
    with pytest.raises(ServiceError, match="declare no reference level"):
        sweep_studies.analyse_stored("revival", halves)
    mixed = [_stored("ln", True, 0.01), _stored("no-ln", False, -0.05, factor=False)]
    with pytest.raises(ServiceError, match="different `study_factor:`s"):
        sweep_studies.analyse_stored("revival", mixed)


def test_the_mixed_model_is_statsmodels_mixedlm_of_the_members_beside_the_iqm(reported, store):
    """Issue 32 §3: `kg report --study` fits one mixed model of the compared
    metric across the sweeps (no contrast declared: gelu vs the baseline
    relu), printed beside the IQM (kept); its estimate is statsmodels'
    MixedLM of the member runs as MLflow holds them."""
    import pandas as pd
    import statsmodels.formula.api as smf

    from kg_service.analysis.numbers import mixed

    output, summary, folder = reported
    _, uri = store
    assert "Across tasks (IQM of normalized scores):" in output
    assert "One model across tasks (linear mixed model):" in output
    assert "max-t (multivariate t, df 1 = (activations - 1)(tasks - 1))" in output
    fitted = summary["mixed_model"]
    (c,) = fitted["contrasts"]
    assert c["name"] == "gelu-vs-relu" and c["low"] <= c["estimate"] <= c["high"]
    rows = [(v, a, e, str(s)) for e in ("toy-wide", "toy-narrow")
            for a, by_seed in member_values(uri, e, "test_accuracy").items()
            for s, v in by_seed.items()]
    frame = pd.DataFrame(rows, columns=["value", "activation", "task", "seed"])
    formula, re_formula, vc = mixed.model_formula()
    direct = smf.mixedlm(formula, frame, groups="task", re_formula=re_formula,
                         vc_formula=vc).fit(reml=True)
    beta = direct.fe_params
    expected = beta["C(activation)[gelu]"] - beta["C(activation)[relu]"]
    assert c["estimate"] == pytest.approx(expected, abs=1e-6)
    assert "## One model across tasks" in (folder / "report.md").read_text()
