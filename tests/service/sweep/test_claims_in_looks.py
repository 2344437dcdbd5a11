"""The compare stage of a sequential sweep labels its claims from its
looks (issue 32 §2), although the config it concludes with lists the
seeds it used: kg-train's last lines, report.md and `kg report` (which
replays the looks into the same stage) all read `Compared.claims`.

No training: fixed members, the moons task's metrics, no figures."""

from kg_service.analysis.numbers import claims
from kg_service.analysis.numbers import sequential
from kg_service.config.claims import ClaimConfig
from kg_service.config.schema import Config
from kg_service.config.schema import ExportConfig
from kg_service.sweep import stages
from tests.service.analysis.members import sweep
from tests.service.sweep import stage_fakes


def test_a_sequential_sweeps_compare_stage_labels_its_claims_from_its_looks(tmp_path):
    results = sweep({"relu": [0.90, 0.91, 0.92, 0.90], "gelu": [0.93, 0.95, 0.95, 0.94]})
    config = Config(activations=("relu", "gelu"), seeds=(0, 1, 2, 3),
                    export=ExportConfig(enabled=False), claims=(
                        ClaimConfig(name="gelu-wins", pair=("gelu", "relu"),
                                    metric="test_accuracy", direction="greater",
                                    smallest_effect=0.003),))
    values = {(r.activation, r.seed): r.test_accuracy for r in results}
    looks = sequential.compare_looks(values, "relu", (4,), 40)

    compared = stages.compare(config, stage_fakes.pre(tmp_path, config),
                              stage_fakes.trained(results), looks)

    (lab,) = compared.claims
    assert lab.sequential and lab.label == claims.NOT_TESTED  # fixed Holm: reproduced
    part = (tmp_path / "report.md").read_text().split("## Claims")[1].split("\n## ")[0]
    assert "- gelu-wins: not tested:" in part and "(sequential: " in part
