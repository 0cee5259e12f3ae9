"""The one-realization estimator for users' own loops."""

import numpy as np
import pytest

from eegrad import (
    KLLCB,
    Arms,
    EEGrad,
    FixedArm,
    GaussianOracle,
    GradientEstimator,
    NonFiniteGradientError,
    OptimalArm,
    ProtocolError,
    Quadratic,
    default_selector,
    estimate_gradient,
)

ARMS = Arms([50.0, 26.0, 16.7])


@pytest.mark.parametrize(
    "make",
    [lambda: EEGrad(beta=50.0, P=1.25, c=1.0), default_selector, KLLCB, lambda: FixedArm(2)],
)
def test_estimator_equals_simulator_r1_path(make):
    """Same seed, same gradients: the estimator picks what the simulator picks for R = 1."""
    oracle = GaussianOracle(Quadratic(2), ARMS)
    w = np.array([[1.0, -0.5]])
    T = 60
    sim = estimate_gradient(oracle, make(), w, T, rng=4, engine="numpy")
    est = GradientEstimator(make(), ARMS, T, dim=2, rng=4)
    at = oracle.at(w)
    for _ in range(T):
        n = est.ask()
        est.tell(at.sample(np.array([n - 1]), est.streams)[0])
    if isinstance(make(), FixedArm):
        assert est.counts.tolist() == [0, T, 0]  # the simulator draws a fixed arm's mean at once
        return
    np.testing.assert_array_equal(est.counts, sim.counts[0])
    np.testing.assert_allclose(est.result(), sim.gradient[0], rtol=1e-12)


def test_result_is_the_mean_and_reset_starts_over():
    est = GradientEstimator(default_selector(), 3, T=7, dim=4)
    told = []
    rng = np.random.default_rng(0)
    while not est.done:
        n = est.ask()
        assert 1 <= n <= 3
        g = rng.standard_normal(4) * n
        told.append(g)
        est.tell(g)
    np.testing.assert_allclose(est.result(), np.mean(told, axis=0))
    assert est.counts.sum() == 7
    V = est.variance_trace()
    assert V.shape == (3,)
    est.reset()
    assert est.t == 0
    assert est.counts.sum() == 0


def test_misuse_errors():
    est = GradientEstimator(default_selector(), 2, T=4, dim=3)
    with pytest.raises(ProtocolError, match="tell\\(\\) without a pending ask"):
        est.tell(np.zeros(3))
    est.ask()
    with pytest.raises(ProtocolError, match="ask\\(\\) called twice"):
        est.ask()
    with pytest.raises(ValueError, match="'gradient'.*length dim = 3.*round 1"):
        est.tell(np.zeros(4))
    with pytest.raises(NonFiniteGradientError, match="round 1 for n = 1"):
        est.tell(np.array([0.0, np.nan, 1.0]))
    est.tell(np.zeros(3))
    with pytest.raises(ProtocolError, match="after 1 of T = 4"):
        est.result()
    for _ in range(3):
        est.ask()
        est.tell(np.ones(3))
    with pytest.raises(ProtocolError, match="all T = 4 rounds are told"):
        est.ask()


def test_constructor_errors():
    with pytest.raises(
        ValueError, match="'T' parameter of GradientEstimator must be an integer >= 6"
    ):
        GradientEstimator(default_selector(), 3, T=5, dim=2)
    with pytest.raises(ValueError, match="'oracle'"):
        GradientEstimator(EEGrad(), 3, T=10, dim=2)  # β, P = "oracle" need a simulator
    with pytest.raises(ValueError, match="truth"):
        GradientEstimator(OptimalArm(), 3, T=10, dim=2)
    with pytest.raises(TypeError, match="'selector'"):
        GradientEstimator("thompson", 3, T=10, dim=2)
