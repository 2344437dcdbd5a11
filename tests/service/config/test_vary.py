"""`vary: [init, order, split]` (issue 19): each source of variance its own
seed, derived from the member's; a source left out the same for every
member. Pure: no Keras, no training (the members' use of these seeds is
pinned in tests/service/tasks/test_train.py, against models trained alone).
"""

import itertools

import numpy as np
import pytest
from click.testing import CliRunner

from kg_service.cli import train as cli
from kg_service.cli.plan import describe_plan
from kg_service.config.derived import member_source_seeds
from kg_service.config.derived import source_seeds
from kg_service.config.fields import VARIANCE_SOURCES
from kg_service.config.loading import config_to_dict
from kg_service.config.loading import load_config

SEEDS = range(50)


def test_every_source_gets_its_own_seed_and_every_member_its_own():
    table = np.array([[source_seeds(s)[k] for k in VARIANCE_SOURCES] for s in SEEDS])
    # No two sources of one member share a seed, and no two members share
    # the seed of a source: 150 distinct 32-bit words.
    assert len(np.unique(table)) == table.size
    # Independent streams: the init and order seeds of a member are not
    # one function of the other (rank correlation over 50 members near 0).
    from scipy import stats

    for a, b in itertools.combinations(range(3), 2):
        assert abs(stats.spearmanr(table[:, a], table[:, b]).statistic) < 0.4


@pytest.mark.parametrize(
    "vary", [("init",), ("order",), ("split",), ("init", "order"), ("order", "split")]
)
def test_a_source_left_out_is_the_same_for_every_member(vary):
    seeds = [source_seeds(s, vary, data_seed=5) for s in SEEDS]
    for source in VARIANCE_SOURCES:
        values = {s[source] for s in seeds}
        assert len(values) == (len(SEEDS) if source in vary else 1), source
    # A varied source does not depend on which other sources vary.
    full = [source_seeds(s, VARIANCE_SOURCES, data_seed=5) for s in SEEDS]
    for source in vary:
        assert [s[source] for s in seeds] == [f[source] for f in full]


def test_a_fixed_split_is_the_data_seed_and_a_varied_one_moves_with_it():
    assert source_seeds(3, ("init", "order"), data_seed=7)["split"] == 7
    assert source_seeds(3, data_seed=7)["split"] != source_seeds(3, data_seed=8)["split"]


def test_the_config_default_varies_all_three_and_round_trips(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("seeds: 3\n")
    config = load_config(path)
    assert config.vary == ("init", "order", "split")
    path.write_text("seeds: 3\nvary: [split, init]\n")
    config = load_config(path)
    assert member_source_seeds(config, 1) == source_seeds(1, ("split", "init"), 0)
    again = tmp_path / "again.yaml"
    import yaml

    again.write_text(yaml.safe_dump(config_to_dict(config)))
    assert load_config(again).vary == ("split", "init")
    assert "varies       split, init: each from its own seed" in describe_plan(config)
    assert "fixed for every member: order" in describe_plan(config)


@pytest.mark.parametrize(
    "text, words",
    [
        ("vary: [init, ordr]\n", ['vary[1] (line 1): got "ordr"', 'Did you mean "order"?']),
        ("vary: []\n", ["vary (line 1)", "expected a non-empty list"]),
        ("vary: split\n", ["vary (line 1)", "any of init, order, split"]),
        ("vary: [init, init]\n", ['vary[1]', '"init" appears twice']),
    ],
)
def test_a_bad_vary_is_one_clear_paragraph_and_exit_2(tmp_path, text, words):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = CliRunner().invoke(cli.main, ["--config", str(path), "--dry-run"],
                                prog_name="kg-train")
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.stderr.startswith("kg-train: error: config file ")
    for word in words:
        assert word in result.stderr, result.stderr
