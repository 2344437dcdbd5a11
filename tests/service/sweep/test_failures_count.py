"""A diverged member is a result (issue 18): the compare stage hands every
member to the statistics, which count the failures per activation, test
them against the baseline's and pair only the members that trained.

No training: the stage gets fixed members (two of gelu's diverged) and the
moons task's metrics; the report it writes is read back.
"""

import math

from scipy import stats as st

from kg_service.config.schema import AnalysisConfig
from kg_service.config.schema import Config
from kg_service.config.schema import ExportConfig
from kg_service.results import MemberResult
from kg_service.sweep import stages
from tests.service.analysis.members import member
from tests.service.sweep import stage_fakes


def _diverged(activation, seed):
    h = {"loss": [math.nan], "accuracy": [0.5], "val_loss": [math.nan], "val_accuracy": [0.5]}
    return MemberResult(activation, seed, h, math.nan, math.nan, None, failure="loss nan",
                        failed_epoch=1)


def test_compare_counts_diverged_members_and_pairs_only_the_rest(tmp_path):
    relu = [0.950, 0.9425, 0.955, 0.9475, 0.960, 0.945]
    gelu = [0.9575, 0.950, 0.9575, 0.955]
    results = ([member("relu", s, a) for s, a in enumerate(relu)]
               + [member("gelu", s, a) for s, a in enumerate(gelu)]
               + [_diverged("gelu", 4), _diverged("gelu", 5)])
    config = Config(activations=("relu", "gelu"), seeds=tuple(range(6)),
                    export=ExportConfig(enabled=False),
                    analysis=AnalysisConfig(margin=0.004))
    compared = stages.compare(config, stage_fakes.pre(tmp_path, config),
                              stage_fakes.trained(results))

    s = compared.summary
    assert [m.seed for m in compared.failed] == [4, 5]
    assert (s.activation("gelu").failed, s.activation("gelu").attempted) == (2, 6)
    assert s.comparison("gelu").paired.n == 4 and s.margin == 0.004
    assert s.comparison("gelu").failures_p == st.fisher_exact([[2, 4], [0, 6]]).pvalue
    report = (tmp_path / "report.md").read_text()
    assert "| failed |" in report.splitlines()[report.splitlines().index("## Results") + 4]
    assert "gelu 2/6 diverged, relu 0/6" in report
    assert "4 pairs (2 diverged members left out)" in report


def test_an_activation_whose_every_member_diverged_stays_in_the_record():
    from kg_service.analysis.numbers import comparisons
    from kg_service.analysis.words import verdict_wording
    from kg_service.analysis.words import wording

    results = ([member("relu", s, 0.95 + 0.001 * s) for s in range(5)]
               + [_diverged("swiglu", s) for s in range(5)])
    s = comparisons.summarize(results, "relu")
    assert s.failed_only["swiglu"] == (5, st.fisher_exact([[5, 0], [0, 5]]).pvalue)
    (note,) = wording.summary_notes(s)
    assert note.startswith("swiglu: all 5 members diverged") and "5/5 vs relu 0/5" in note
    assert verdict_wording.summary_json(s)["failed_only"]["swiglu"]["failed"] == 5
