r"""Low-variance Monte Carlo estimates of the expected final gap on the paper's quadratic.

On F(w) = ½‖w‖² with M(w) = diag(w²) (Section 6), one SGD step with a gradient estimate G_k whose
noise has covariance v_k M(w_k), :math:`v_k = \sum_n \gamma_{k,n}\sigma_n^2 / T^2`
(eq. gammaDelta, γ_{k,n} the pulls of arm n at iterate k), is coordinate by coordinate

.. math:: w_{k+1,i} = w_{k,i}\,\bigl((1-\eta) - \eta\sqrt{v_k}\,u_{k,i}\bigr),

with u_{k,i} a standardised noise: mean 0 and variance 1 given the past. The final gap of one
run is therefore a product of K random factors times F(w_1): heavy-tailed, with a relative
standard deviation of about 15 per run in the Figure 1 setting. Two devices tame it:

* **the last step in expectation** — :math:`E[F(w_{K+1}) \mid w_K, \gamma_K] = F(w_K)
  ((1-\eta)^2 + \eta^2 v_K)` replaces the last random factor by its mean;
* **a control variate** — the same run's standardised noises u_{k,i}, replayed with the optimal
  oracle's v° = σ*²/T at every iterate, give the gap Y that the optimal oracle would have had on
  the same random numbers. Its expectation is known in closed form,
  :math:`E Y = E F(w_1)\,\rho_*^K` with ρ* = (1 − η)² + η² σ*²/T, and Y moves with the run's gap
  X (the same w_1, the same u): the regression estimator X̄ − β̂(Ȳ − E Y) keeps X's expectation
  and removes most of its variance.

E Y is exact when u_{k,i} has mean 0 and variance 1 given everything before iterate k's final
mean — true for every fixed oracle, and, with Gaussian noise, for every rule that chooses arms
from each arm's own deviations from its own running mean (Helmert's contrasts are independent of
the arm's mean). Rules with memory also compare the arms' means with the iterate's pooled mean,
so for them it holds to the order of that dependence; the memory study reports the direct
estimate beside this one so that the two can be compared.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._validation import check_array, check_integer, check_real, fail

__all__ = ["arm_sum", "control_variate_mean", "quadratic_final_gaps", "standardised_noise"]


def arm_sum(counts: Any, values: Any) -> np.ndarray:
    r""":math:`\sum_n \gamma(n)\, x_n` over the last (arm) axis, added in arm order.

    Not a BLAS product: a BLAS kernel's order of addition depends on the CPU, and a study's
    tables must be the same bytes on every machine for the same seed.

    Parameters
    ----------
    counts : array of shape (..., N)
        Pulls γ(n) (or any per-arm weights).
    values : array of shape (N,)
        The per-arm values x_n (σ_n², Δ_n).

    Returns
    -------
    ndarray of shape (...)
    """
    counts = np.asarray(counts)
    values = np.asarray(values, dtype=float)
    total = counts[..., 0] * values[0]
    for n in range(1, values.shape[0]):
        total = total + counts[..., n] * values[n]
    return total


def _path(w: Any, counts: Any, sigma2: Any, owner: str) -> tuple[np.ndarray, ...]:
    w = check_array(w, "w", owner, ndim=3)
    counts = check_array(counts, "counts", owner, ndim=3)
    sigma2 = check_array(sigma2, "sigma2", owner, ndim=1, positive=True)
    R, K1, _ = w.shape
    if counts.shape[:2] != (R, K1 - 1) or counts.shape[2] != sigma2.shape[0]:
        raise fail("counts", owner, f"an array of shape (R, K, N) = ({R}, {K1 - 1}, "
                   f"{sigma2.shape[0]}) matching w (R, K+1, d) and sigma2 (N,)", counts.shape)  # fmt: skip
    return w, counts, sigma2


def standardised_noise(w: Any, counts: Any, sigma2: Any, T: int, eta: float) -> np.ndarray:
    r"""The standardised noises u_{k,i} of an SGD path on F = ½‖w‖², M(w) = diag(w²).

    Parameters
    ----------
    w : array of shape (R, K+1, d)
        The iterates w_1..w_{K+1} (``SGDResult.w``).
    counts : array of shape (R, K, N)
        Pulls of each arm at each iterate (``SGDResult.counts``).
    sigma2 : array of shape (N,)
        The arms' σ_n².
    T : int
        Rounds per iterate.
    eta : float
        The constant step size.

    Returns
    -------
    u : array of shape (R, K, d)
        :math:`u_{k,i} = (w_{k,i} - w_{k+1,i} - \eta w_{k,i}) / (\eta \sqrt{v_k}\, w_{k,i})`
        with v_k = Σ_n γ_{k,n} σ_n² / T² (eq. gammaDelta), so that
        w_{k+1,i} = w_{k,i}((1 − η) − η√v_k u_{k,i}).
    """
    owner = "standardised_noise"
    w, counts, sigma2 = _path(w, counts, sigma2, owner)
    return _noise(w, counts, sigma2, T, check_real(eta, "eta", owner, gt=0.0))


def _noise(w: np.ndarray, counts: np.ndarray, sigma2: np.ndarray, T: int, eta: float):
    """:func:`standardised_noise` on checked arrays."""
    v = arm_sum(counts, sigma2) / float(T) ** 2  # (R, K)
    wk, wk1 = w[:, :-1], w[:, 1:]
    xi = (wk - wk1) / eta - wk  # noise of G_k, ∇F(w_k) = w_k
    with np.errstate(divide="ignore", invalid="ignore"):
        u = xi / (np.sqrt(v)[..., None] * wk)
    return np.where(wk == 0.0, 0.0, u)


def quadratic_final_gaps(
    w: Any, counts: Any, sigma2: Any, T: int, eta: float, sigma2_star: float
) -> tuple[np.ndarray, np.ndarray]:
    r"""Per-run final gap X and its control variate Y on F = ½‖w‖², M(w) = diag(w²).

    Returns
    -------
    X : array of shape (R,)
        :math:`F(w_K)\,((1-\eta)^2 + \eta^2 v_K)`, the expectation of F(w_{K+1}) given w_K
        and the last iterate's pulls.
    Y : array of shape (R,)
        :math:`\tfrac12\sum_i w_{1,i}^2 \prod_{k<K}((1-\eta) - \eta\sqrt{v_*}u_{k,i})^2
        \,((1-\eta)^2 + \eta^2 v_*)` with v* = σ*²/T: the same run replayed with the optimal
        oracle; E Y = E F(w_1) ρ*^K (:func:`eegrad.theory.fixed_oracle_gaps`).
    """
    owner = "quadratic_final_gaps"
    w, counts, sigma2 = _path(w, counts, sigma2, owner)
    sigma2_star = check_real(sigma2_star, "sigma2_star", owner, gt=0.0)
    eta = check_real(eta, "eta", owner, gt=0.0)
    u = _noise(w, counts, sigma2, T, eta)
    a = 1.0 - eta
    v_last = arm_sum(counts[:, -1], sigma2) / float(T) ** 2
    X = 0.5 * np.einsum("rd,rd->r", w[:, -2], w[:, -2]) * (a * a + eta * eta * v_last)
    v_star = sigma2_star / float(T)
    path = np.prod((a - eta * np.sqrt(v_star) * u[:, :-1]) ** 2, axis=1)  # (R, d)
    Y = 0.5 * np.einsum("rd,rd->r", w[:, 0] ** 2, path) * (a * a + eta * eta * v_star)
    return X, Y


def _cv_estimate(X: np.ndarray, Y: np.ndarray, mean_Y: float) -> tuple[float, float]:
    # math.fsum, not a BLAS dot: the sums are exactly rounded, so the same on every CPU.
    dy = Y - Y.mean()
    var_y = math.fsum(dy * dy)
    beta = math.fsum((X - X.mean()) * dy) / var_y if var_y > 0 else 0.0
    return float(X.mean() - beta * (Y.mean() - mean_Y)), beta


def control_variate_mean(
    X: Any, Y: Any, mean_Y: float, groups: int = 20
) -> tuple[float, float, float]:
    r"""Regression (control-variate) estimate of E X with the known mean E Y.

    .. math:: \hat\mu = \bar X - \hat\beta(\bar Y - E Y), \qquad
              \hat\beta = \widehat{\mathrm{Cov}}(X, Y) / \widehat{\mathrm{Var}}(Y)

    Parameters
    ----------
    X, Y : arrays of shape (R,)
        Paired samples; R ≥ 2·``groups``.
    mean_Y : float
        The exact E Y.
    groups : int
        Groups of the delete-a-group jackknife that gives the standard error. With heavy
        tails the residual standard deviation s(X − β̂Y)/√R is optimistic — in the Figure 1
        setting at T = 50 the spread of 16 independent replicates of R = 2000 was 1.2–1.5 times
        its average (``studies/memory_replicates.py``) — because β̂'s error multiplies
        Ȳ − E Y, which is large; the jackknife carries that error (there the spread was
        0.9–1.1 times its average). One sample's standard error still varies with the sample,
        as heavy tails make it.

    Returns
    -------
    estimate, se, beta : float
        The estimate, its jackknife standard error and β̂.
    """
    owner = "control_variate_mean"
    X = check_array(X, "X", owner, ndim=1)
    Y = check_array(Y, "Y", owner, ndim=1)
    groups = check_integer(groups, "groups", owner, ge=2)
    if X.shape != Y.shape or X.shape[0] < 2 * groups:
        raise fail("Y", owner, f"the shape of X {X.shape}, with at least 2·groups = "
                   f"{2 * groups} realizations", Y.shape)  # fmt: skip
    mean_Y = check_real(mean_Y, "mean_Y", owner)
    est, beta = _cv_estimate(X, Y, mean_Y)
    group = np.arange(X.shape[0]) % groups
    leave_out = np.array(
        [_cv_estimate(X[group != g], Y[group != g], mean_Y)[0] for g in range(groups)]
    )
    se = float(np.sqrt((groups - 1) / groups * np.sum((leave_out - leave_out.mean()) ** 2)))
    return est, se, beta
