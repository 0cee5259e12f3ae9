r"""The noise of every arm, fitted from the spread of the rounds' parts: a plain object with its
own state, which :class:`~eegrad.SpreadThompson` (and the rules built on it) tells each round's
statistic and reads back.

The model is the spread rule's (:mod:`eegrad.selectors.spread`): the variance of arm n's
weighted mean is :math:`v_n = c_n\cdot\theta`, its coefficients :math:`c_n = (\sum_i p_i^2 -
1/K, \sum_i p_i^2/\omega_i[, \sum_i p_i^2/\omega_i^2])` from its weights and the parameters
:math:`\theta = (S^2, \tau^2[, \kappa^2])` shared by the arms. Each round's statistic y, with
:math:`\mathbb E\,y = x\cdot\theta`, enters a discounted least-squares fit normalised by its
first design column and weighted by its degrees of freedom n − 1; the posterior is
:math:`\mathcal N(\hat\theta, \hat\phi A^{-1})`. An arm's coefficients are the mean over its
pulls, or for an arm never pulled those of equal weights on the line :math:`\omega \approx a +
b\,s` in the per-client spend fitted over every part seen.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..spread import (
    equal_weight_coefficients,
    inverse_weights,
    pair_design,
    sums_design,
    variance_coefficients,
)

__all__ = ["SpreadFit", "SpreadRound"]

_RIDGE = 1e-6  # relative ridge on the normal matrix: splits S², τ² (κ²) evenly when collinear


class SpreadRound(NamedTuple):
    """One round's statistic as the fit takes it (:meth:`SpreadFit.add`): y (R,) with
    E y = x·θ, its design x (R, k), the round's variance coefficients (R, k), its spend-line
    sums (R, 5), and a second statistic of the round with its design, or None."""

    y: np.ndarray
    x: np.ndarray
    coef: np.ndarray
    line: np.ndarray
    second: tuple[np.ndarray, np.ndarray] | None = None


class SpreadFit:
    r"""The spread's fit of R realizations over N arms (the module's notes).

    Parameters
    ----------
    R, N : int
        Realizations and arms.
    spend : ndarray of shape (N,)
        Every arm's per-client spend (the line of the weights is fitted in it).
    population : int or None
        K, the clients an arm's parts are drawn from (None: infinite).
    noise_order : {1, 2}
        The order of the noise's expansion in the weights; the noise has ``noise_order + 1``
        parameters.
    discount : float
        Weight per round of age of the evidence, in (0, 1].

    Attributes
    ----------
    normal, moment, yy, nu, nu2 : ndarray
        Σ ν x̃ x̃ᵀ (R, k, k), Σ ν x̃ ỹ (R, k), Σ ν ỹ², Σ ν and Σ ν² (R,), discounted (Σ ν²
        by its square): the normalised statistics' least squares and their effective rounds.
    coef, pulls : ndarray
        Per arm, Σ c over its pulls (R, N, k) and its pulls (R, N), discounted.
    line : ndarray of shape (R, 5)
        Σ1, Σs, Σs², Σω, Σsω over the parts seen: the line ω ≈ a + b s.
    """

    def __init__(self, R: int, N: int, spend: np.ndarray, population: int | None,
                 noise_order: int, discount: float) -> None:  # fmt: skip
        self.spend, self.population, self.noise_order = spend, population, noise_order
        k = noise_order + 1  # θ = (S², τ²[, κ²])
        self.discount = discount
        self._rows = np.arange(R)
        self.normal = np.zeros((R, k, k))
        self.moment = np.zeros((R, k))
        self.yy = np.zeros(R)
        self.nu = np.zeros(R)
        self.nu2 = np.zeros(R)  # effective number of rounds: (Σν)² / Σν²
        self.coef = np.zeros((R, N, k))
        self.pulls = np.zeros((R, N))
        self.line = np.zeros((R, 5))

    def pair_round(self, arms: np.ndarray, y: np.ndarray, weights: np.ndarray,
                   weighted_spread: np.ndarray | None = None) -> SpreadRound:  # fmt: skip
        """A round told as its parts' pair sum y (R,) and weights (R, m) (0: a part absent) at
        ``arms`` (R,): y's design :func:`~eegrad.spread.pair_design`, the round's variance
        coefficients and its spend-line sums; with ``weighted_spread`` Q (R,), Q and its design
        as the round's second statistic."""
        present = weights > 0
        s = self.spend[arms][:, None] * present  # the spend of each part present
        line = np.stack([present.sum(axis=1), s.sum(axis=1), (s * s).sum(axis=1),
                         weights.sum(axis=1), (s * weights).sum(axis=1)], axis=1)  # fmt: skip
        second = None
        if weighted_spread is not None:
            inverse_sum = inverse_weights(weights).sum(axis=1) if self.noise_order == 2 else None
            second = (weighted_spread, sums_design(
                line[:, 0], line[:, 3], (weights * weights).sum(axis=1), self.population,
                inverse_sum)[0])
        return SpreadRound(y, pair_design(weights, self.noise_order),
                           variance_coefficients(weights, self.population, self.noise_order),
                           line, second)  # fmt: skip

    def sums_round(self, arms: np.ndarray, spread: np.ndarray, n: np.ndarray, W: np.ndarray,
                   W2: np.ndarray, inverse_weight_sum: np.ndarray | None) -> SpreadRound:  # fmt: skip
        """A round told as the sums secure aggregation reveals (:class:`~eegrad.spread.SpreadSums`:
        the weighted spread, n, W, W₂, Σ1/ω, each (R,)) at ``arms`` (R,): the spread's design
        :func:`~eegrad.spread.sums_design`, the coefficients and the spend-line sums."""
        s = self.spend[arms]
        x, coef = sums_design(n, W, W2, self.population,
                              inverse_weight_sum if self.noise_order == 2 else None)
        line = np.stack([n, n * s, n * s * s, W, s * W], axis=1)
        return SpreadRound(spread, x, coef, line)

    def add(self, arms: np.ndarray, y: np.ndarray, x: np.ndarray, coef: np.ndarray,
            line: np.ndarray, second: tuple[np.ndarray, np.ndarray] | None = None) -> None:  # fmt: skip
        """One round's statistic y (R,) with E y = x·θ (x: (R, k)), the round's variance
        coefficients (R, k) and its spend-line sums (R, 5), at ``arms`` (R,); ``second``, a
        second statistic of the same round and its design, shares the round's degrees of
        freedom with the first. The evidence before it is discounted first."""
        lam = self.discount
        nu = np.maximum(line[:, 0] - 1.0, 0.0)  # degrees of freedom, n − 1
        for arr in (self.normal, self.moment, self.yy, self.nu, self.coef, self.pulls,
                    self.line):  # fmt: skip
            arr *= lam
        self.nu2 *= lam * lam
        rows = [(y, x)] if second is None else [(y, x), second]
        for y_j, x_j in rows:
            self._add_row(y_j, x_j, nu / len(rows))
        self.nu2 += nu * nu  # one round: its rows are not independent evidence
        self.coef[self._rows, arms] += coef
        self.pulls[self._rows, arms] += 1.0
        self.line += line

    def _add_row(self, y: np.ndarray, x: np.ndarray, nu: np.ndarray) -> None:
        """One statistic into the fit, normalised by its first design column and weighted
        by ``nu``."""
        pairs = x[:, 0]
        with np.errstate(invalid="ignore", divide="ignore"):
            xt = np.where(pairs[:, None] > 0, x / pairs[:, None], 0.0)
            yt = np.where(pairs > 0, y / pairs, 0.0)
        self.normal += nu[:, None, None] * xt[:, :, None] * xt[:, None, :]
        self.moment += nu[:, None] * xt * yt[:, None]
        self.yy += nu * yt * yt
        self.nu += nu

    def fit(self, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""The fitted :math:`\hat\theta`, shape (R, k), 0 where ``free`` (R, k) holds a
        parameter at 0, and its approximate posterior covariance, shape (R, k, k): the
        normal matrix's inverse (over the free parameters) times the residual variance per
        unit weight, or until more than k + 1 effective rounds the raw second moment."""
        A = self.normal_matrix()
        if free.all():
            Ainv, k = np.linalg.inv(A), A.shape[-1]
        else:  # a parameter held at 0: its row and column of the system the identity's
            both = free[:, :, None] & free[:, None, :]
            eye = np.eye(A.shape[-1], dtype=bool)[None]
            Ainv = np.linalg.inv(np.where(both, A, 0.0) + (~free[:, :, None] & eye))
            Ainv, k = np.where(both, Ainv, 0.0), free.sum(axis=1)
        theta = np.einsum("rij,rj->ri", Ainv, self.moment)
        rss = (self.yy - 2.0 * np.einsum("ri,ri->r", theta, self.moment)
               + np.einsum("ri,rij,rj->r", theta, self.normal, theta))  # fmt: skip
        with np.errstate(invalid="ignore", divide="ignore"):
            n_eff = np.where(self.nu2 > 0, self.nu**2 / self.nu2, 0.0)
            # Residual variance per unit weight, with k parameters fitted; until more than
            # k + 1 effective rounds, the raw second moment (wide on purpose).
            phi = np.where(n_eff > k + 1.0, np.maximum(rss, 0.0) / self.nu * n_eff / (n_eff - k),
                           self.yy / np.maximum(self.nu, 1e-300))  # fmt: skip
        return theta, phi[:, None, None] * Ainv

    def normal_matrix(self) -> np.ndarray:
        """The fit's weighted normal matrix A, ridged (the posterior's precision up to the
        residual variance), shape (R, k, k)."""
        A = self.normal.copy()
        scale = np.maximum(np.trace(A, axis1=1, axis2=2), 1e-300)
        return A + (_RIDGE * scale)[:, None, None] * np.eye(A.shape[-1])

    def coefficients(self) -> np.ndarray:
        """Each arm's coefficients, shape (R, N, k): the mean over its pulls, or the
        prediction with equal weights for arms never pulled."""
        with np.errstate(invalid="ignore", divide="ignore"):
            seen = self.coef / self.pulls[:, :, None]
        return np.where(self.pulls[:, :, None] > 0, seen, self.equal_coefficients())

    def equal_coefficients(self) -> np.ndarray:
        """Every arm's coefficients as predicted with equal weights, shape (R, N, k), pulled
        or not (:func:`~eegrad.spread.equal_weight_coefficients`), on the line of the weights
        in the spend."""
        c1, cs, css, cw, csw = (self.line[:, i] for i in range(5))
        with np.errstate(invalid="ignore", divide="ignore"):
            det = c1 * css - cs * cs
            b = np.where(det > 1e-12 * np.maximum(c1 * css, 1e-300), (c1 * csw - cs * cw) / det,
                         np.where(cs > 0, cw / cs, 1.0))  # fmt: skip
            a = np.where(det > 1e-12 * np.maximum(c1 * css, 1e-300), (cw - b * cs) / c1, 0.0)
        omega = np.maximum(a[:, None] + b[:, None] * self.spend[None, :], 1.0)  # (R, N)
        return equal_weight_coefficients(omega, self.population, self.noise_order)

    def variances(self, theta: np.ndarray, equal: bool = False) -> np.ndarray:
        """Every arm's :math:`c_n\\cdot\\theta` for parameters ``theta`` (R, k), shape (R, N);
        ``equal``: at equal weights (:meth:`equal_coefficients`)."""
        coefficients = self.equal_coefficients() if equal else self.coefficients()
        return np.einsum("rnk,rk->rn", coefficients, theta)
