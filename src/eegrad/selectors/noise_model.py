r"""The noise of every arm's round mean: a plain object that a rule holds, tells each round's
spread and reads back.

:class:`NoiseModel` is the client-sampling model of :mod:`eegrad.selectors.spread` (its notes
state it): the variance of arm n's weighted mean is :math:`v_n = c_n\cdot\theta`, fitted from
the rounds' spread by :class:`~eegrad.selectors.spread_fit.SpreadFit`, plus the variance a
private release adds. It has no objective: :class:`~eegrad.SpreadThompson` holds one and asks
the least noise; :class:`~eegrad.selectors.progress_model.ProgressModel` extends it with the
signal and the curvature that the rules of progress read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .evidence import RoundEvidence
from .spread_fit import SpreadFit, SpreadRound

__all__ = ["NoiseModel"]


class NoiseModel:
    r"""The noise :math:`v_n` of every arm, R realizations over N arms.

    Parameters
    ----------
    R, N : int
        Realizations and arms.
    spend : ndarray of shape (N,)
        Every arm's per-client spend :math:`(B - D(n))/n` (the line of the weights of arms
        never pulled is fitted in it).
    population : int or None
        K, the clients an arm's parts are drawn from without replacement (None: infinite).
    noise_order : {1, 2}
        The device noise's order in 1/ω: the model has ``noise_order + 1`` parameters.
    discount : float
        Weight per round of age of the evidence, in (0, 1].
    release_noise : ndarray of shape (N,) or None
        The variance a private release adds to every arm's mean, known exactly.

    Attributes
    ----------
    spread : SpreadFit
        The discounted least squares of the rounds' spread statistics.
    spread_seen : bool
        Whether a round told has shown a spread (two parts or more in every realization).
    """

    #: What of a round's record the model reads (:attr:`eegrad.selectors.Selector.reads`).
    reads: frozenset[str] = frozenset({"spread"})
    #: The model's parameters beyond the noise's, which a rule takes, keeps as attributes of
    #: its own and gives the model (none here).
    options: tuple[str, ...] = ()

    @classmethod
    def check_options(cls, owner: str, **values: Any) -> dict[str, Any]:
        """The model's :attr:`options` as a rule ``owner`` was given them, checked (none
        here)."""
        return {}

    def __init__(self, R: int, N: int, spend: np.ndarray, population: int | None = None,
                 noise_order: int = 1, discount: float = 0.9,
                 release_noise: np.ndarray | None = None) -> None:  # fmt: skip
        self.R, self.N = R, N
        self.spend = np.asarray(spend, dtype=np.float64)
        self.population, self.noise_order, self.discount = population, noise_order, discount
        self.release_noise = release_noise
        self._rows = np.arange(R)
        self.spread = SpreadFit(R, N, self.spend, population, noise_order, discount)
        self.spread_seen = False

    # -- a round's record ------------------------------------------------------------------------
    def before_statistic(self, ev: RoundEvidence, owner: str) -> None:
        """Take what of the round's record the model reads before its spread (here nothing;
        :class:`~eegrad.selectors.progress_model.ProgressModel` reads the local steps)."""

    def after_statistic(self, ev: RoundEvidence, owner: str) -> None:
        """Take what of the round's record the model reads after its spread (here nothing;
        :class:`~eegrad.selectors.progress_model.ProgressModel` reads the mean's signal)."""

    def pair_round(self, arms: np.ndarray, y: np.ndarray, weights: np.ndarray,
                   second: np.ndarray | None = None) -> SpreadRound:  # fmt: skip
        """The round's statistic from its parts' pair sum (:meth:`SpreadFit.pair_round
        <eegrad.selectors.spread_fit.SpreadFit.pair_round>`)."""
        return self.spread.pair_round(arms, y, weights, second)

    def sums_round(self, arms: np.ndarray, spread: np.ndarray, n: np.ndarray, W: np.ndarray,
                   W2: np.ndarray, inverse_weight_sum: np.ndarray | None) -> SpreadRound:  # fmt: skip
        """The round's statistic from its parts' sums (:meth:`SpreadFit.sums_round
        <eegrad.selectors.spread_fit.SpreadFit.sums_round>`)."""
        return self.spread.sums_round(arms, spread, n, W, W2, inverse_weight_sum)

    def add(self, arms: np.ndarray, y: np.ndarray, x: np.ndarray, coef: np.ndarray,
            line: np.ndarray, second: tuple[np.ndarray, np.ndarray] | None = None) -> bool:  # fmt: skip
        """Add one round's statistic y with E y = x·θ (its variance coefficients ``coef``,
        its spend-line sums ``line``, a second statistic of the round and its design
        ``second``); returns whether the round showed a spread (n >= 2 in every realization;
        a round capped to one part, or with failures, shows none)."""
        self.spread.add(arms, y, x, coef, line, second)
        shows = bool(np.all(line[:, 0] >= 2.0))
        self.spread_seen = self.spread_seen or shows
        return shows

    def ready(self) -> bool:
        """Whether the model predicts what a rule's objective reads (here once it exists: the
        noise of an arm never shown is predicted from the others)."""
        return True

    # -- the fit ---------------------------------------------------------------------------------
    def fit(self) -> tuple[np.ndarray, np.ndarray]:
        r"""The fitted :math:`\hat\theta = (S^2, \tau^2[, \kappa^2])` (unconstrained, but 0
        where :meth:`free_parameters` holds one), shape (R, k), and its approximate posterior
        covariance, shape (R, k, k) (:meth:`SpreadFit.fit
        <eegrad.selectors.spread_fit.SpreadFit.fit>`)."""
        return self.spread.fit(self.free_parameters())

    def free_parameters(self) -> np.ndarray:
        r"""Which of the noise's parameters :meth:`fit` estimates, shape (R, k) bool; the
        others are held at 0 and drawn at 0 (here every one: a hook for a variant of the
        model, e.g. :math:`\kappa^2` held at 0 for clients that take one step)."""
        return np.ones(self.spread.moment.shape, dtype=bool)

    def admissible(self, theta: np.ndarray) -> np.ndarray:
        """The parameters the noise is predicted from, for a fit or a posterior draw
        ``theta``, shape (R, k): each negative component set to 0 (a variance is not
        negative)."""
        return np.maximum(theta, 0.0)

    def normal_matrix(self) -> np.ndarray:
        """The fit's weighted normal matrix A, ridged (the posterior's precision up to the
        residual variance), shape (R, k, k)."""
        return self.spread.normal_matrix()

    def coefficients(self) -> np.ndarray:
        """Each arm's (Σp² − 1/K, Σp²/ω[, Σp²/ω²]), shape (R, N, k): the mean over its pulls,
        or the prediction with equal weights for arms never pulled."""
        return self.spread.coefficients()

    def equal_coefficients(self) -> np.ndarray:
        """Every arm's coefficients as predicted with equal weights, shape (R, N, k), pulled
        or not (:func:`~eegrad.spread.equal_weight_coefficients`)."""
        return self.spread.equal_coefficients()

    # -- the noise -------------------------------------------------------------------------------
    def scale(self) -> np.ndarray | float:
        """A factor on every arm's modelled noise, shape (R, N) or a scalar: 1 here (a model
        whose arms' updates differ in gain scales them,
        :class:`~eegrad.selectors.progress_model.ProgressModel`)."""
        return 1.0

    def predicted(self) -> np.ndarray:
        """The fitted variance v_n of every arm, shape (R, N) (posterior mean, θ̂ >= 0)."""
        return self.noise_of(self.fit()[0])

    def noise_of(self, theta: np.ndarray, equal: bool = False) -> np.ndarray:
        """Every arm's variance v_n under the noise's parameters ``theta``, shape (R, k), made
        admissible (:meth:`admissible`), shape (R, N), the release's noise added; ``equal``:
        every arm at equal weights (:meth:`equal_coefficients`), the arms alike, where a
        pull's own weights would make the arms pulled look noisier than the others."""
        v = self.scale() * self.spread.variances(self.admissible(theta), equal)
        return v if self.release_noise is None else v + self.release_noise[None, :]

    def step_scale(self, arms: Any) -> np.ndarray | None:
        """The model's own scale of a step by a round of ``arms``, or None: none here (a rule
        holding it takes the default from its predicted noise,
        :meth:`eegrad.selectors.Selector.step_scale`)."""
        return None

    def drawn(self, theta: np.ndarray, cov: np.ndarray, z: np.ndarray) -> np.ndarray:
        """Every arm's noise under the posterior draw θ + L z of the parameters (L: the
        Cholesky factor of ``cov``, z: standard normals, shape (R, k)), the parameters that
        :meth:`free_parameters` holds drawn at 0, shape (R, N)."""
        k = theta.shape[-1]
        jitter = 1e-12 * np.maximum(np.trace(cov, axis1=1, axis2=2), 1e-300)
        L = np.linalg.cholesky(cov + jitter[:, None, None] * np.eye(k))
        draw = theta + np.einsum("rij,rj->ri", L, z)
        free = self.free_parameters()
        return self.noise_of(draw if free.all() else np.where(free, draw, 0.0))
