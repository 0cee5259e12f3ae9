"""Shared fixtures: the paper's example (Section 6)."""

import numpy as np
import pytest

from eegrad import Arms, GaussianOracle, Quadratic

#: σ_n² of the paper's Section 6 at T = 50; other T scale them by T/50.
PAPER_SIGMA2_T50 = np.array([50.0, 26.0, 16.7])


def paper_arms(T: int) -> Arms:
    return Arms(sigma2=PAPER_SIGMA2_T50 * T / 50)


@pytest.fixture
def paper_oracle():
    """The paper's oracle at T = 50."""
    return GaussianOracle(Quadratic(d=2), paper_arms(50))
