"""Numba kernel of a user's loop: one round's statistics in one pass over the gradient.

Imported only when Numba is installed; :class:`eegrad.GradientEstimator` uses it for NumPy
arrays and CPU tensors (``engine="auto"`` or ``"numba"``). Per round the NumPy path makes four
passes over d-vectors (δ = G − m, ‖δ‖², δ/γ, m += δ/γ); here the gradient and the pulled arm's
mean are read once and the new mean written once
(:func:`.welford_kernels.fold_coordinate`).
"""

from __future__ import annotations

import numba as nb

from .welford_kernels import fold_coordinate


# reassoc/contract: the sum runs in SIMD lanes (a fixed order for a given build, not NumPy's);
# no 'nnan'/'ninf': a non-finite gradient must reach the sum, which is how it is detected.
# arcp: δ/γ by one reciprocal of the loop-invariant γ (a multiply per coordinate, not a division).
@nb.njit(nogil=True, cache=True, fastmath={"reassoc", "contract", "arcp"})
def tell_pass(g, ref, centred, mean, new_mean, count):  # pragma: no cover - compiled
    """δ = G − r − m (r only if ``centred``) and m + δ/γ into ``new_mean``; returns Σ δ².

    The new mean goes to another row than the old one, so that the caller commits the round
    only if the returned sum is finite: a gradient with NaN or Inf changes no mean.

    Parameters
    ----------
    g, ref : (d,) arrays
        The round's gradient and r (the first gradient of the estimate), in the means' dtype.
    centred : bool
        Subtract ``ref``.
    mean, new_mean : (d,) arrays
        The pulled arm's mean m before the round, and where m + δ/γ goes.
    count : scalar of the means' dtype
        γ, the arm's count with this round.

    Returns
    -------
    float
        Σ_j δ_j², accumulated in float64.
    """
    acc = 0.0
    if centred:
        for j in range(g.shape[0]):
            delta, new = fold_coordinate(mean[j], g[j] - ref[j], count)
            new_mean[j] = new
            acc += delta * delta
    else:
        for j in range(g.shape[0]):
            delta, new = fold_coordinate(mean[j], g[j], count)
            new_mean[j] = new
            acc += delta * delta
    return acc
