"""Shared fixtures: the paper's example (Section 6)."""

import numpy as np
import pytest

from eegrad import Arms, GaussianOracle, Quadratic
from eegrad.config import preset_path

#: σ_n² of the paper's Section 6 at T = 50; other T scale them by T/50.
PAPER_SIGMA2_T50 = np.array([50.0, 26.0, 16.7])


def paper_arms(T: int) -> Arms:
    return Arms(sigma2=PAPER_SIGMA2_T50 * T / 50)


@pytest.fixture
def paper_oracle():
    """The paper's oracle at T = 50."""
    return GaussianOracle(Quadratic(d=2), paper_arms(50))


def preset_copy(tmp_path, name: str, replace: dict[str, str]):
    """A shipped preset written to ``tmp_path`` with top-level lines ``key = ...`` replaced."""
    lines = [ln for ln in preset_path(name).read_text().splitlines()
             if not any(ln.startswith(f"{key} =") for key in replace)]  # fmt: skip
    path = tmp_path / f"{name}.toml"
    path.write_text("".join(f"{k} = {v}\n" for k, v in replace.items()) + "\n".join(lines))
    return path
