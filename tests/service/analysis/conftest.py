import pytest

from kg_service.analysis.numbers import comparisons
from tests.service.analysis.members import sweep


@pytest.fixture
def two_way():
    relu = [0.950, 0.9425, 0.955, 0.9475, 0.960, 0.945, 0.9525, 0.950]
    gelu = [0.9575, 0.950, 0.9575, 0.955, 0.965, 0.9525, 0.955, 0.9660]
    return comparisons.summarize(sweep({"relu": relu, "gelu": gelu}), "relu")
