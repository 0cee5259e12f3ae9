"""Numba kernels: Algorithm 1's T rounds for one block of realizations.

Imported only when Numba is installed. Each kernel call runs one block with its own
``numpy.random.Generator`` and releases the GIL (``nogil=True``), so blocks run on threads in
parallel while every block's numbers are those of the NumPy engine: the same generator, the
same draws in the same order (round-major, then realization, then coordinate) and the same
floating-point operations in the same order.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..theory import funcf_width

#: Eq. (funcf), compiled from its one definition.
_funcf_width = nb.njit(nogil=True, cache=True)(funcf_width)

# Rule codes (see eegrad.engines.numba_engine).
EEGRAD, GREEDY, FIXED, OPTIMAL, ROUND_ROBIN, KL_LCB, THOMPSON = 0, 1, 2, 3, 4, 5, 6


@nb.njit(nogil=True, cache=True)
def _kl_ratio(y):  # pragma: no cover - compiled
    """As eegrad.selectors.rules.kl_lcb_ratio for one value (same operations)."""
    if not y > 0:
        return 1.0
    x = 2.0 * (y + 1.0)
    for _ in range(30):
        x = x - (x - 1.0 - math.log(x) - y) / (1.0 - 1.0 / x)
    return x


@nb.njit(nogil=True, cache=True)
def run_block(
    gen,
    sgen,
    grad,
    sqrt_m,
    scale,
    rule,
    params,
    P,
    T,
    total,
    count,
    mean,
    sq,
    keep_stats,
    ckpts,
    ckpt_counts,
):  # pragma: no cover - compiled; exercised through the engine's tests
    """Run T rounds for one block.

    Parameters
    ----------
    gen : numpy.random.Generator
        The block's stream.
    sgen : numpy.random.Generator
        The block's stream for the selector's own draws (Thompson sampling).
    grad, sqrt_m : (Rb, d) arrays
        ∇F(w) and √diag M(w) of each realization.
    scale : (N,) array
        √σ_n² of each arm (the standard deviation of MBO(n) per unit of √M).
    rule : int
        Rule code.
    params : (k,) array
        The rule's numbers: EEGRAD (β, k₁, k₂) with k₁ = √(αd/c), k₂ = √(α/(cd));
        FIXED and OPTIMAL (arm index,); KL_LCB (c, dims); THOMPSON (dims,).
    P : (Rb,) array
        EEGrad's P per realization.
    T : int
    total : (Rb, d) out
        Σ_t G_t.
    count : (Rb, N) int64 out; mean : (Rb, N, d) out; sq : (Rb, N) out
        The arms' statistics (zeroed by the caller).
    keep_stats : bool
        Update mean and sq (rules that ignore them skip the work, as in the NumPy engine).
    ckpts : (k,) int64 array, increasing
        Rounds after which the counts are copied into ``ckpt_counts`` (k, Rb, N).
    """
    Rb, d = grad.shape
    N = scale.shape[0]
    z = np.empty(d)
    g = np.empty(d)
    # V_t(n) and (γ − 1)^(−1/2), cached: they change only when arm n is pulled.
    V = np.empty((Rb, N))
    isg = np.empty((Rb, N))
    ci = 0
    thr = 0.0
    for t in range(1, T + 1):
        s = math.sqrt(math.log(t))
        if rule == KL_LCB:
            lt = math.log(t)
            thr = lt + (params[0] * math.log(lt) if lt > 1 else 0.0)
        for r in range(Rb):
            # -- ask ------------------------------------------------------------------------
            if rule == FIXED or rule == OPTIMAL:
                arm = int(params[0])
            elif rule == ROUND_ROBIN or t <= 2 * N:
                arm = (t - 1) % N
            else:
                arm = 0
                best = np.inf
                for n in range(N):
                    if rule == EEGRAD:
                        gn = isg[r, n]
                        v = V[r, n] - _funcf_width(params[0], P[r], params[1], params[2], s, gn)
                    elif rule == KL_LCB:
                        nu = params[1] * (count[r, n] - 1)
                        v = V[r, n] / _kl_ratio(2.0 * thr / nu)
                    elif rule == THOMPSON:
                        nu = params[0] * (count[r, n] - 1)
                        v = nu * V[r, n] / (2.0 * sgen.standard_gamma(nu / 2.0))
                    else:
                        v = V[r, n]
                    if v < best:  # strict: ties keep the smallest n, as np.argmin
                        best = v
                        arm = n
            # -- the oracle: G = ∇F + (√σ_n² √M) z ------------------------------------------
            for j in range(d):
                z[j] = gen.standard_normal()
            for j in range(d):
                g[j] = grad[r, j] + (scale[arm] * sqrt_m[r, j]) * z[j]
                total[r, j] += g[j]
            # -- tell (Welford, as ArmStatistics.update) -------------------------------------
            count[r, arm] += 1
            if not keep_stats:
                continue
            cnt = count[r, arm]
            acc = 0.0
            for j in range(d):
                old = mean[r, arm, j]
                delta = g[j] - old
                mean[r, arm, j] = old + delta / cnt
                acc += delta * delta
            sq[r, arm] += acc * ((cnt - 1) / cnt)
            if cnt >= 2:
                V[r, arm] = sq[r, arm] / (cnt - 1)
                isg[r, arm] = 1.0 / math.sqrt(cnt - 1)
        if ci < ckpts.shape[0] and ckpts[ci] == t:
            ckpt_counts[ci] = count
            ci += 1
