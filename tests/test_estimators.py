"""The low-variance estimate of the final gap on the paper's quadratic (eegrad.estimators)."""

import numpy as np
import pytest

from eegrad import Arms, FixedArm, GaussianOracle, MemoryKLLCB, Quadratic, RoundRobin, run_sgd
from eegrad.estimators import (
    arm_sum,
    control_variate_mean,
    quadratic_final_gaps,
    standardised_noise,
)
from eegrad.theory import fixed_oracle_gaps

ETA, K = 0.85, 5


def paper(T):
    return GaussianOracle(Quadratic(2), Arms(np.array([50.0, 26.0, 16.7]) * T / 50))


def test_standardised_noise_rebuilds_the_path():
    """w_{k+1} = w_k((1 − η) − η√v_k u_k) with the u the function returns (exact algebra)."""
    oracle = paper(20)
    w0 = np.random.default_rng(0).standard_normal((50, 2))
    out = run_sgd(oracle, MemoryKLLCB(), w0, K, 20, ETA, rng=1)
    u = standardised_noise(out.w, out.counts, oracle.arms.sigma2, 20, ETA)
    v = out.counts @ oracle.arms.sigma2 / 20**2
    rebuilt = out.w[:, :-1] * ((1 - ETA) - ETA * np.sqrt(v)[..., None] * u)
    np.testing.assert_allclose(rebuilt, out.w[:, 1:], rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("selector", [FixedArm(2), RoundRobin()])
def test_control_variate_matches_the_closed_form(selector):
    """Non-adaptive rules have a closed-form final gap: E F(w_1) Π_k((1 − η)² + η² v_k). The
    control-variate estimate must fall within 4 of its (jackknife) standard errors of it — a
    sharp check, the SE being a few % of the estimate where the direct one is ~25 %."""
    T, R = 50, 4000
    oracle = paper(T)
    s2 = oracle.arms.sigma2
    w0 = np.random.default_rng(2).standard_normal((R, 2))
    out = run_sgd(oracle, selector, w0, K, T, ETA, rng=3)
    X, Y = quadratic_final_gaps(out.w, out.counts, s2, T, ETA, s2.min())
    optimal = fixed_oracle_gaps(1.0, ETA, s2.min(), T, K)[-1]
    est, se, beta = control_variate_mean(X, Y, optimal)
    v = out.counts[0] @ s2 / T**2  # the same every run for these rules
    exact = np.prod((1 - ETA) ** 2 + ETA**2 * v)  # E F(w_1) = d/2 = 1
    assert abs(est - exact) < 4 * se
    assert se < 0.1 * exact
    assert beta > 0


def test_premise_of_the_control_variate_holds_for_memory_rules():
    """E Y is exact when u_{k,i} has mean 0 and variance 1 given the past; rules with memory
    look at the arms' means, so check E u² = 1 per iterate (4 SE, SE from the sample)."""
    T, R = 20, 4000
    oracle = paper(T)
    w0 = np.random.default_rng(4).standard_normal((R, 2))
    out = run_sgd(oracle, MemoryKLLCB(), w0, K, T, ETA, rng=5)
    u2 = standardised_noise(out.w, out.counts, oracle.arms.sigma2, T, ETA) ** 2
    per_run = u2.mean(axis=2)  # (R, K)
    se = per_run.std(axis=0, ddof=1) / np.sqrt(R)
    assert np.all(np.abs(per_run.mean(axis=0) - 1.0) < 4 * se)


def test_arm_sum_adds_in_arm_order():
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 100, size=(7, 4, 5))
    values = rng.uniform(0.1, 50.0, size=5)
    got = arm_sum(counts, values)
    assert got.shape == (7, 4)
    # the left-to-right sum, bit for bit (the order the study tables rely on) ...
    want = np.zeros((7, 4))
    for n in range(5):
        want = want + counts[..., n] * values[n]
    np.testing.assert_array_equal(got, want)
    # ... which is the matrix product up to rounding
    np.testing.assert_allclose(got, counts @ values, rtol=1e-14)


def test_bad_inputs_are_named():
    w = np.zeros((4, 3, 2))
    with pytest.raises(ValueError, match="'counts' parameter of quadratic_final_gaps"):
        quadratic_final_gaps(w, np.zeros((4, 3, 3)), [1.0, 2.0, 3.0], 10, ETA, 1.0)
    with pytest.raises(ValueError, match="'sigma2_star' parameter"):
        quadratic_final_gaps(w, np.zeros((4, 2, 3)), [1.0, 2.0, 3.0], 10, ETA, 0.0)
    with pytest.raises(ValueError, match="'Y' parameter of control_variate_mean"):
        control_variate_mean(np.ones(50), np.ones(49), 1.0)
