import numpy as np
import pytest

from eegrad import theory


@pytest.mark.parametrize("d", [1, 2, 7])
def test_phi_is_inverse_of_f(d):
    x = np.logspace(-4, 4, 200)
    beta, P, c = 3.0, 0.7, 2.5
    y = theory.f(x, beta, P, c, d)
    np.testing.assert_allclose(theory.phi(y, beta, P, c, d), x, rtol=1e-12)
    assert np.all(np.diff(y) > 0)


def test_constants_and_bound():
    s2 = np.array([50.0, 26.0, 16.7])
    S, alpha, beta, P, c, d, T = 1.25, 2.5, 50.0, 1.25, 1.0, 2, 200
    delta = s2 - s2.min()
    phi = theory.phi(delta[:2] * S / 2, beta, P, c, d)
    c1 = np.sum(alpha * delta[:2] / phi)
    np.testing.assert_allclose(theory.C1(s2, S, alpha, beta, P, c, d), c1)
    c2 = delta.sum() * 2 * (alpha - 1) / (alpha - 2)
    np.testing.assert_allclose(theory.C2(s2, alpha), c2)
    z = s2.min() / T + np.log(T) / T**2 * c1 + c2 / T**2
    np.testing.assert_allclose(theory.Z_T(T, s2, S, alpha, beta, P, c, d), z)
    np.testing.assert_allclose(theory.O_T(T, s2, S, alpha, beta, P, c, d), z - s2.min() / T)
    # Vectorised over realizations' S and over T.
    zs = theory.Z_T(np.array([50, 200]), s2, np.array([1.25, 1.25]), alpha, beta, P, c, d)
    assert zs.shape == (2,)


def test_tau_relations():
    eta = np.linspace(0.05, 1.9, 50)
    s2star, T, O = 16.7, 50, 0.3
    to = theory.tau_opt(eta, s2star, T)
    ta = theory.tau(eta, s2star, T, O)
    np.testing.assert_allclose(ta - to, eta**2 * O)
    # τ° minimised at η = 1/(1 + σ*²/T); τ at 1/(1 + Z_T) (text after Theorem 2).
    Z = s2star / T + O
    fine = np.linspace(0.01, 1.99, 100001)
    assert abs(fine[np.argmin(theory.tau_opt(fine, s2star, T))] - 1 / (1 + s2star / T)) < 1e-4
    assert abs(fine[np.argmin(theory.tau(fine, s2star, T, O))] - 1 / (1 + Z)) < 1e-4
    # Inside the step-size condition τ < 1; at its edge τ = 1.
    edge = theory.eta_max(Z)
    np.testing.assert_allclose(theory.tau(edge, s2star, T, O), 1.0)
    assert np.all(theory.tau(fine[fine < edge], s2star, T, O) < 1)
    # On the paper's quadratic, τ° is the fixed oracle's exact rate for the best arm.
    np.testing.assert_allclose(
        theory.tau_opt(eta, s2star, T), theory.fixed_oracle_rate(eta, s2star, T)
    )


def test_lai_robbins():
    s2 = np.array([50.0, 26.0, 16.7])
    r = s2 / s2.min()
    kl = r[:2] - 1 - np.log(r[:2])  # d = 2: (d/2) = 1
    T = np.array([200.0, 3000.0])
    expected = np.sum((s2[:2] - s2.min()) / kl) / s2.min() * np.log(T) / T
    np.testing.assert_allclose(theory.lai_robbins_regret(s2, T, 2), expected)


def test_fixed_oracle_gaps_shape():
    g = theory.fixed_oracle_gaps(np.array([1.0, 2.0]), 0.85, 16.7, 50, 5)
    assert g.shape == (2, 6)
    np.testing.assert_allclose(g[1], 2.0 * theory.fixed_oracle_rate(0.85, 16.7, 50) ** np.arange(6))


def test_misranking_floor_against_simulation():
    """P(F_{ν,ν} > r) against direct chi-square draws (1e5 draws: SE ≤ 0.0016, 4 SE allowed)."""
    rng = np.random.default_rng(0)
    nu = 250 * 2 / 2
    draws = rng.chisquare(nu, (100_000, 2))
    # Misranked: the best arm's (σ² = 19) sample variance above the runner-up's (σ² = 20).
    simulated = np.mean(19.0 * draws[:, 0] > 20.0 * draws[:, 1])
    floor = theory.misranking_floor([20.0, 19.0, 30.0], rounds=250, d=2)
    np.testing.assert_allclose(floor, simulated, atol=4 * 0.0016)
    assert theory.misranking_floor([5.0], 10, 2) == 0.0
    assert theory.misranking_floor([1.0, 3.0], 3000, 2) < 1e-12
