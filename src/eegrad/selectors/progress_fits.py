r"""The fits a rule of progress composes from its rounds, each a plain object with its own
state: the clients' local steps by arm (:class:`LocalSteps`), the curvature's costs from the
rounds' persistence (:class:`PersistenceFit`), the signal level's contraction
(:class:`LevelContraction`) and what of a round's deviation the next one keeps
(:class:`KeptFit`); the signal's curve is :class:`~eegrad.selectors.signal_curve.SignalCurve`.
:class:`~eegrad.selectors.progress_model.ProgressModel` holds one of each
(R realizations) and tells them its rounds; their models are in its module's notes and in
each class's docstring.
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["CONTRACTION_MEMORY", "CONTRACTION_ROUNDS", "KEEP_PRIOR_PAIRS", "KeptFit",
           "LevelContraction", "LocalSteps", "PersistenceFit", "nonnegative_minima", "nonnegative_minimum",
           "shrink_to_prior"]  # fmt: skip

#: Weight per round of age of the smoothed log-level (:class:`LevelContraction`).
CONTRACTION_MEMORY = 0.97
#: Rounds of ratios (or pairs) before a contraction (or what is kept) is used.
CONTRACTION_ROUNDS = 5
#: Pairs of rounds at "nothing forgotten" that :meth:`KeptFit.kept` is shrunk with.
KEEP_PRIOR_PAIRS = 3.0


class LocalSteps:
    r"""The clients' reported local steps :math:`\bar k` by arm, discounted a round by
    ``discount``: per arm Σ 1 and Σ log k̄ (the prior of the signal's curve), and the same
    weighted by the clients asked (a mean of n clients' steps counts n times: the steps'
    regressor).

    Attributes
    ----------
    weight, log, clients, clients_log : ndarray of shape (R, N)
        Σ 1, Σ log k̄, Σ n, Σ n log k̄ over the rounds told, discounted.
    """

    def __init__(self, R: int, N: int, discount: float) -> None:
        self.discount = discount
        self.weight = np.zeros((R, N))
        self.log = np.zeros((R, N))
        self.clients = np.zeros((R, N))
        self.clients_log = np.zeros((R, N))

    def note(self, rows: np.ndarray, arms: np.ndarray, k: np.ndarray) -> None:
        """A round's mean local steps ``k`` (R,) at ``arms`` (R,), n = arm + 1 clients."""
        for arr in (self.weight, self.log, self.clients, self.clients_log):
            arr *= self.discount
        self.weight[rows, arms] += 1.0
        self.log[rows, arms] += np.log(k)
        n = arms + 1.0
        self.clients[rows, arms] += n
        self.clients_log[rows, arms] += n * np.log(k)

    def told(self) -> np.ndarray:
        """Whether any round reported them, shape (R,)."""
        return np.any(self.weight > 0, axis=1)


def shrink_to_prior(fit: np.ndarray, normal: np.ndarray, sigma2: float,
                    prior: float) -> np.ndarray:  # fmt: skip
    r"""A least-squares fit of the curvature's costs, shape (k,), shrunk towards ``prior``
    by its evidence: each component :math:`\max(0, p + (\hat\Lambda_j - p)\max(0, 1 -
    \widehat{\mathrm{Var}}_j/(\hat\Lambda_j - p)^2))`, with :math:`\widehat{\mathrm{Var}}
    = \hat\sigma^2 \operatorname{diag} A^{-1}` from the pairs' weighted normal matrix
    ``normal`` (k, k) and residual variance ``sigma2`` (the fit itself where A is
    singular: no variance to weigh it by)."""
    if abs(np.linalg.det(normal)) <= 1e-12 * np.trace(normal) ** normal.shape[0]:
        return fit
    var = sigma2 * np.diag(np.linalg.inv(normal))
    off = fit - prior
    with np.errstate(invalid="ignore", divide="ignore"):
        keep = np.where(off != 0, np.maximum(0.0, 1.0 - var / (off * off)), 0.0)
    return np.maximum(prior + off * np.nan_to_num(keep), 0.0)


class PersistenceFit:
    r"""The curvature's costs :math:`(\Lambda_g, \Lambda_\xi)` from pairs of consecutive
    rounds: least squares through the origin of :math:`\hat z = 1 - \bar u_{t+1}\cdot\bar u_t
    /(x_{t+1}x_t)` against :math:`f = (2x_t, 2v_t/x_t)`, each pair weighted by its
    signal-to-noise, discounted a round (the progress module's notes).

    Attributes
    ----------
    A, b, zz, pairs : ndarray
        Σ w f fᵀ (R, 2, 2), Σ w f ẑ (R, 2), Σ w ẑ² (R,) and the pairs told (R,), discounted.
    """

    def __init__(self, R: int) -> None:
        self.A = np.zeros((R, 2, 2))
        self.b = np.zeros((R, 2))
        self.zz = np.zeros(R)
        self.pairs = np.zeros(R)

    def discount(self, lam: float) -> None:
        """Age the pairs told by a round."""
        for arr in (self.A, self.b, self.zz, self.pairs):
            arr *= lam

    def add(self, x0: np.ndarray, v0: np.ndarray, x: np.ndarray, v: np.ndarray,
            p: np.ndarray) -> None:  # fmt: skip
        """Fold a pair: the earlier round's signal length and noise (x0, v0), the later's (x,
        v) and their means' inner product p, each shape (R,)."""
        s0 = x0 * x0
        with np.errstate(invalid="ignore", divide="ignore"):
            zhat = 1.0 - p / (x * x0)
            f = np.stack([2.0 * x0, 2.0 * v0 / x0], axis=1)  # (R, 2)
            # each pair weighted by its signal-to-noise (a noisy pair's ẑ is noisier)
            w = (s0 / (s0 + v0)) * (x * x / (x * x + v))
        ok = np.isfinite(zhat) & np.all(np.isfinite(f), axis=1) & np.isfinite(w) & (w > 0)
        w = np.where(ok, w, 0.0)
        f = np.where(ok[:, None], f, 0.0)
        zhat = np.where(ok, zhat, 0.0)
        self.A += w[:, None, None] * f[:, :, None] * f[:, None, :]
        self.b += w[:, None] * f * zhat[:, None]
        self.zz += w * zhat * zhat
        self.pairs += ok

    def costs(self, prior: np.ndarray, shrink: np.ndarray) -> np.ndarray:
        r"""The costs, shape (R, 2): the non-negative least-squares fit, or ``prior`` (R,) each
        where the pairs have not shown them; where ``shrink`` (R,) and more than three pairs
        are told, the fit shrunk towards the prior by its evidence (:func:`shrink_to_prior`).
        :math:`\Lambda_\xi` is at least a thousandth of the larger."""
        out = np.repeat(prior[:, None], 2, axis=1)
        fits, found = nonnegative_minima(self.A, self.b)
        out[found] = fits[found]
        for r in np.flatnonzero(found & shrink & (self.pairs > 3)):
            fit = fits[r]
            rss = self.zz[r] - 2.0 * self.b[r] @ fit + fit @ self.A[r] @ fit
            sigma2 = max(float(rss), 0.0) / (self.pairs[r] - 2.0)
            out[r] = shrink_to_prior(fit, self.A[r], sigma2, prior[r])
        out[:, 1] = np.maximum(out[:, 1], 1e-3 * out.max(axis=1))
        return out


class LevelContraction:
    r""":math:`\hat\rho`, the signal level's factor a round: the level's logarithm smoothed
    (memory :data:`CONTRACTION_MEMORY`: one round's level is a noisy fit, which a round of few
    clients can put far off), and the discounted mean of the smoothed log-level's changes.

    Attributes
    ----------
    log_level : ndarray of shape (R,)
        The smoothed log-level (NaN before any).
    """

    def __init__(self, R: int) -> None:
        self.log_level = np.full(R, np.nan)
        self._sum = np.zeros(R)
        self._weight = np.zeros(R)
        self._rounds = np.zeros(R)

    def track(self, level: np.ndarray, ok: np.ndarray) -> None:
        """Fold a round's fitted level (R,), where ``ok``, into the smoothed log-level and its
        change into the contraction's mean."""
        lam = CONTRACTION_MEMORY
        with np.errstate(invalid="ignore", divide="ignore"):
            log_level = np.where(ok, np.log(level), np.nan)
        before = self.log_level
        first = ok & ~np.isfinite(before)
        smooth = np.where(first, log_level,
                          np.where(ok, lam * before + (1.0 - lam) * log_level, before))  # fmt: skip
        step = ok & ~first
        change = np.where(step, smooth - np.where(np.isfinite(before), before, 0.0), 0.0)
        self._sum = np.where(step, lam * self._sum + change, self._sum)
        self._weight = np.where(step, lam * self._weight + 1.0, self._weight)
        self._rounds += step
        self.log_level = smooth

    def contraction(self) -> np.ndarray:
        r""":math:`\hat\rho`, shape (R,), in [0.8, 0.9999] (NaN until :data:`CONTRACTION_ROUNDS`
        rounds have shown it)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.exp(self._sum / self._weight)
        rho = np.clip(rho, 0.8, 0.9999)
        return np.where(self._rounds >= CONTRACTION_ROUNDS, rho, np.nan)


class KeptFit:
    r""":math:`1 - \hat a`, what of a round's deviation from the optimum the next round keeps.
    On a quadratic whose rounds step :math:`\bar u_t = a\delta_t - \xi_t` (δ the deviation, ξ
    the round's noise, of variance :math:`v_t`), :math:`\delta_{t+1} = (1-a)\delta_t + \xi_t`
    and

    .. math::

        \mathbb E\,[\bar u_{t+1}\cdot\bar u_t] = (1 - a)\,\mathbb E\|\bar u_t\|^2 - v_t,

    so that :math:`1 - a` is estimated by :math:`\sum(\bar u_{t+1}\cdot\bar u_t + v_t) /
    \sum\|\bar u_t\|^2` over the pairs (discounted a round), with :math:`v_t` the round's own
    noise from its spread, shrunk towards 1 (nothing forgotten) as if :data:`KEEP_PRIOR_PAIRS`
    pairs had shown 1: a few noisy pairs do not swing it. :meth:`bound` is its upper
    confidence bound, the ratio estimator's standard error from the pairs' residuals."""

    def __init__(self, R: int) -> None:
        self._num = np.zeros(R)  # Σ (ū_{t+1}·ū_t + v_t), discounted
        self._den = np.zeros(R)  # Σ ‖ū_t‖², discounted
        self._weight = np.zeros(R)  # Σ 1, discounted (the pairs' evidence)
        self._pairs = np.zeros(R)  # the pairs told (not discounted)
        # Σ x², Σ xy, Σ y² of the pairs (x = ū_{t+1}·ū_t + v_t, y = ‖ū_t‖²), each discounted
        # by the square of the discount: the residuals' sum of squares under the weights
        self._moments = np.zeros((3, R))
        self._last: tuple[np.ndarray, np.ndarray] | None = None  # the last round's (‖ū‖², v)

    def forget(self) -> None:
        """Break the chain: the next round is paired with none."""
        self._last = None

    def note(self, y: np.ndarray, v_round: np.ndarray, p: np.ndarray | None,
             lam: float) -> None:  # fmt: skip
        """A round's ‖ū‖² ``y`` and own noise ``v_round`` (kept for the next pair), and its
        persistence ``p`` with the last round, whose pair is folded (discount ``lam``)."""
        last, self._last = self._last, (y, v_round)
        if p is None or last is None:
            return
        y0, v0 = last
        ok = np.isfinite(p) & np.isfinite(v0) & (y0 > 0)
        x, y = np.where(ok, p + v0, 0.0), np.where(ok, y0, 0.0)
        self._num = np.where(ok, lam * self._num + x, self._num)
        self._den = np.where(ok, lam * self._den + y, self._den)
        self._weight = np.where(ok, lam * self._weight + 1.0, self._weight)
        self._moments = np.where(ok, lam * lam * self._moments + np.stack([x * x, x * y, y * y]),
                                 self._moments)  # fmt: skip
        self._pairs += ok

    def kept(self) -> np.ndarray:
        r""":math:`1 - \hat a`, shape (R,), in [0, 1] (NaN until :data:`CONTRACTION_ROUNDS`
        pairs are told)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            prior = KEEP_PRIOR_PAIRS * self._den / self._weight  # pairs of a mean ‖ū_t‖²
            keep = np.clip((self._num + prior) / (self._den + prior), 0.0, 1.0)
        return np.where(self._pairs >= CONTRACTION_ROUNDS, keep, np.nan)

    def bound(self, z: float) -> np.ndarray:
        r"""An upper confidence bound of :math:`1 - \hat a`, shape (R,), in [0, 1]:
        :meth:`kept` plus ``z`` standard errors of the ratio estimator,
        :math:`\sqrt{\sum_t w_t^2 (x_t - \hat k y_t)^2} / (\sum_t w_t y_t + \text{prior})`
        (w the discount's weights, x and y each pair's numerator and denominator terms) — what
        a plan that must not over-trust the forgetting of early rounds takes (NaN where
        :meth:`kept` is)."""
        k = self.kept()
        xx, xy, yy = self._moments
        with np.errstate(invalid="ignore", divide="ignore"):
            prior = KEEP_PRIOR_PAIRS * self._den / self._weight
            rss = np.maximum(xx - 2.0 * k * xy + k * k * yy, 0.0)
            se = np.sqrt(rss) / (self._den + prior)
        return np.where(np.isfinite(k), np.clip(k + z * se, 0.0, 1.0), np.nan)


def nonnegative_minimum(A: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """argmin over λ >= 0 of λᵀAλ − 2bᵀλ for a small k × k normal matrix A (positive
    semi-definite), shape (k,) (None: no evidence). Every face of the orthant is tried: the
    unconstrained minimum over each subset of free components (a subset whose block of A is
    singular is skipped), the others at 0; the feasible one of least value wins (first in the
    order: all free, then fewer). One row of :func:`nonnegative_minima`."""
    fit, found = nonnegative_minima(A[None], b[None])
    return fit[0] if found[0] else None


def nonnegative_minima(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nonnegative_minimum` of every row at once: A shape (R, k, k), b shape (R, k);
    returns the minimisers, shape (R, k) (0 where none), and where there was evidence, shape
    (R,) (a finite A of positive trace). Each face of the orthant is solved for all rows in
    one batched call, so a Monte Carlo run of R realizations costs no Python loop over them."""
    R, k = b.shape
    found = np.all(np.isfinite(A), axis=(1, 2)) & (np.trace(A, axis1=1, axis2=2) > 0)
    A = np.where(found[:, None, None], A, 0.0)
    best = np.zeros((R, k))
    first = np.full(R, np.inf)  # the least value among the feasible faces tried so far
    for size in range(k, 0, -1):
        for free in itertools.combinations(range(k), size):
            idx = list(free)
            block = A[:, idx][:, :, idx]
            det = np.linalg.det(block)
            ok = found & (np.abs(det) > 1e-12 * np.trace(block, axis1=1, axis2=2) ** size)
            lam = np.zeros((R, k))
            if size == 1:
                with np.errstate(invalid="ignore", divide="ignore"):
                    lam[:, idx] = b[:, idx] / block[:, :1, 0]
            else:
                safe = np.where(ok[:, None, None], block, np.eye(size))
                lam[:, idx] = np.linalg.solve(safe, b[:, idx][..., None])[..., 0]
            v = np.einsum("ri,rij,rj->r", lam, A, lam) - 2.0 * np.einsum("ri,ri->r", b, lam)
            take = ok & np.all(lam >= 0, axis=1) & (v < first)
            best[take], first[take] = lam[take], v[take]
    best[first > 0] = 0.0  # the last candidate, λ = 0 (value 0), wins where no face is below it
    return best, found
