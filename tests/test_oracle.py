import numpy as np
import pytest

from eegrad import (
    Arms,
    ArmStatistics,
    GaussianOracle,
    MiniBatchOracle,
    Quadratic,
    QuadraticForm,
    RademacherOracle,
    UniformOracle,
)
from eegrad._random import RealizationStreams

ORACLES = [GaussianOracle, RademacherOracle, UniformOracle]


@pytest.mark.parametrize("oracle_cls", ORACLES)
@pytest.mark.parametrize("n", [1, 3, 4])
def test_noise_family_has_stated_covariance(oracle_cls, n):
    """Cov G(w, n) = σ_n² M(w), M = diag(∇F²): check each variance and the covariance."""
    arms = Arms(sigma2=[2.0, 1.2, 0.9, 1.5])
    oracle = oracle_cls(Quadratic(d=2), arms)
    R = 40_000
    w = np.tile([1.5, -0.7], (R, 1))
    at = oracle.at(w)
    g = at.sample(np.full(R, n - 1), RealizationStreams(np.random.default_rng(n), R))
    u = g - w
    # Mean 0: SE of the mean of u_i is its std / √R; 4 SE.
    assert np.all(np.abs(u.mean(axis=0)) < 4 * u.std(axis=0) / np.sqrt(R))
    # Variance σ_n² w_i²: SE of the mean of u_i² is std(u_i²)/√R; 4 SE.
    target = arms.sigma2[n - 1] * w[0] ** 2
    sq = u**2
    # (+ 1e-12 relative: a Rademacher mean of one draw has u_i² constant, SE 0.)
    tol = 4 * sq.std(axis=0) / np.sqrt(R) + 1e-12 * target
    assert np.all(np.abs(sq.mean(axis=0) - target) <= tol)
    # Uncorrelated components (M diagonal): E[u_1 u_2] = 0 within 4 SE.
    cross = u[:, 0] * u[:, 1]
    assert abs(cross.mean()) < 4 * cross.std() / np.sqrt(R)


def test_rademacher_mean_of_one_takes_two_values():
    arms = Arms(sigma2=[1.0, 0.5])
    oracle = RademacherOracle(Quadratic(d=1), arms)
    R = 1000
    g = oracle.at(np.ones((R, 1))).sample(
        np.zeros(R, dtype=np.int64), RealizationStreams(np.random.default_rng(0), R)
    )
    np.testing.assert_allclose(np.unique(g), [0.0, 2.0])  # 1 ± √(1/θ_1) with θ_1 = 1


@pytest.mark.parametrize("oracle_cls", ORACLES)
def test_expected_trace_of_sample_covariance(oracle_cls):
    """E[V_t(n)] = σ_n² S(w) (Section 3): V from γ pulls of one arm, averaged over R."""
    arms = Arms(sigma2=[3.0, 2.0, 2.5])
    obj = QuadraticForm(np.array([[2.0, 0.3], [0.3, 1.0]]), w_star=np.array([0.5, 0.0]))
    oracle = oracle_cls(obj, arms)
    R, gamma, n = 20_000, 6, 2
    w = np.tile([1.0, 2.0], (R, 1))
    at = oracle.at(w)
    streams = RealizationStreams(np.random.default_rng(4), R)
    stats = ArmStatistics(R, arms.N, 2)
    arm_idx = np.full(R, n - 1)
    for _ in range(gamma):
        stats.update(arm_idx, at.sample(arm_idx, streams))
    V = stats.variance_trace()[:, n - 1]
    S = at.S[0]
    # SE of the mean of V over R realizations: std(V)/√R; 4 SE.
    assert abs(V.mean() - arms.sigma2[n - 1] * S) < 4 * V.std() / np.sqrt(R)


def test_custom_noise_shape():
    arms = Arms(sigma2=[1.0])
    oracle = MiniBatchOracle(Quadratic(d=2), arms, M=lambda w, g: np.ones_like(w) * 4.0)
    at = oracle.at(np.zeros((3, 2)))
    np.testing.assert_allclose(at.S, 8.0)


def test_bad_noise_name():
    with pytest.raises(TypeError, match="'noise' parameter of MiniBatchOracle"):
        MiniBatchOracle(Quadratic(2), Arms([1.0]), noise="cauchy")
