"""Numba kernel of a pull's parts told one at a time (:class:`eegrad.parts.PullAccumulator`).

Imported only when Numba is installed. Per part and per array of the model, one pass: the
update u = s·(r − x) (or s·x), formed in float64 from the arrays' own dtype, updates the
weighted running mean (West's update) and, where the rule learns from the spread of the parts,
the unweighted running mean (Welford's), both stored in the model's dtype; the two squared
deviations are summed in float64. FedAvg's server reads each reply once and writes one sum; so
does this pass, with one more d-vector where the unweighted mean is kept.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from .welford_kernels import fold_coordinate


# reassoc/contract: the sums run in SIMD lanes (a fixed order for a given build); no
# 'nnan'/'ninf': a non-finite part must reach the sums, which is how it is detected.
# arcp: the divisions by W/ω and k as multiplications by their reciprocals.
@nb.njit(nogil=True, cache=True, fastmath={"reassoc", "contract", "arcp"})
def add_part(x, ref, has_ref, scale, mean_w, ratio_w, mean_u, with_u, count):  # pragma: no cover
    """Fold one array of one part into the running means; returns the two squared sums.

    Parameters
    ----------
    x : (m,) array
        The part's array (the client's model where ``has_ref``, else its update), flat.
    ref : (m,) array
        The reference r (the server's model), read only where ``has_ref``.
    has_ref : bool
        Whether the update is r − x (else x itself).
    scale : float
        s, the factor on the update (1, or a clipping factor).
    mean_w : (m,) array
        The weighted mean of the updates so far, updated in place: m_w + (u − m_w)/(W/ω).
    ratio_w : float
        W/ω, the total weight with this part over its weight ω.
    mean_u : (m,) array
        The unweighted mean so far, updated in place where ``with_u``: m_u + (u − m_u)/k.
    with_u : bool
        Whether to keep the unweighted mean (rules that learn from the parts' spread).
    count : float
        k, the number of parts with this one.

    Returns
    -------
    (float, float)
        (1 − ω/W) Σ (u − m_w)² and (1 − 1/k) Σ (u − m_u)² over the array, in float64: the
        increments of Σω‖u − ū_ω‖² (over ω) and of Σ‖u − ū‖² (West; Welford).
    """
    q = 0.0
    m2 = 0.0
    for j in range(x.shape[0]):
        u = scale * (float(ref[j]) - float(x[j])) if has_ref else scale * float(x[j])
        dw, new_w = fold_coordinate(float(mean_w[j]), u, ratio_w)
        mean_w[j] = new_w
        q += dw * dw
        if with_u:
            du, new_u = fold_coordinate(float(mean_u[j]), u, count)
            mean_u[j] = new_u
            m2 += du * du
    return q * ((ratio_w - 1.0) / ratio_w), m2 * ((count - 1.0) / count)


@nb.njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})
def squared_norm(x, ref, has_ref):  # pragma: no cover - compiled
    """Σ (r − x)² (or Σ x²) in float64, the arrays read once."""
    acc = 0.0
    for j in range(x.shape[0]):
        u = (float(ref[j]) - float(x[j])) if has_ref else float(x[j])
        acc += u * u
    return acc


# No fastmath: each product formed in float64 from the widened inputs (a scalar statistic of
# the round, one pass; its speed is the memory's).
@nb.njit(nogil=True, cache=True)
def norm_and_inner(x, y, has_y):  # pragma: no cover - compiled
    """(Σ x², Σ x·y) in float64, the arrays read once (Σ x·y = 0 where not ``has_y``)."""
    xx = 0.0
    xy = 0.0
    for j in range(x.shape[0]):
        a = np.float64(x[j])  # float() of a float32 stays float32 in Numba
        xx += a * a
        if has_y:
            xy += a * np.float64(y[j])
    return xx, xy
