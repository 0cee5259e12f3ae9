"""Monte Carlo checks against the paper's closed forms (fixed seeds; tolerances are multiples
of the Monte Carlo standard error, SE = sample std / √R, stated at each assertion)."""

import numpy as np
import pytest
from conftest import PAPER_SIGMA2_T50, paper_arms

from eegrad import (
    EEGrad,
    FixedArm,
    GaussianOracle,
    Quadratic,
    RademacherOracle,
    estimate_gradient,
    run_sgd,
)
from eegrad.theory import Z_T, fixed_oracle_rate


@pytest.mark.parametrize("oracle_cls", [GaussianOracle, RademacherOracle])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_fixed_oracle_follows_closed_form(oracle_cls, n):
    """E[F(w_{k+1}) | w_1] = ρ_n^k F(w_1), ρ_n = (1−η)² + η²σ_n²/T (the paper's Theorem 2 with
    m = L = 1). X_k = gap_{k+1} − ρ^k gap_1 has mean 0; assert |mean X_k| < 4 SE(X_k)."""
    T, K, eta, R = 50, 5, 0.85, 20_000
    oracle = oracle_cls(Quadratic(d=2), paper_arms(T))
    w0 = np.random.default_rng(10 + n).standard_normal((R, 2))
    out = run_sgd(oracle, FixedArm(n), w0, K=K, T=T, eta=eta, rng=20 + n)
    rho = fixed_oracle_rate(eta, PAPER_SIGMA2_T50[n - 1], 50)
    for k in range(1, K + 1):
        X = out.gaps[:, k] - rho**k * out.gaps[:, 0]
        assert abs(X.mean()) < 4 * X.std() / np.sqrt(R), (k, X.mean(), X.std() / np.sqrt(R))
    # And one step at a time, conditionally: gap_{k+1} − ρ gap_k has mean 0.
    Y = out.gaps[:, 1:] - rho * out.gaps[:, :-1]
    assert np.all(np.abs(Y.mean(axis=0)) < 4 * Y.std(axis=0) / np.sqrt(R))


@pytest.mark.parametrize(("T", "c"), [(50, 1.0), (200, 10.0), (400, 100.0)])
def test_gamma_delta_identity(T, c):
    """eq. (gammaDelta): E‖G − ∇F‖² − σ*²S/T = (1/T²) Σ_n Δ_n E[γ_T(n)] S. Per realization,
    X = ‖G − ∇F‖² − σ*²S/T − Σ_n Δ_n γ_T(n) S/T² has mean 0; assert |mean X| < 4 SE(X)."""
    arms = paper_arms(T)
    oracle = GaussianOracle(Quadratic(d=2), arms)
    R = 20_000
    w = np.tile([1.0, -0.5], (R, 1))
    S = 1.25
    res = estimate_gradient(oracle, EEGrad(alpha=2.5, beta="oracle", P="oracle", c=c), w, T, 5)
    err = ((res.gradient - w) ** 2).sum(axis=1)
    lhs = err - arms.sigma2_star * S / T
    rhs = (res.counts @ arms.delta) * S / T**2
    X = lhs - rhs
    assert abs(X.mean()) < 4 * X.std() / np.sqrt(R)
    # The regret term is not trivially zero here: EE-Grad pulls suboptimal arms.
    assert rhs.mean() > 0


@pytest.mark.parametrize("T", [50, 200, 3000])
@pytest.mark.parametrize("c", [1.0, 10.0])
def test_theorem1_bound_holds(T, c):
    """Theorem 1: E‖G − ∇F‖² <= Z_T(w) S(w), with β = max σ_n², P = S(w). Assert the estimate
    plus 3 SE stays under the bound (so the bound holds with margin, not by noise)."""
    arms = paper_arms(T)
    oracle = GaussianOracle(Quadratic(d=2), arms)
    R = 4000 if T == 3000 else 20_000
    w_point = np.array([1.0, -0.5])
    S = float(w_point @ w_point)
    w = np.tile(w_point, (R, 1))
    alpha = 2.5
    res = estimate_gradient(oracle, EEGrad(alpha=alpha, beta="oracle", P="oracle", c=c), w, T, 9)
    err = ((res.gradient - w) ** 2).sum(axis=1)
    bound = Z_T(T, arms.sigma2, S, alpha, arms.sigma2.max(), S, c, 2) * S
    assert err.mean() + 3 * err.std() / np.sqrt(R) < bound
    # The optimal oracle's variance is a lower bound that EE-Grad cannot beat (Theorem 1).
    assert err.mean() + 4 * err.std() / np.sqrt(R) > arms.sigma2_star * S / T


def test_eegrad_converges_near_optimal_oracle_in_sgd():
    """Figure 1's claim: EE-Grad's expected gap lies between the optimal and worst oracles and
    its distance to the optimal one shrinks with T (σ_n²/T fixed across T)."""
    R, K, eta = 4000, 5, 0.85
    ratios = []
    for T in (50, 400):
        oracle = GaussianOracle(Quadratic(d=2), paper_arms(T))
        w0 = np.random.default_rng(0).standard_normal((R, 2))
        ee = run_sgd(oracle, EEGrad(c=1.0), w0, K, T, eta, rng=1).gaps[:, -1].mean()
        best = run_sgd(oracle, FixedArm(3), w0, K, T, eta, rng=1).gaps[:, -1].mean()
        worst = run_sgd(oracle, FixedArm(1), w0, K, T, eta, rng=1).gaps[:, -1].mean()
        assert best < ee < worst
        ratios.append(ee / best)
    assert ratios[1] < ratios[0]
