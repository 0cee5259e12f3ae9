"""Lemma 1 (Appendix A): V_t(n) = sᵀ A s, and the norms of A used in Lemma 3."""

import numpy as np
import pytest

from eegrad import ArmStatistics


def lemma1_matrix(gamma: int, d: int) -> np.ndarray:
    """A = (γ−1)⁻¹ (I − E/γ), E the block matrix of d×d identity blocks."""
    E = np.kron(np.ones((gamma, gamma)), np.eye(d))
    return (np.eye(gamma * d) - E / gamma) / (gamma - 1)


@pytest.mark.parametrize(("gamma", "d"), [(2, 1), (2, 3), (5, 2), (17, 4)])
def test_online_trace_equals_quadratic_form_and_numpy_cov(gamma, d):
    rng = np.random.default_rng(gamma * 10 + d)
    outputs = rng.standard_normal((gamma, d)) * rng.uniform(0.1, 10, d) + rng.standard_normal(d)
    stats = ArmStatistics(R=1, N=2, d=d)
    for g in outputs:
        stats.update(np.array([1]), g[None])
    V = stats.variance_trace()[0, 1]
    s = outputs.reshape(-1)
    A = lemma1_matrix(gamma, d)
    np.testing.assert_allclose(V, s @ A @ s, rtol=1e-12)
    np.testing.assert_allclose(V, np.trace(np.atleast_2d(np.cov(outputs.T))), rtol=1e-12)
    np.testing.assert_allclose(stats.mean[0, 1], outputs.mean(axis=0), rtol=1e-12)
    assert stats.count[0].tolist() == [0, gamma]
    assert np.isnan(stats.variance_trace()[0, 0])  # fewer than 2 pulls: undefined


@pytest.mark.parametrize(("gamma", "d"), [(2, 1), (3, 2), (9, 5)])
def test_lemma3_norms_of_A(gamma, d):
    A = lemma1_matrix(gamma, d)
    np.testing.assert_allclose(np.linalg.norm(A, "fro") ** 2, d / (gamma - 1), rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(A, 2), 1 / (gamma - 1), rtol=1e-12)


def test_vectorised_update_matches_per_realization():
    rng = np.random.default_rng(0)
    R, N, d, steps = 50, 4, 3, 40
    stats = ArmStatistics(R, N, d)
    history = [[[] for _ in range(N)] for _ in range(R)]
    for _ in range(steps):
        arms = rng.integers(0, N, R)
        g = rng.standard_normal((R, d))
        stats.update(arms, g)
        for r in range(R):
            history[r][arms[r]].append(g[r])
    V = stats.variance_trace()
    for r in range(R):
        for n in range(N):
            h = np.array(history[r][n])
            assert stats.count[r, n] == len(h)
            if len(h) >= 2:
                np.testing.assert_allclose(V[r, n], h.var(axis=0, ddof=1).sum(), rtol=1e-10)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_one_running_update_gives_the_weighted_mean_and_spread(library):
    """welford_deviation/welford_fold (and their torch twins) over a stream of weighted
    outputs, with γ = W/ω (West): the running mean is the weighted mean and the summed
    increments are Σω‖x − x̄_ω‖², against the direct float64 computation (rtol 1e-12: a few
    units of the last place over 50 folds, far below any statistical effect); unit weights
    give Welford's count form."""
    from eegrad.statistics import (
        welford_deviation,
        welford_deviation_torch,
        welford_fold,
        welford_fold_torch,
    )

    rng = np.random.default_rng(4)
    x = rng.standard_normal((50, 7)) * 3 + 1
    for w in (rng.uniform(0.1, 5.0, 50), np.ones(50)):
        if library == "torch":
            torch = pytest.importorskip("torch")
            mean, dev, fold = torch.zeros(7, dtype=torch.float64), welford_deviation_torch, \
                welford_fold_torch
            rows = torch.as_tensor(x)
        else:
            mean, dev, fold, rows = np.zeros(7), welford_deviation, welford_fold, x
        spread, total = 0.0, 0.0
        for row, weight in zip(rows, w, strict=True):
            total += weight
            delta, inc = dev(row, mean, total / weight)
            spread += weight * float(inc)
            fold(mean, delta, total / weight)
        xbar = (w @ x) / w.sum()
        np.testing.assert_allclose(np.asarray(mean), xbar, rtol=1e-12)
        np.testing.assert_allclose(spread, float(w @ ((x - xbar) ** 2).sum(axis=1)), rtol=1e-12)
