r"""The signal of a round's mean, :math:`s_n = \|\mathbb E\,\bar u_n\|^2`, as one curve over the
arms: a plain object with its own state, which :class:`~eegrad.selectors.progress_model.ProgressModel`
tells each round's estimate and reads back.

The model (the progress module's notes, *What the rounds show*): :math:`s_n = \exp(\phi_n\cdot
b)`, :math:`\phi_n = (1, \ell_n[, \ell_n^2])` in the centred, scaled log-spend :math:`\ell_n` of
the per-client spend, or, where the clients' reported local steps span :data:`STEPS_SPAN` or
more between the arms, in their centred log steps (:meth:`SignalCurve.arm_steps`). The shape
(the slope, the bend) is fitted by Gauss–Newton on the rounds' signals divided by the level at
their round, with long memory (``shape_discount``); the level by least squares on the recent
signals (``discount``). Each coefficient of the shape is shrunk towards its prior (the local
steps': :meth:`SignalCurve.steps_prior`) by its evidence (:meth:`SignalCurve.curve`).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import isotonic_regression

from .progress_fits import LocalSteps

__all__ = ["STEPS_SPAN", "SignalCurve"]

_RIDGE = 1e-8  # relative ridge on the signal fit's normal matrix
_NEWTON = 8  # Gauss–Newton iterations of the signal's fit (warm-started)
_SLOPE = 8.0  # at most e⁸ between the signals at the ends of the spend's range
_PRIOR_FLAT = 1e-9  # a steps prior no larger says every arm takes the same steps (rounding)
#: The arms' local steps span at least this factor: the curve's regressor is the steps themselves.
STEPS_SPAN = 2.0
_STEPS_SLOPE = 2.0  # the prior of the log-signal's slope in the log steps: s ∝ k²


class SignalCurve:
    r"""The log-signal curve of R realizations over N arms (the module's notes).

    Parameters
    ----------
    spend : ndarray of shape (N,)
        Every arm's per-client spend (> 0), whose centred, scaled log is the curve's regressor
        until the clients' steps span :data:`STEPS_SPAN`.
    R : int
        Realizations.
    degree : {0, 1, 2}
        Degree of the curve in its regressor.
    discount, shape_discount : float
        Weight per round of age of the evidence on the level and on the shape (and on the
        clients' local steps).

    Attributes
    ----------
    fitted : ndarray of shape (R,), bool
        Whether a fit has found a positive level (before: no signal, :meth:`signal` is 0).
    steps : LocalSteps
        The clients' reported local steps by arm.
    """

    def __init__(self, spend: np.ndarray, R: int, degree: int, discount: float,
                 shape_discount: float) -> None:  # fmt: skip
        N = spend.shape[0]
        k = degree + 1
        self.discount, self.shape_discount = discount, shape_discount
        self._rows = np.arange(R)
        self._spend = spend
        log_spend = np.log(spend)
        span = float(log_spend.max() - log_spend.min())
        centred = (log_spend - log_spend.mean()) / (span if span > 0 else 1.0)
        self._spend_features = np.stack([centred**j for j in range(k)], axis=1)  # (N, k)
        # The curve's regressors, per realization (R, N, k): the scaled log-spend's powers, or
        # where the arms' steps span STEPS_SPAN, their centred log steps' (_set_regressors).
        self._features = np.repeat(self._spend_features[None], R, axis=0)
        self._steps_regime = np.zeros(R, bool)
        # Per arm, discounted: Σ q (weights), Σ q ŝ, Σ 1 (rounds).
        self.arm_q = np.zeros((R, N))
        self.arm_s = np.zeros((R, N))
        self.arm_rounds = np.zeros((R, N))
        # The same of the signals divided by the level at their round (the curve's shape),
        # discounted by shape_discount: the arms' relative gains outlive the level's drift.
        self._shape_q = np.zeros((R, N))
        self._shape_s = np.zeros((R, N))
        self._shape_ss = np.zeros((R, N))
        self._shape_rounds = np.zeros((R, N))
        self.beta = np.zeros((R, k))  # the fit: level and shape
        self.shape_beta = np.zeros((R, k))  # the shape's own fit (warm start)
        self._curve = np.zeros((R, k))  # the curve as the rule uses it (curve())
        self.fitted = np.zeros(R, bool)
        self.steps = LocalSteps(R, N, shape_discount)
        self._prior = np.zeros((R, k))  # steps_prior(): changes only as steps are noted

    # -- what the rounds tell ---------------------------------------------------------------------
    def told(self) -> bool:
        """Whether any round's signal has been added, in any realization."""
        return bool(np.any(self.arm_rounds > 0))

    def note_steps(self, arms: np.ndarray, k: np.ndarray) -> None:
        """A round's mean local steps ``k`` (R,) at ``arms`` (R,): the prior of the curve, and
        its regressor where the arms' steps span :data:`STEPS_SPAN`."""
        self.steps.note(self._rows, arms, k)
        self._set_regressors()
        self._prior = self._fit_steps_prior()

    def add(self, arms: np.ndarray, s: np.ndarray, q: np.ndarray) -> None:
        r"""A round's signal estimate ``s`` (R,) at ``arms`` (R,), of weight ``q`` (R,) (its
        inverse variance), then the fit. The level it is divided by for the shape is the fit's
        before this round (or the rounds' weighted mean signal before any fit); a realization
        without a positive level adds nothing to the shape."""
        lam = self.discount
        for arr in (self.arm_q, self.arm_s, self.arm_rounds):
            arr *= lam
        self.arm_q[self._rows, arms] += q
        self.arm_s[self._rows, arms] += q * s
        self.arm_rounds[self._rows, arms] += 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_signal = self.arm_s.sum(axis=1) / self.arm_q.sum(axis=1)
        level = np.where(self.fitted, np.exp(self.beta[:, 0]), mean_signal)
        level = np.where(np.isfinite(level) & (level > 0), level, np.nan)
        r, qr = s / level, q * level * level
        known = np.isfinite(r) & np.isfinite(qr)
        for arr in (self._shape_q, self._shape_s, self._shape_ss, self._shape_rounds):
            arr *= self.shape_discount
        rows, cols = self._rows[known], arms[known]
        self._shape_q[rows, cols] += qr[known]
        self._shape_s[rows, cols] += (qr * r)[known]
        self._shape_ss[rows, cols] += (qr * r * r)[known]
        self._shape_rounds[rows, cols] += 1.0
        self.fit()

    # -- the fit ----------------------------------------------------------------------------------
    def fit(self) -> None:
        """The curve's shape by Gauss–Newton on Σ_n Q_n (r̄_n − exp(φ_n·b))² over the
        level-normalised signals r (long memory, warm-started), then its level by least squares
        on the recent signals (short memory): the scale c minimising Σ_n Q_n (ŝ̄_n − c e^{φ_n·b})²."""
        Q = self._shape_q
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(Q > 0, self._shape_s / Q, 0.0)
        beta = self.shape_beta.copy()
        for _ in range(_NEWTON):
            mu = np.exp(np.clip(self.linear(beta), -700, 700))  # (R, N)
            A, J = self._normal_matrix(Q, beta)
            g = np.einsum("rn,rni,rn->ri", Q, J, mean - mu)
            step = np.linalg.solve(A, g[:, :, None])[:, :, 0]
            beta = beta + np.clip(step, -2.0, 2.0)  # damped: a step of at most e² in the signal
            beta[:, 1:] = np.clip(beta[:, 1:], -_SLOPE, _SLOPE)
        ok = np.all(np.isfinite(beta), axis=1) & np.any(Q > 0, axis=1)
        self.shape_beta = np.where(ok[:, None], beta, self.shape_beta)
        self.fit_level(np.exp(np.clip(self.linear(self.shape_beta, 1), -700, 700)))

    def fit_level(self, shape: np.ndarray) -> None:
        """The level c minimising Σ_n Q_n (ŝ̄_n − c·shape_n)² over the recent signals, for the
        arms' relative signals ``shape`` (R, N), with the shape's coefficients; then the curve.
        No positive signal on the whole (the rounds are all noise): the level is left as it was
        (none yet: no signal)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            c = (self.arm_s * shape).sum(axis=1) / (self.arm_q * shape * shape).sum(axis=1)
        positive = np.isfinite(c) & (c > 0)
        beta = self.shape_beta.copy()
        beta[:, 0] = np.log(np.where(positive, c, 1.0))
        self.beta = np.where(positive[:, None], beta, self.beta)
        self.fitted |= positive
        self._curve = self.shrunk()

    def _normal_matrix(self, Q: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The Gauss–Newton normal matrix (ridged) and Jacobian of exp(φ·b) at ``beta``."""
        mu = np.exp(np.clip(self.linear(beta), -700, 700))
        J = mu[:, :, None] * self._features
        A = np.einsum("rn,rni,rnj->rij", Q, J, J)
        A += (_RIDGE * np.maximum(np.trace(A, axis1=1, axis2=2), 1e-300))[:, None, None] * \
            np.eye(beta.shape[1])  # fmt: skip
        return A, J

    def shrunk(self) -> np.ndarray:
        """:meth:`curve` from the current fit and the shape's evidence."""
        beta = self.beta
        if beta.shape[1] == 1:
            return beta
        Q, sb = self._shape_q, self.shape_beta
        A, _ = self._normal_matrix(Q, sb)
        mu = np.exp(np.clip(self.linear(sb), -700, 700))
        rounds = self._shape_rounds.sum(axis=1)
        rss = self._shape_ss - 2.0 * mu * self._shape_s + mu * mu * Q  # per arm, Σ q (r − μ)²
        k = beta.shape[1]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            sigma2 = np.where(rounds > k + 1.0, np.maximum(rss.sum(axis=1), 0.0) /
                              np.maximum(rounds - k, 1.0), np.inf)  # fmt: skip
            var = sigma2[:, None] * np.diagonal(np.linalg.inv(A), axis1=1, axis2=2)
            prior = self.steps_prior()
            off = beta - prior
            keep = np.where(off != 0, np.maximum(0.0, 1.0 - var / (off * off)), 0.0)
        keep[:, 0] = 1.0  # the level is kept as fitted
        return prior + off * np.nan_to_num(keep)

    # -- reading ----------------------------------------------------------------------------------
    def curve(self) -> np.ndarray:
        r"""The log-signal curve's coefficients in (1, ℓ[, ℓ²]) as the rule uses them, shape
        (R, k): the fit, each coefficient of the log-spend shrunk towards its prior
        :math:`p_j` (:meth:`steps_prior`: 0 unless the clients report their local steps) by
        its evidence, :math:`p_j + (\hat b_j - p_j) \max(0, 1 - \widehat{\mathrm{Var}}\,\hat
        b_j / (\hat b_j - p_j)^2)`, so that a trend other than the prior's is followed only
        where the rounds show one (a flat signal, FedSGD, is not read as a slope from noise;
        clients whose larger shares buy more steps are not read as flat from noise). Computed
        once per fit."""
        return self._curve

    def signal(self) -> np.ndarray:
        """The fitted signal :math:`s_n = x_n^2` of every arm, shape (R, N) (0 before any)."""
        s = np.exp(np.clip(self.linear(self._curve), -700, 700))
        return np.where(self.fitted[:, None], s, 0.0)

    def gain2(self) -> np.ndarray | float:
        r""":math:`a_n^2 / a_0^2 = \exp(b_1\ell_n + b_2\ell_n^2)`, shape (R, N): the gain² of
        every arm relative to the centre of the regressor's range, from the curve (1 for a
        curve of degree 0)."""
        if self._curve.shape[1] == 1:
            return 1.0
        return np.exp(np.clip(self.linear(self._curve, 1), -50.0, 50.0))

    def linear(self, beta: np.ndarray, first: int = 0) -> np.ndarray:
        """Every arm's φ_n·b over the regressors from ``first`` on, shape (R, N), for
        coefficients ``beta`` of shape (R, k)."""
        if not self._steps_regime.any():  # every realization on the spend's shared regressors
            return (self._spend_features[:, first:] @ beta[:, first:].T).T
        return np.einsum("rnk,rk->rn", self._features[:, :, first:], beta[:, first:])

    # -- the local steps --------------------------------------------------------------------------
    def arm_steps(self) -> np.ndarray:
        r"""Every arm's local steps as the curve's steps regressor reads them, shape (R, N):
        :math:`\exp` of the arms' mean log steps (each round's mean weighted by its clients,
        discounted by ``shape_discount``), fitted non-decreasing in the spend (a larger share
        never buys fewer steps: isotonic regression, which pools an arm whose few clients
        happened to take more steps than a larger share's), interpolated in the log-spend
        between the arms told and constant beyond them (a share larger than any told is not
        assumed to buy more steps: a client's data can be exhausted); NaN in rows told none."""
        R, N = self.steps.clients.shape
        out = np.full((R, N), np.nan)
        ell = np.log(self._spend)
        order = np.argsort(ell, kind="stable")  # the arms by increasing spend
        for r in range(R):
            q = self.steps.clients[r, order]
            told = q > 0
            if not told.any():
                continue
            y = self.steps.clients_log[r, order][told] / q[told]
            fitted = isotonic_regression(y, weights=q[told], increasing=True).x
            out[r, order] = np.exp(np.interp(ell[order], ell[order][told], fitted))
        return out

    def _set_regressors(self) -> None:
        """Each realization's regressors of the curve: its arms' centred log steps (and their
        square) where those span :data:`STEPS_SPAN` or more, else the scaled log-spend's."""
        k = self._spend_features.shape[1]
        if k == 1:
            return
        log_steps = np.log(self.arm_steps())
        with np.errstate(invalid="ignore"):
            span = np.max(log_steps, axis=1) - np.min(log_steps, axis=1)  # NaN: none told
        self._steps_regime = span >= np.log(STEPS_SPAN) - 1e-12
        features = np.repeat(self._spend_features[None], self._rows.size, axis=0)
        for r in np.flatnonzero(self._steps_regime):
            centred = log_steps[r] - log_steps[r].mean()
            features[r] = np.stack([centred**j for j in range(k)], axis=1)
        self._features = features

    def steps_prior(self) -> np.ndarray:
        """The prior of the log-signal curve's coefficients, shape (R, k), as the clients'
        local steps noted so far give it (:meth:`_fit_steps_prior`)."""
        return self._prior.copy()

    def _fit_steps_prior(self) -> np.ndarray:
        r"""The prior of the log-signal curve's coefficients, shape (R, k): 0 for the level, and
        for the slope twice the slope of the clients' log local steps in the curve's regressor
        — to first order in the step size, k local steps move a client by :math:`\eta k\,g`,
        so that :math:`s_n \propto \bar k_n^2`. Where the arms' steps span
        :data:`STEPS_SPAN` or more, the regressor is their centred log steps
        (:meth:`arm_steps`) and the prior of its slope is 2 (of its square, 0); elsewhere the
        regressor is the scaled log-spend and the prior's slope is fitted by least squares over
        the arms told, each weighted by its rounds (0 until as many arms as the curve has
        coefficients have been told: a flat signal, FedSGD's)."""
        R, k = self.beta.shape
        prior = np.zeros((R, k))
        q = self.steps.weight
        told = q > 0
        if k == 1 or not told.any():
            return prior
        prior[self._steps_regime, 1] = _STEPS_SLOPE
        with np.errstate(invalid="ignore", divide="ignore"):
            y = np.where(told, self.steps.log / q, 0.0)
        X = self._spend_features  # (N, k): 1, ℓ[, ℓ²]
        for r in range(R):
            # the steps' regressor has its prior; the spend's needs as many arms as coefficients
            if self._steps_regime[r] or np.count_nonzero(told[r]) < k:
                continue
            A = (X * q[r][:, None]).T @ X
            b = X.T @ (q[r] * y[r])
            coef, *_ = np.linalg.lstsq(A, b, rcond=None)
            prior[r, 1:] = np.clip(2.0 * coef[1:], -_SLOPE, _SLOPE)
        return prior

    def steps_differ(self) -> np.ndarray:
        """Whether the clients' reported local steps differ between the arms, shape (R,): a
        non-zero :meth:`steps_prior` (False where none are told, or every arm takes the same
        steps: FedSGD, a fixed number of full-batch epochs)."""
        return np.any(np.abs(self.steps_prior()[:, 1:]) > _PRIOR_FLAT, axis=1)
