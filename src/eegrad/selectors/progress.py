r"""A rule that chooses the n whose round makes the most progress, not only the least noise.

:class:`~eegrad.SpreadThompson` picks the n whose round mean :math:`\bar u` has the least
variance :math:`v_n`. That is the paper's model: every arm returns an unbiased estimate of the
same gradient, and arms differ only in noise. With local training they also differ in how far
an update goes: a client whose share buys more samples takes more local steps (mini-batches,
momentum), so the expected update :math:`\mu_n = \mathbb E\,\bar u` of a round of n clients
depends on n. A rule that minimises the noise alone then prefers the rounds that barely move.

**The progress of a round.** Write the round's step :math:`w \leftarrow w - \bar u` with
:math:`\mathbb E\,\bar u = \mu_n = a_n d` (the arms' expected updates share a direction d,
a descent direction; :math:`a_n \ge 0` is the arm's gain) and noise of trace :math:`v_n`. On a
local quadratic model with curvature B along d, taken to be also the curvature seen by the
noise, the expected decrease is

.. math::

    D_n = A\,x_n - \tfrac{B}{2}\,(x_n^2 + v_n), \qquad x_n = \|\mu_n\|,\; A = \nabla F \cdot
    d/\|d\|,

the first-order gain of a step of length :math:`x_n` less the curvature's cost of its mean
square :math:`m_n = x_n^2 + v_n`. The ratio :math:`B/A` is unknown; the rule takes the largest
update the arms make, :math:`x^* = \max_n x_n`, as the step that a noiseless quadratic would
take (:math:`A/B = x^*`: the user's local training, at its most, is not too long a step). Then

.. math::

    D_n \propto x_n - \frac{x_n^2 + v_n}{2 x^*}.

Where every arm makes the same expected update (one local gradient step, FedSGD: the paper's
model), :math:`x_n = x^*` and the rule minimises :math:`v_n` — the spread rule's choice. Where the
updates differ, a larger one is worth its extra noise as long as :math:`x_n - m_n/(2x^*)` grows.

**The signal.** The server sees :math:`\|\bar u\|^2`, whose expectation is :math:`x_n^2 + v_n`;
less the fitted :math:`\hat v_n` it is an unbiased estimate of the signal :math:`x_n^2`. Told each
round (:meth:`ProgressThompson.tell_signal`), the signal is fitted as a quadratic in the log of
the per-client spend :math:`s_n = (B - D(n))/n` — one curve for all arms, so that arms never pulled
are predicted and a flat signal (FedSGD) is learnt as flat — by discounted least squares (the
evidence ages by ``discount`` a round, as the noise's), each round weighted by the inverse
square of its mean square predicted before the round (the variance of :math:`\|\bar u\|^2` grows
as its square).

**Choice.** The spread rule's warm-up, then posterior sampling: draw the noise's parameters as
:class:`~eegrad.SpreadThompson` does and the signal's curve from its approximate posterior,
predict :math:`x_n` and :math:`v_n` for every arm and pull :math:`\arg\max_n D_n` (ties to the largest
n). Until a signal has been told, the rule is :class:`~eegrad.SpreadThompson`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import InvalidParameterTypeError, check_array, check_integer, fail
from .base import ProtocolError
from .registry import register_rule
from .spread import SpreadThompson

__all__ = ["ProgressThompson"]

_RIDGE = 1e-8  # relative ridge on the signal's normal matrix


@register_rule("progress_thompson", label="Thompson on the progress of a round")
class ProgressThompson(SpreadThompson):
    r"""Posterior sampling on the expected decrease of a round: its signal and its noise.

    The noise is :class:`~eegrad.SpreadThompson`'s fit from the parts of each pull (same
    parameters); the signal :math:`x_n^2 = \|\mathbb E\,\bar u\|^2` is told with
    :meth:`tell_signal` (the round mean's squared norm; :class:`~eegrad.flower.EEGradStrategy`
    tells it every round). The module's notes give the model.

    Parameters
    ----------
    discount, population, spend, seed, release_noise, noise_order
        As :class:`~eegrad.SpreadThompson`; ``discount`` ages the signal's evidence too.
    signal_degree : {0, 1, 2}
        Degree of the signal's curve in the centred log-spend (0: the same signal for every
        arm; 1, the default: a signal that grows or falls with the share; 2: with a bend).
    sample_signal : bool
        Draw the signal's curve from its approximate posterior each round (more exploration),
        or use its fit (default: the noise's draw explores).

    Examples
    --------
    >>> import numpy as np
    >>> from eegrad import ProgressThompson
    >>> rule = ProgressThompson(population=20, noise_order=2)
    >>> rule.init(1, 20, 3)
    >>> rule.ask(1)  # the spread rule's warm-up starts with all 20 clients
    array([19])
    """

    uses_signal = True

    def __init__(self, discount: float = 0.9, population: int | None = None, spend: Any = None,
                 seed: int = 0, release_noise: Any = None, noise_order: int = 1,
                 signal_degree: int = 1, sample_signal: bool = False) -> None:  # fmt: skip
        super().__init__(discount, population, spend, seed, release_noise, noise_order)
        owner = "ProgressThompson"
        self.signal_degree = check_integer(signal_degree, "signal_degree", owner, ge=0)
        if self.signal_degree > 2:
            raise fail("signal_degree", owner, "0, 1 or 2", signal_degree)
        if not isinstance(sample_signal, bool | np.bool_):
            raise InvalidParameterTypeError(f"The 'sample_signal' parameter of {owner} must be a "
                                            f"bool. Got {sample_signal!r} instead.")  # fmt: skip
        self.sample_signal = bool(sample_signal)

    def get_params(self) -> dict[str, Any]:
        """The spread rule's parameters, ``signal_degree`` and ``sample_signal``."""
        return {**super().get_params(), "signal_degree": self.signal_degree,
                "sample_signal": self.sample_signal}  # fmt: skip

    # -- lifecycle -------------------------------------------------------------------------------
    def init(self, R, N, d, truth=None, streams=None) -> None:
        """Start a run: no evidence of noise or signal yet."""
        super().init(R, N, d, truth, streams)
        k = self.signal_degree + 1
        self._signal_normal = np.zeros((R, k, k))  # Σ λ^age q φ φᵀ
        self._signal_moment = np.zeros((R, k))  # Σ λ^age q φ ŝ
        self._signal_yy = np.zeros(R)  # Σ λ^age q ŝ²
        self._signal_w = np.zeros(R)  # Σ λ^age q
        self._signal_rounds = np.zeros(R)  # discounted count of rounds told
        log_spend = np.log(self._spend)
        span = float(log_spend.max() - log_spend.min())
        centred = (log_spend - log_spend.mean()) / (span if span > 0 else 1.0)
        self._features = np.stack([centred**j for j in range(k)], axis=1)

    # -- tell --------------------------------------------------------------------------------------
    def tell_signal(self, arms: Any, mean_norm2: Any) -> None:
        r"""Tell the squared norm :math:`\|\bar u\|^2` of the last pull's mean (after its parts
        were told), shape (R,): :math:`\|\bar u\|^2 - \hat v_n` is an unbiased estimate of the
        arm's signal :math:`x_n^2`."""
        if self._shape is None:
            raise ProtocolError(f"{self!r}: tell_signal() before init(R, N, d)")
        R, N, _ = self._shape
        owner = "ProgressThompson.tell_signal"
        arms = np.asarray(arms)
        if arms.shape != (R,) or not np.issubdtype(arms.dtype, np.integer) or \
                np.any((arms < 0) | (arms >= N)):  # fmt: skip
            raise fail("arms", owner, f"R = {R} arm indices in 0..{N - 1}", arms)
        y = check_array(mean_norm2, "mean_norm2", owner, shape=(R,))
        if np.any(y < 0):
            raise fail("mean_norm2", owner, "squared norms >= 0", y)
        v = self.predicted()[self._rows, arms]
        phi = self._features[arms]  # (R, k)
        # Var ‖ū‖² grows as the square of its expectation, predicted before this round (a
        # weight that read the round's own ‖ū‖² would bias the fit down).
        m = v + (self.signal()[self._rows, arms] if np.any(self._signal_rounds > 0) else 0.0)
        q = 1.0 / np.maximum(m * m, 1e-300)
        s = y - v
        lam = self.discount
        for arr in (self._signal_normal, self._signal_moment, self._signal_yy, self._signal_w,
                    self._signal_rounds):  # fmt: skip
            arr *= lam
        self._signal_normal += q[:, None, None] * phi[:, :, None] * phi[:, None, :]
        self._signal_moment += q[:, None] * phi * s[:, None]
        self._signal_yy += q * s * s
        self._signal_w += q
        self._signal_rounds += 1.0

    # -- the fit -------------------------------------------------------------------------------------
    def signal_fit(self) -> tuple[np.ndarray, np.ndarray]:
        """The signal curve's coefficients in (1, ℓ[, ℓ²]) of the centred log-spend ℓ, shape
        (R, k), and their approximate posterior covariance, shape (R, k, k)."""
        A = self._signal_normal.copy()
        k = A.shape[-1]
        scale = np.maximum(np.trace(A, axis1=1, axis2=2), 1e-300)
        A += (_RIDGE * scale)[:, None, None] * np.eye(k)
        Ainv = np.linalg.inv(A)
        beta = np.einsum("rij,rj->ri", Ainv, self._signal_moment)
        rss = (self._signal_yy - 2.0 * np.einsum("ri,ri->r", beta, self._signal_moment)
               + np.einsum("ri,rij,rj->r", beta, self._signal_normal, beta))  # fmt: skip
        rounds = self._signal_rounds
        # Residual variance per unit weight with k coefficients fitted; until more than k + 1
        # rounds, the raw second moment (wide on purpose).
        phi = np.where(rounds > k + 1.0, np.maximum(rss, 0.0) / np.maximum(rounds - k, 1.0),
                       self._signal_yy / np.maximum(rounds, 1.0))  # fmt: skip
        return beta, phi[:, None, None] * Ainv

    def signal_curve(self) -> np.ndarray:
        r"""The signal curve's coefficients as the rule uses them, shape (R, k): the fit, each
        coefficient of the log-spend shrunk towards 0 by its evidence,
        :math:`\hat\beta_j \max(0, 1 - \widehat{\mathrm{Var}}\,\hat\beta_j / \hat\beta_j^2)`,
        so that a trend is followed only where the rounds show one (a flat signal, FedSGD,
        is not read as a slope from noise)."""
        beta, cov = self.signal_fit()
        var = np.diagonal(cov, axis1=1, axis2=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            keep = np.where(beta != 0, np.maximum(0.0, 1.0 - var / (beta * beta)), 0.0)
        keep[:, 0] = 1.0  # the level is kept as fitted
        return beta * keep

    def signal(self) -> np.ndarray:
        """The fitted signal :math:`x_n^2` of every arm, shape (R, N) (>= 0)."""
        return np.maximum(np.einsum("nk,rk->rn", self._features, self.signal_curve()), 0.0)

    @staticmethod
    def progress(signal: np.ndarray, noise: np.ndarray) -> np.ndarray:
        r"""The expected decrease :math:`x_n - (x_n^2 + v_n)/(2x^*)` of every arm (up to a
        positive factor), from signals :math:`x_n^2` and noises :math:`v_n`, shape (R, N); where
        no arm has a signal, :math:`-v_n` (the spread rule's choice)."""
        x = np.sqrt(np.maximum(signal, 0.0))
        top = x.max(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            d = x - (signal + noise) / (2.0 * top)
        return np.where(top > 0, d, -noise)

    # -- ask ---------------------------------------------------------------------------------------
    def _select(self, t: int) -> np.ndarray:
        R, N, _ = self._shape
        if N == 1 or self.rounds < len(self.warmup) or not np.any(self._signal_rounds > 0):
            return super()._select(t)
        theta, cov = self.fit()
        beta, bcov = self.signal_fit()
        k, j = theta.shape[-1], beta.shape[-1]
        if self.streams is None:
            z = self._own_rng.standard_normal((R, k + j))
        else:
            z = self.streams.per_block(
                lambda gen, sl: gen.standard_normal((sl.stop - sl.start, k + j)),
                np.empty((R, k + j)))  # fmt: skip
        noise = self._with_release(np.einsum("rnk,rk->rn", self.coefficients(),
                                             self._draw(theta, cov, z[:, :k])))  # fmt: skip
        if not self.sample_signal:
            beta = self.signal_curve()
        else:
            jitter = 1e-12 * np.maximum(np.trace(bcov, axis1=1, axis2=2), 1e-300)
            L = np.linalg.cholesky(bcov + jitter[:, None, None] * np.eye(j))
            beta = beta + np.einsum("rij,rj->ri", L, z[:, k:])
        signal = np.maximum(np.einsum("nk,rk->rn", self._features, beta), 0.0)
        d = self.progress(signal, noise)
        return (N - 1 - np.argmax(d[:, ::-1], axis=1)).astype(np.int64)  # ties: largest n

    def predicted_progress(self) -> np.ndarray:
        """The fitted expected decrease of every arm (up to a positive factor), shape (R, N)."""
        return self.progress(self.signal(), self.predicted())
