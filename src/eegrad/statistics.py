r"""Online per-arm statistics (Welford): count γ_t(n), mean m_t(n) and the trace of the sum of
squared deviations, so that

.. math::

    V_t(n) = \mathrm{Tr}\,\mathrm{Cov}_t(n)
           = \frac{1}{\gamma_t(n) - 1} \sum_{i=1}^{\gamma_t(n)} \|G_i(w, n) - m_t(n)\|^2

(Section 3 of the paper) costs O(d) per pull and no history of outputs is stored.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ArmStatistics"]


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
        delta = g - old
        self._mean_flat[idx] = old + delta / cnt[:, None]
        # Σ‖G − m‖² grows by δ·(G − m_new) = (1 − 1/γ)‖δ‖² (Welford), δ = G − m_old.
        self._sq_flat[idx] += np.einsum("rd,rd->r", delta, delta) * ((cnt - 1) / cnt)
        if self.per_coordinate:
            flat = self.sq_coord.reshape(-1, delta.shape[1])
            flat[idx] += delta * delta * ((cnt - 1) / cnt)[:, None]

    def variance_trace(self) -> np.ndarray:
        """V_t(n) of every arm, shape (R, N); NaN where γ_t(n) < 2 (undefined)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.count >= 2, self.sq_dev / (self.count - 1), np.nan)
