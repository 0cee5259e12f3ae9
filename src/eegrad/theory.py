r"""Closed forms and bounds of the paper, as pure vectorised functions.

Every function broadcasts over NumPy arrays. Symbols follow the paper: ``alpha`` (α > 2),
``beta`` (β ≥ max σ_n²), ``P`` (P ≥ S(w)), ``c`` (the Hanson–Wright constant), ``d``, ``T``,
``S`` = Tr M(w), ``sigma2`` = (σ_1², …, σ_N²), ``eta`` (η), ``m`` and ``L``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._validation import check_array, check_real

__all__ = [
    "C1",
    "C2",
    "O_T",
    "Z_T",
    "eta_max",
    "f",
    "fixed_oracle_gaps",
    "fixed_oracle_rate",
    "funcf_factors",
    "funcf_width",
    "lai_robbins_regret",
    "misranking_floor",
    "phi",
    "tau",
    "tau_opt",
]

ArrayLike = Any


def funcf_factors(alpha: float, c: float, d: int) -> tuple[float, float]:
    r"""The constants of eq. (funcf) at :math:`x = \alpha \ln t / (\gamma - 1)`:
    :math:`k_1 = \sqrt{\alpha d / c}` and :math:`k_2 = \sqrt{\alpha / (c d)}`."""
    return math.sqrt(alpha * d / c), math.sqrt(alpha / (c * d))


def funcf_width(beta: Any, P: Any, k1: float, k2: float, s: Any, g: Any) -> Any:
    r"""Eq. (funcf) in factorised form, the one evaluation of it in the package (EE-Grad's index,
    the compiled engine and :func:`f` call it):

    .. math:: f = \beta P\, k_1 s g \max(1, k_2 s g),

    with :math:`s = \sqrt{\ln t}` and :math:`g = (\gamma - 1)^{-1/2}` for EE-Grad's index
    (:func:`funcf_factors` gives k₁, k₂). Scalars or arrays (broadcast); plain arithmetic, so
    that Numba compiles the same operations in the same order."""
    return beta * P * k1 * s * g * np.maximum(1.0, k2 * s * g)


def f(x: ArrayLike, beta: ArrayLike, P: ArrayLike, c: ArrayLike, d: int) -> np.ndarray:
    r"""The confidence width of eq. (funcf).

    .. math::

        f(x) = \beta P \sqrt{\frac{x d}{c}}\,\max\!\left(1, \sqrt{\frac{x}{c d}}\right)

    Evaluated by :func:`funcf_width` with k₁ = √(xd/c), k₂ = √(x/(cd)) and s = g = 1.

    Examples
    --------
    >>> float(f(2.0, beta=1.0, P=1.0, c=1.0, d=2))
    2.0
    """
    x = np.asarray(x, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    return np.asarray(funcf_width(beta, P, np.sqrt(x * d / c), np.sqrt(x / (c * d)), 1.0, 1.0),
                      dtype=np.float64)  # fmt: skip


def phi(eps: ArrayLike, beta: ArrayLike, P: ArrayLike, c: ArrayLike, d: int) -> np.ndarray:
    r"""The exponent of Lemma 3 (eq. concentration), the inverse of :func:`f`.

    .. math::

        \phi(\varepsilon) = \frac{c\,\varepsilon}{\beta P}
                            \min\!\left(1, \frac{\varepsilon / d}{\beta P}\right)
    """
    eps = np.asarray(eps, dtype=np.float64)
    bp = beta * P
    return c * eps / bp * np.minimum(1.0, eps / d / bp)


def _gaps(sigma2: ArrayLike) -> np.ndarray:
    s2 = check_array(sigma2, "sigma2", "eegrad.theory", ndim=1, positive=True)
    return s2 - s2.min()


def C1(
    sigma2: ArrayLike, S: ArrayLike, alpha: float, beta: ArrayLike, P: ArrayLike, c: float, d: int
) -> np.ndarray:
    r"""The constant C_1(w) of eq. (constants).

    .. math::

        C_1(w) = \sum_{n : \Delta_n > 0} \frac{\alpha\,\Delta_n}{\phi(\Delta_n S(w) / 2)}

    ``S``, ``beta`` and ``P`` broadcast (e.g. shape (R,) for one value per realization).
    """
    delta = _gaps(sigma2)
    delta = delta[delta > 0]
    S = np.asarray(S, dtype=np.float64)[..., None]
    beta = np.asarray(beta, dtype=np.float64)[..., None]
    P = np.asarray(P, dtype=np.float64)[..., None]
    return np.sum(alpha * delta / phi(delta * S / 2.0, beta, P, c, d), axis=-1)


def C2(sigma2: ArrayLike, alpha: float) -> float:
    r"""The constant C_2 of eq. (constants): :math:`(\sum_n \Delta_n)\,2(\alpha-1)/(\alpha-2)`."""
    alpha = check_real(alpha, "alpha", "C2", gt=2, ref="Lemma 4")
    return float(_gaps(sigma2).sum() * 2.0 * (alpha - 1.0) / (alpha - 2.0))


def Z_T(
    T: ArrayLike,
    sigma2: ArrayLike,
    S: ArrayLike,
    alpha: float,
    beta: ArrayLike,
    P: ArrayLike,
    c: float,
    d: int,
) -> np.ndarray:
    r"""Theorem 1's bound factor: :math:`E\|G - \nabla F\|^2 \le Z_T(w)\,S(w)` with

    .. math::

        Z_T(w) = \frac{\sigma_*^2}{T} + \frac{\ln T}{T^2} C_1(w) + \frac{1}{T^2} C_2 .
    """
    T = np.asarray(T, dtype=np.float64)
    s2min = float(np.min(sigma2))
    return s2min / T + O_T(T, sigma2, S, alpha, beta, P, c, d)


def O_T(
    T: ArrayLike,
    sigma2: ArrayLike,
    S: ArrayLike,
    alpha: float,
    beta: ArrayLike,
    P: ArrayLike,
    c: float,
    d: int,
) -> np.ndarray:
    r"""The excess of Theorem 2: :math:`O_T = Z_T - \sigma_*^2/T = C_1 \ln T/T^2 + C_2/T^2`."""
    T = np.asarray(T, dtype=np.float64)
    return (C1(sigma2, S, alpha, beta, P, c, d) * np.log(T) + C2(sigma2, alpha)) / T**2


def tau_opt(eta: ArrayLike, sigma2_star: float, T: ArrayLike, m: float = 1.0, L: float = 1.0):
    r"""Theorem 2's contraction factor of the optimal mini-batch SGD:

    .. math:: \tau^{\mathrm o}(\eta) = m L \eta^2 (1 + \sigma_*^2 / T) - 2 m \eta + 1 .
    """
    eta = np.asarray(eta, dtype=np.float64)
    return m * L * eta**2 * (1.0 + sigma2_star / np.asarray(T, dtype=np.float64)) - 2 * m * eta + 1


def tau(
    eta: ArrayLike, sigma2_star: float, T: ArrayLike, O: ArrayLike, m: float = 1.0, L: float = 1.0
):
    r"""Theorem 2's contraction factor of EE-Grad: :math:`\tau(\eta) = \tau^{\mathrm o}(\eta) +
    m L \eta^2 O_T` (``O`` from :func:`O_T`)."""
    eta = np.asarray(eta, dtype=np.float64)
    return tau_opt(eta, sigma2_star, T, m, L) + m * L * eta**2 * np.asarray(O, dtype=np.float64)


def eta_max(Z: ArrayLike, L: float = 1.0) -> np.ndarray:
    r"""The step-size condition eq. (assumptionEta): η must lie in (0, 2 / (L (1 + Z_T)))."""
    return 2.0 / (L * (1.0 + np.asarray(Z, dtype=np.float64)))


def fixed_oracle_rate(eta: ArrayLike, sigma2_n: ArrayLike, T: ArrayLike) -> np.ndarray:
    r"""Exact one-step factor of MBO(n) on F = ½‖w‖², M(w) = diag(w²):

    .. math:: E F(w_{k+1}) = \rho_n\, E F(w_k), \qquad \rho_n = (1 - \eta)^2 + \eta^2 \sigma_n^2 / T

    (τ° of Theorem 2 with m = L = 1, holding with equality on this objective).
    """
    eta = np.asarray(eta, dtype=np.float64)
    return (1.0 - eta) ** 2 + eta**2 * np.asarray(sigma2_n, dtype=np.float64) / np.asarray(T)


def fixed_oracle_gaps(J1: ArrayLike, eta: float, sigma2_n: float, T: int, K: int) -> np.ndarray:
    """Expected gaps J_k = J_1 ρ_n^{k−1}, k = 1..K+1, of MBO(n) on the paper's quadratic."""
    rho = fixed_oracle_rate(eta, sigma2_n, T)
    return np.asarray(J1, dtype=np.float64)[..., None] * rho ** np.arange(K + 1)


def lai_robbins_regret(sigma2: ArrayLike, T: ArrayLike, d: int) -> np.ndarray:
    r"""Asymptotic lower bound of the normalised regret Σ_n Δ_n E γ_T(n) / (T σ*²).

    For Gaussian arms that differ only in covariance scale, any consistent rule has
    :math:`E\gamma_T(n) \gtrsim \ln T / \mathrm{KL}_n` with
    :math:`\mathrm{KL}_n = \frac d2 (r_n - 1 - \ln r_n)`, :math:`r_n = \sigma_n^2 / \sigma_*^2`.
    """
    s2 = check_array(sigma2, "sigma2", "lai_robbins_regret", ndim=1, positive=True)
    star = s2.min()
    r = s2 / star
    sub = r > 1
    kl = 0.5 * d * (r[sub] - 1.0 - np.log(r[sub]))
    per_log = np.sum((s2[sub] - star) / kl) / star
    T = np.asarray(T, dtype=np.float64)
    return per_log * np.log(T) / T


def misranking_floor(sigma2: ArrayLike, rounds: int, d: int) -> float:
    r"""Chance that ideal evidence ranks the best arm below the runner-up.

    Give all ``rounds`` pulls to the two best arms, half each, with the means and the noise
    shape known: each pull is then d independent centred Gaussian coordinates, the sample
    variances have ν = rounds·d/2 degrees of freedom each, and the best test ranks the arms
    wrongly with probability

    .. math:: P\bigl(F_{\nu,\nu} > \sigma_{(2)}^2 / \sigma_{(1)}^2\bigr),

    σ²₍₁₎ < σ²₍₂₎ the two smallest σ_n². No rule sees more of what separates the two arms in
    as many rounds (an even split minimises the variance 2/ν_a + 2/ν_b of the log-ratio), so
    a rule that commits to one arm at the end of a run picks the wrong one at least about this
    often: a floor for the "lock-in" of the memory study.
    """
    from scipy import stats

    s2 = np.sort(check_array(sigma2, "sigma2", "misranking_floor", ndim=1, positive=True))
    if s2.size < 2:
        return 0.0
    nu = rounds * d / 2.0
    return float(stats.f.sf(s2[1] / s2[0], nu, nu))
