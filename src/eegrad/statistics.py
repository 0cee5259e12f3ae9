r"""Online per-arm statistics (Welford): count γ_t(n), mean m_t(n) and the trace of the sum of
squared deviations, so that

.. math::

    V_t(n) = \mathrm{Tr}\,\mathrm{Cov}_t(n)
           = \frac{1}{\gamma_t(n) - 1} \sum_{i=1}^{\gamma_t(n)} \|G_i(w, n) - m_t(n)\|^2

(Section 3 of the paper) costs O(d) per pull and no history of outputs is stored.

The update itself is written once per array library and used by every running statistic of
the package — the arms' statistics here, :class:`~eegrad.GradientEstimator`'s backends and the
pull's parts (:class:`~eegrad.parts.PullAccumulator`):

* NumPy: :func:`welford_deviation` then :func:`welford_fold`;
* PyTorch: :func:`welford_deviation_torch` then :func:`welford_fold_torch`;
* compiled: :func:`eegrad.engines.welford_kernels.fold_coordinate`, inlined in each kernel's
  single pass.

With a weight ω joining a running total W (the total with it), γ = W/ω gives West's weighted
update; with unit weights γ is the count (Welford's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "ArmStatistics",
    "welford_deviation",
    "welford_deviation_torch",
    "welford_fold",
    "welford_fold_torch",
]


def _rows(count: Any) -> Any:
    """γ broadcast against rows of d-vectors (a Python scalar stays weak: float32 stays)."""
    return count if np.ndim(count) == 0 else np.asarray(count)[..., None]


def welford_deviation(x: np.ndarray, mean: np.ndarray, count: Any,
                      out: np.ndarray | None = None) -> tuple[np.ndarray, Any]:  # fmt: skip
    r"""The first half of the running update: :math:`\delta = x - m_{\text{old}}` and the
    increment :math:`(1 - 1/\gamma)\|\delta\|^2` of :math:`\sum_i \|x_i - m\|^2`.

    Parameters
    ----------
    x, mean : ndarray of shape (..., d)
        The new output(s) and the running mean(s) before it (unchanged).
    count : int, float or ndarray of shape (...)
        γ, the count with this output (or W/ω, weighted).
    out : ndarray, optional
        Where δ goes (may be ``x``).

    Returns
    -------
    delta : ndarray of shape (..., d)
    increment : scalar or ndarray of shape (...)
        NaN or Inf exactly where x is not finite.
    """
    delta = np.subtract(x, mean, out=out)
    with np.errstate(invalid="ignore", over="ignore"):
        return delta, np.einsum("...j,...j->...", delta, delta) * ((count - 1) / count)


def welford_fold(mean: np.ndarray, delta: np.ndarray, count: Any) -> np.ndarray:
    r"""The second half: :math:`m \leftarrow m + \delta/\gamma`, in place (δ is overwritten by
    δ/γ; the mean keeps its dtype). Returns the mean."""
    with np.errstate(invalid="ignore", over="ignore"):
        np.divide(delta, _rows(count), out=delta, casting="unsafe")
        return np.add(mean, delta, out=mean, casting="unsafe")


def welford_deviation_torch(x: Any, mean: Any, count: float, out: Any = None) -> tuple[Any, Any]:
    r""":func:`welford_deviation` for one tensor on its device: δ and the increment
    :math:`(1 - 1/\gamma)\|\delta\|^2` as a float64 tensor on that device (no transfer)."""
    import torch

    delta = torch.sub(x, mean, out=out) if out is not None else x - mean
    return delta, torch.sum(delta * delta, dtype=torch.float64) * ((count - 1) / count)


def welford_fold_torch(mean: Any, delta: Any, count: float) -> Any:
    r""":func:`welford_fold` for one tensor: :math:`m \leftarrow m + \delta/\gamma`, in place."""
    return mean.add_(delta, alpha=1.0 / count)  # in the mean's dtype


class ArmStatistics:
    """Per-realization, per-arm running statistics.

    Parameters
    ----------
    R, N, d : int
        Realizations, arms, dimension.

    Attributes
    ----------
    count : ndarray of int64, shape (R, N)
        γ_t(n), pulls of each arm so far.
    mean : ndarray, shape (R, N, d)
        m_t(n), the sample mean of each arm's outputs.
    sq_dev : ndarray, shape (R, N)
        Σ_i ‖G_i(w, n) − m_t(n)‖², the trace of the sum of squared deviations.
    """

    def __init__(self, R: int, N: int, d: int, per_coordinate: bool = False):
        self.per_coordinate = per_coordinate
        #: Per-coordinate sums of squared deviations, shape (R, N, d), when asked for.
        self.sq_coord = np.zeros((R, N, d)) if per_coordinate else None
        self.count = np.zeros((R, N), dtype=np.int64)
        self.mean = np.zeros((R, N, d))
        self.sq_dev = np.zeros((R, N))
        # Flat views: row r, arm a is entry r*N + a (one gather/scatter instead of 2-D indexing).
        self._count_flat = self.count.reshape(-1)
        self._mean_flat = self.mean.reshape(R * N, d)
        self._sq_flat = self.sq_dev.reshape(-1)
        self._base = np.arange(R) * N

    def update(self, arms: np.ndarray, g: np.ndarray) -> None:
        """Add output ``g[r]`` (shape (R, d)) to arm ``arms[r]`` of each realization r."""
        idx = self._base + arms
        self._count_flat[idx] += 1
        cnt = self._count_flat[idx]
        old = self._mean_flat[idx]
        # Σ‖G − m‖² grows by δ·(G − m_new) = (1 − 1/γ)‖δ‖² (Welford), δ = G − m_old.
        delta, increment = welford_deviation(g, old, cnt)
        self._sq_flat[idx] += increment
        if self.per_coordinate:
            flat = self.sq_coord.reshape(-1, delta.shape[1])
            flat[idx] += delta * delta * ((cnt - 1) / cnt)[:, None]
        self._mean_flat[idx] = welford_fold(old, delta, cnt)

    def variance_trace(self) -> np.ndarray:
        """V_t(n) of every arm, shape (R, N); NaN where γ_t(n) < 2 (undefined)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.count >= 2, self.sq_dev / (self.count - 1), np.nan)
