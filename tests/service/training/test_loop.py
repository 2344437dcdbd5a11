"""kg_service.training.loop: how many steps one compiled call takes."""

from kg_service.training.loop import MULTI_STEP_MIN_STEPS
from kg_service.training.loop import steps_per_execution


def test_a_long_run_makes_one_call_per_epoch():
    # moons.yaml: 1,280 training rows / 32 = 40 steps, 100 epochs.
    assert steps_per_execution(40, 100) == 40
    assert steps_per_execution(MULTI_STEP_MIN_STEPS, 1) == MULTI_STEP_MIN_STEPS


def test_a_short_run_takes_one_step_per_call():
    # A --smoke run: 4 steps x 2 epochs (moons), 2 x 2 (a language model).
    assert steps_per_execution(4, 2) == 1
    assert steps_per_execution(2, 2) == 1
    assert steps_per_execution(MULTI_STEP_MIN_STEPS - 1, 1) == 1
