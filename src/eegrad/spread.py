r"""What the n parts of one pull say about the variance of their weighted mean.

A federated server (or a data-parallel trainer) receives the n updates :math:`g_1, \dots, g_n`
of the clients (workers) it asked, each with a weight :math:`\omega_i` — the samples it used —
before it averages them into :math:`\bar g = \sum_i p_i g_i`, :math:`p_i = \omega_i / \sum_j
\omega_j`. The paper's mini-batch oracle MBO(n) returns only :math:`\bar g`; its parts carry,
within one round and at one iterate w, evidence about the variance of :math:`\bar g`.

**The client-sampling model.** :math:`g_i = \mu_{c_i} + e_i`: the n clients :math:`c_i` are drawn
uniformly *without replacement* from a population of K (``population=None``: K = ∞, i.e. drawn
with replacement or from a large population); the target is the population's mean gradient
:math:`\bar\mu = \frac1K \sum_k \mu_k`; the device noise :math:`e_i` is independent, of mean
zero, with :math:`\mathbb E\|e_i\|^2 = \tau^2 / \omega_i` (a gradient on :math:`\omega_i`
samples); the weights do not depend on which clients were drawn. With the between-client
variance :math:`S^2 = \frac{1}{K-1}\sum_k \|\mu_k - \bar\mu\|^2`,

.. math::

    \mathbb E\|g_i - g_j\|^2 = 2 S^2 + \tau^2 \left(\frac{1}{\omega_i} + \frac{1}{\omega_j}\right)
    \quad (i \ne j),

.. math::

    v = \mathbb E\|\bar g - \bar\mu\|^2
      = S^2 \left(\sum_i p_i^2 - \frac1K\right) + \tau^2 \sum_i \frac{p_i^2}{\omega_i}.

The :math:`-S^2/K` term is the finite-population correction: asking all K clients removes the
between-client part. It is the paper's :math:`\sigma_n^2 S(w)` (the trace of the covariance of
MBO(n)'s output) with between-client heterogeneity included, which the paper's model, with
i.i.d. gradients, cannot see.

**Several local steps on the same samples.** :math:`\tau^2/\omega` is exact for a gradient on
:math:`\omega` samples (one local step, FedSGD): the update is linear in the samples' mean. E
local epochs over the same :math:`\omega` samples make the update a smooth nonlinear function
of the samples' means (their gradients *and* curvatures); expanded to second order in the
sampling deviations, which are :math:`O(\omega^{-1/2})`, its noise is

.. math::

    \mathbb E\|e_i\|^2 = \frac{\tau^2}{\omega_i} + \frac{\kappa^2}{\omega_i^2}
    + O(\omega_i^{-3}),

with :math:`\kappa^2 = 0` for one step (``order=2`` in :func:`pair_design`,
:func:`sums_design` and :func:`variance_coefficients`; a third column, of :math:`\kappa^2`, in
each). The same expansion gives the update a bias :math:`\beta/\omega_i`, common to the
clients: no spread can show it, and the model leaves it out.

Two statistics of one round:

* :func:`pair_statistics` — :math:`y = \sum_{i<j}\|g_i - g_j\|^2` and its design
  :math:`x = (n(n-1),\ (n-1)\sum_i 1/\omega_i)`, with :math:`\mathbb E\,y = x \cdot (S^2, \tau^2)`
  exactly under the model (with or without replacement). Rounds of different n (or different
  weights) separate :math:`S^2` from :math:`\tau^2`; :class:`eegrad.SpreadThompson` fits them
  across rounds and arms.
* :func:`spread_variance` — an estimate of v from the round alone, without a model of how the
  parts' covariances depend on their weights (see its notes for the exact conditions).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._validation import InvalidParameterError, check_integer, fail

__all__ = [
    "SpreadSums",
    "check_noise_order",
    "check_parts",
    "check_population",
    "check_weights",
    "equal_weight_coefficients",
    "inverse_weights",
    "pair_design",
    "pair_statistics",
    "pair_sum",
    "predicted_variance",
    "spread_sums",
    "spread_variance",
    "sums_design",
    "variance_coefficients",
    "weighted_mean",
    "weighted_spread",
]


def check_weights(weights: Any, owner: str, shape: tuple[int, ...]) -> np.ndarray:
    """Validate the weights of parts (float64): of ``shape``, finite, >= 0, and in every round
    (the last axis) not all zero. A part of weight 0 is absent (padding, a failed client)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != shape:
        raise fail("weights", owner, f"of shape {shape}: one per part (one weight per part)",
                   f"shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise fail("weights", owner, "finite and >= 0 (the samples each part used)", w)
    if not np.all(np.any(w > 0, axis=-1)):
        raise fail("weights", owner, "not all zero in any round", w)
    return w


def check_parts(parts: Any, weights: Any, owner: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate one round's parts (n, d) and weights (n,) (float64 copies); raise a clear error.

    Weights as :func:`check_weights`; parts must be finite.
    """
    g = np.asarray(parts, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] < 1:
        raise fail("parts", owner, "an array of shape (n, d) with n >= 1", f"shape {g.shape}")
    w = check_weights(weights, owner, (g.shape[0],))
    if not np.all(np.isfinite(g)):
        bad = np.flatnonzero(~np.all(np.isfinite(g), axis=1)).tolist()
        raise InvalidParameterError(
            f"The 'parts' parameter of {owner} must be finite (no NaN or Inf). Got NaN or Inf "
            f"in part(s) {bad} instead."
        )
    return g, w


def check_population(population: Any, owner: str) -> int | None:
    """K, the number of clients the parts are drawn from: an integer >= 2, or None."""
    return None if population is None else check_integer(population, "population", owner, ge=2)


def weighted_mean(parts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    r"""The round's output :math:`\bar g = \sum_i p_i g_i`, :math:`p_i = \omega_i/\sum_j\omega_j`.

    ``parts`` (..., n, d) and ``weights`` (..., n); leading axes are batch axes.
    """
    p = weights / weights.sum(axis=-1, keepdims=True)
    return np.einsum("...n,...nd->...d", p, parts)


def pair_statistics(parts: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The pair sum of one round and its design: :math:`\mathbb E\,y = x\cdot(S^2, \tau^2)`.

    .. math::

        y = \sum_{i<j} \|g_i - g_j\|^2 = n \sum_i \|g_i - \tilde g\|^2, \qquad
        x = \Bigl(n(n-1),\ (n-1) \sum_i \frac{1}{\omega_i}\Bigr),

    :math:`\tilde g` the unweighted mean of the parts present (weight > 0), n their number.

    Parameters
    ----------
    parts : ndarray, shape (..., m, d)
        The parts; those of weight 0 are absent (padding).
    weights : ndarray, shape (..., m)
        Samples used by each part, >= 0.

    Returns
    -------
    y : ndarray, shape (...)
    x : ndarray, shape (..., 2)
        Both zero for a round with fewer than two parts.
    """
    return pair_sum(parts, weights), pair_design(weights)


def pair_sum(parts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    r""":math:`y = \sum_{i<j}\|g_i - g_j\|^2` over the parts of weight > 0, shape (...)."""
    present = weights > 0
    n = present.sum(axis=-1).astype(np.float64)
    centre = np.einsum("...m,...md->...d", present, parts) / np.maximum(n, 1.0)[..., None]
    dev = np.where(present[..., None], parts - centre[..., None, :], 0.0)
    return n * np.einsum("...md,...md->...", dev, dev)


def weighted_spread(parts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    r""":math:`Q = \sum_i \omega_i\|g_i - \bar g\|^2` about the weighted mean :math:`\bar g`
    (parts of weight 0 are absent), shape (...): the statistic :func:`sums_design` gives the
    design of, here from the parts themselves."""
    dev = parts - weighted_mean(parts, weights)[..., None, :]
    return np.einsum("...m,...md,...md->...", weights, dev, dev)


def inverse_weights(weights: np.ndarray) -> np.ndarray:
    r""":math:`1/\omega_i` of every part present (weight > 0), 0 for an absent one, shape of
    ``weights``."""
    present = weights > 0
    return np.where(present, 1.0 / np.where(present, weights, 1.0), 0.0)


def pair_design(weights: np.ndarray, order: int = 1) -> np.ndarray:
    r"""The design :math:`x = (n(n-1), (n-1)\sum_i 1/\omega_i)` of :func:`pair_sum`, shape
    (..., 2), from the weights alone (0 = absent). ``order=2`` appends the column
    :math:`(n-1)\sum_i 1/\omega_i^2` of :math:`\kappa^2` (the module's notes: a noise
    :math:`\tau^2/\omega + \kappa^2/\omega^2`), shape (..., 3)."""
    present = weights > 0
    n = present.sum(axis=-1).astype(np.float64)
    inv = inverse_weights(weights)
    columns = [n * (n - 1.0), (n - 1.0) * inv.sum(axis=-1)]
    if check_noise_order(order, "pair_design") == 2:
        columns.append((n - 1.0) * (inv * inv).sum(axis=-1))
    return np.stack(columns, axis=-1)


def check_noise_order(order: Any, owner: str, name: str = "order") -> int:
    """The noise's order in 1/ω, 1 (τ²/ω) or 2 (τ²/ω + κ²/ω²); else an error naming ``name``."""
    order = check_integer(order, name, owner, ge=1)
    if order > 2:
        raise fail(name, owner, "1 (noise τ²/ω) or 2 (τ²/ω + κ²/ω²)", order)
    return order


class SpreadSums(NamedTuple):
    r"""A round's parts summed, as secure aggregation reveals them: n, :math:`W = \sum\omega_i`,
    :math:`W_2 = \sum\omega_i^2`, :math:`\sum\omega_i u_i` (an array, or a list of a model's
    arrays) and :math:`\sum\omega_i\|u_i\|^2`. Under the client-sampling model the weighted
    spread :math:`Q` has :math:`\mathbb E\,Q = x\cdot(S^2, \tau^2)` with
    :math:`x = (W - W_2/W,\ n - 1)` (with or without replacement), and the round's variance
    coefficients are :math:`(W_2/W^2 - 1/K,\ 1/W)`: all from sums (:func:`sums_design`).
    ``inverse_weight_sum`` :math:`\sum 1/\omega_i` (None where the clients did not send it)
    adds the design :math:`\sum 1/\omega_i - n/W` and coefficient :math:`n/W^2` of the
    second-order noise :math:`\kappa^2/\omega^2` (the module's notes)."""

    n: int
    total_weight: float
    total_weight2: float
    weighted_sum: Any
    weighted_squares: float
    inverse_weight_sum: float | None = None

    def mean(self) -> Any:
        r""":math:`\bar u = \sum\omega_i u_i / W`, the round's output (the sum's type)."""
        if isinstance(self.weighted_sum, list | tuple):
            return [a / self.total_weight for a in self.weighted_sum]
        return self.weighted_sum / self.total_weight

    def weighted_spread(self) -> float:
        r""":math:`Q = \sum\omega_i\|u_i - \bar u\|^2 = \sum\omega_i\|u_i\|^2 -
        \|\sum\omega_i u_i\|^2 / W` (float64; at least 0 against rounding)."""
        parts = self.weighted_sum if isinstance(self.weighted_sum, list | tuple) else \
            [self.weighted_sum]  # fmt: skip
        norm2 = sum(float(np.sum(np.square(np.asarray(a), dtype=np.float64))) for a in parts)
        return max(float(self.weighted_squares) - norm2 / float(self.total_weight), 0.0)

    def evidence(self, spread: float | None = None) -> dict[str, Any]:
        """The sums as the fields of a round's record for one realization
        (:class:`~eegrad.selectors.evidence.RoundEvidence`: ``weighted_spread``, ``parts``,
        ``total_weight``, ``total_weight2``, ``inverse_weight_sum``); ``spread``: their
        :meth:`weighted_spread` where the caller has it (a pass over the sum saved)."""
        inverse = self.inverse_weight_sum
        spread = self.weighted_spread() if spread is None else spread
        return {"weighted_spread": np.array([spread]),
                "parts": np.array([self.n]), "total_weight": np.array([self.total_weight]),
                "total_weight2": np.array([self.total_weight2]),
                "inverse_weight_sum": None if inverse is None else np.array([inverse])}


def sums_design(n: Any, total_weight: Any, total_weight2: Any, population: int | None = None,
                inverse_weight_sum: Any = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    r"""The design :math:`x = (W - W_2/W, n - 1)` of the weighted spread and the variance
    coefficients :math:`(W_2/W^2 - 1/K, 1/W)`, each of shape (..., 2), from sums alone
    (:class:`SpreadSums`). With ``inverse_weight_sum`` :math:`\sum 1/\omega_i`, the columns
    of :math:`\kappa^2` are appended, :math:`\sum 1/\omega_i - n/W` and :math:`n/W^2`
    (shape (..., 3)): for a noise of variance :math:`\kappa^2/\omega_i^2`,
    :math:`\mathbb E\,Q = \sum_i \omega_i\sigma_i^2 - \sum_i\omega_i^2\sigma_i^2/W`."""
    W = np.asarray(total_weight, dtype=np.float64)
    W2 = np.asarray(total_weight2, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    fpc = 0.0 if population is None else 1.0 / population
    x, coef = [W - W2 / W, n - 1.0], [W2 / (W * W) - fpc, 1.0 / W]
    if inverse_weight_sum is not None:
        x.append(np.asarray(inverse_weight_sum, dtype=np.float64) - n / W)
        coef.append(n / (W * W))
    return np.stack(x, axis=-1), np.stack(coef, axis=-1)


def spread_sums(parts: np.ndarray, weights: np.ndarray) -> SpreadSums:
    """The :class:`SpreadSums` of one round's parts (m, d) with weights (m,) (0 = absent):
    what a server that sees only sums receives."""
    w = np.asarray(weights, dtype=np.float64)
    g = np.asarray(parts, dtype=np.float64)
    present = w > 0
    return SpreadSums(n=int(present.sum()), total_weight=float(w.sum()),
                      total_weight2=float((w * w).sum()), weighted_sum=w @ g,
                      weighted_squares=float(np.einsum("m,md,md->", w, g, g)),
                      inverse_weight_sum=float((1.0 / w[present]).sum()))  # fmt: skip


def variance_coefficients(weights: np.ndarray, population: int | None = None,
                          order: int = 1) -> np.ndarray:  # fmt: skip
    r"""The coefficients :math:`(\sum_i p_i^2 - 1/K,\ \sum_i p_i^2/\omega_i)` of
    :math:`(S^2, \tau^2)` in the variance of a round with ``weights`` (..., m) (0 = absent),
    shape (..., 2); ``population=None``: K = ∞. ``order=2`` appends
    :math:`\sum_i p_i^2/\omega_i^2`, the coefficient of :math:`\kappa^2` (shape (..., 3))."""
    p = weights / weights.sum(axis=-1, keepdims=True)
    inv = inverse_weights(weights)
    fpc = 0.0 if population is None else 1.0 / population
    columns = [(p * p).sum(axis=-1) - fpc, (p * p * inv).sum(axis=-1)]
    if check_noise_order(order, "variance_coefficients") == 2:
        columns.append((p * p * inv * inv).sum(axis=-1))
    return np.stack(columns, axis=-1)


def equal_weight_coefficients(omega: np.ndarray, population: int | None = None,
                              order: int = 1) -> np.ndarray:  # fmt: skip
    r""":func:`variance_coefficients` of arm n = 1..N with n parts of equal weight
    :math:`\omega_n` (``omega``, shape (..., N)), in closed form: with :math:`p_i = 1/n`,
    :math:`(1/n - 1/K,\ 1/(n\omega_n)[,\ 1/(n\omega_n^2)])`, shape (..., N, 2) (or 3 with
    ``order=2``). O(N), where padding each arm's row to N weights costs O(N²)."""
    n = np.arange(1, omega.shape[-1] + 1, dtype=np.float64)
    fpc = 0.0 if population is None else 1.0 / population
    columns = [np.broadcast_to(1.0 / n - fpc, omega.shape), 1.0 / (n * omega)]
    if check_noise_order(order, "equal_weight_coefficients") == 2:
        columns.append(1.0 / (n * omega * omega))
    return np.stack(columns, axis=-1)


def predicted_variance(
    S2: np.ndarray | float,
    tau2: np.ndarray | float,
    weights: np.ndarray,
    population: int | None = None,
    kappa2: np.ndarray | float | None = None,
) -> np.ndarray:
    r"""The model's :math:`v = S^2(\sum p_i^2 - 1/K) + \tau^2 \sum p_i^2/\omega_i` for a round
    with ``weights`` (..., m) (0 = absent), plus :math:`\kappa^2\sum p_i^2/\omega_i^2` where
    ``kappa2`` is given; see the module's notes and :func:`variance_coefficients`."""
    coef = variance_coefficients(weights, population, order=1 if kappa2 is None else 2)
    v = np.asarray(S2) * coef[..., 0] + np.asarray(tau2) * coef[..., 1]
    return v if kappa2 is None else v + np.asarray(kappa2) * coef[..., 2]


def spread_variance(parts: Any, weights: Any, population: int | None = None) -> float:
    r"""Estimate :math:`\operatorname{tr}\operatorname{Cov}(\bar g)` from one round's n parts.

    With :math:`p_i = \omega_i / \sum_j \omega_j` and :math:`r_i = \|g_i - \bar g\|^2`,

    .. math::

        \hat v = \sum_i c_i r_i, \qquad
        c_i = \frac{p_i^2}{(1 - 2p_i)(1 + A)}, \qquad
        A = \sum_j \frac{p_j^2}{1 - 2p_j}.

    **Exactly unbiased** for :math:`\sum_i p_i^2 \operatorname{tr}\Sigma_i` whenever the parts
    are independent with a common mean and *any* covariances :math:`\Sigma_i` (so no model of how
    the noise depends on the weights is needed), provided every :math:`p_i < 1/2` (n >= 3, no
    dominant part). Proof: :math:`\mathbb E\,r_i = (1 - 2p_i)\operatorname{tr}\Sigma_i + v`, and
    the :math:`c_i` solve :math:`c_i(1-2p_i) + p_i^2 \sum_j c_j = p_i^2`. For equal weights it is
    the familiar :math:`\sum_i \|g_i - \bar g\|^2 / (n(n-1))`. Clients drawn at random *with
    replacement* give independent parts with a common mean, the population's, and each part's
    covariance then includes the between-client spread.

    Where some :math:`p_i \ge 1/2` (n = 2 with unequal weights, or one dominant part) no
    unbiased estimator exists without a model; the estimate is then
    :math:`\sum_i p_i^2 \cdot \sum_i \|g_i - \tilde g\|^2/(n-1)` (:math:`\tilde g` the unweighted
    mean), unbiased when the parts' covariances are equal.

    **Sampling without replacement** from K clients (``population=K``) makes the true variance
    smaller by :math:`S^2/K` (the module's notes). One round cannot separate :math:`S^2` from the
    device noise, so this estimate is *not* corrected for it: it overestimates by at most
    :math:`S^2/K`, on the safe side. :class:`eegrad.SpreadThompson` separates the two across rounds
    (:func:`pair_statistics`) and applies the correction. ``population`` is checked only.

    Parameters
    ----------
    parts : array_like, shape (n, d)
        The n updates of one round, n >= 2.
    weights : array_like, shape (n,)
        Samples used by each part (> 0).
    population : int, optional
        K, the number of clients sampled from (>= n); checked for consistency only.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from eegrad.spread import spread_variance
    >>> parts = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> round(spread_variance(parts, [1, 1, 1]), 4)  # Σ‖g − ḡ‖² / (n(n − 1))
    0.2222
    """
    owner = "spread_variance"
    g, w = check_parts(parts, weights, owner)
    if np.any(w == 0):
        raise fail("weights", owner, "> 0 for every part", w)
    n = g.shape[0]
    if n < 2:
        raise fail("parts", owner, "at least 2 parts: one part has no within-round spread",
                   f"{n} part")  # fmt: skip
    if population is not None:
        check_integer(population, "population", owner, ge=n)
    p = w / w.sum()
    if np.all(p < 0.5):
        r = ((g - p @ g) ** 2).sum(axis=1)
        a = p * p / (1.0 - 2.0 * p)
        return float((a * r).sum() / (1.0 + a.sum()))
    dev = g - g.mean(axis=0)
    return float((p * p).sum() * (dev * dev).sum() / (n - 1))

