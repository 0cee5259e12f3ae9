"""Numba kernels: Algorithm 1's T rounds for one block of realizations.

Imported only when Numba is installed. Each kernel call runs one block with its own
``numpy.random.Generator`` and releases the GIL (``nogil=True``), so blocks run on threads in
parallel while every block's numbers are those of the NumPy engine: the same generator, the
same draws in the same order (round-major, then realization, then coordinate) and the same
floating-point operations in the same order. kl-LCB's and χ²-LCB's indices are evaluated only
where a round's argmin needs them (:mod:`.index_kernels`); the evaluated ones are the NumPy rules'
values, so the choices are theirs. The rules with memory have their own kernels
(:mod:`.memory_kernels`), which share this module's oracle and statistics steps.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..theory import funcf_width
from .index_kernels import CHI2_QUANTILE, KL_ROOT, index_cache, lazy_argmin
from .welford_kernels import fold_coordinate

#: Eq. (funcf), compiled from its one definition.
_funcf_width = nb.njit(nogil=True, cache=True)(funcf_width)

# Rule codes of run_block, and the names a rule's KernelSpec gives them.
EEGRAD, GREEDY, FIXED, OPTIMAL, ROUND_ROBIN, KL_LCB, THOMPSON, CHI2_LCB = range(8)
RULE_CODES = {"eegrad": EEGRAD, "greedy": GREEDY, "fixed": FIXED, "optimal": OPTIMAL,
              "round_robin": ROUND_ROBIN, "kl_lcb": KL_LCB, "thompson": THOMPSON,
              "chi2_lcb": CHI2_LCB}  # fmt: skip


@nb.njit(nogil=True, cache=True, inline="always")
def _pull(gen, grad, sqrt_m, scale, r, arm, z, g, total):  # pragma: no cover - compiled
    """The oracle: G = ∇F + (√σ_n² √M) z into ``g``, added to ``total[r]``."""
    d = g.shape[0]
    for j in range(d):
        z[j] = gen.standard_normal()
    for j in range(d):
        g[j] = grad[r, j] + (scale[arm] * sqrt_m[r, j]) * z[j]
        total[r, j] += g[j]


@nb.njit(nogil=True, cache=True, inline="always")
def _welford(g, r, arm, count, mean, sq, sq_coord, per_coord):  # pragma: no cover - compiled
    """Tell the arm's statistics ``g`` (as ArmStatistics.update; with ``per_coord`` also the
    per-coordinate squared deviations); returns the arm's new count."""
    cnt = count[r, arm]
    acc = 0.0
    for j in range(g.shape[0]):
        delta, new = fold_coordinate(mean[r, arm, j], g[j], cnt)
        mean[r, arm, j] = new
        acc += delta * delta
        if per_coord:
            sq_coord[r, arm, j] += delta * delta * ((cnt - 1) / cnt)
    sq[r, arm] += acc * ((cnt - 1) / cnt)
    return cnt


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
        FIXED and OPTIMAL (arm index,); KL_LCB (c, dims); THOMPSON (dims,);
        CHI2_LCB (exponent, dims).
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
    # KL_LCB and CHI2_LCB: the round's index scales and levels, the bounds' scratch and the
    # roots kept between rounds (index_kernels.lazy_argmin)
    scales, levels = np.empty(N), np.empty(N)
    lo, hi, exact = np.empty(N), np.empty(N), np.empty(N)
    kind = CHI2_QUANTILE if rule == CHI2_LCB else KL_ROOT
    roots = index_cache(kind, Rb if rule == KL_LCB or rule == CHI2_LCB else 1, N, T)
    ci = 0
    thr = 0.0  # KL_LCB's level
    tail = 0.0  # CHI2_LCB's δ_t
    level = 0.0  # and its ln(1/δ_t)
    for t in range(1, T + 1):
        s = math.sqrt(math.log(t))
        if rule == KL_LCB:
            lt = math.log(t)
            thr = lt + (params[0] * math.log(lt) if lt > 1 else 0.0)
        elif rule == CHI2_LCB:
            tail = float(t) ** (-params[0])  # δ_t = t^(−e)
            level = params[0] * math.log(t)
        for r in range(Rb):
            # -- ask ------------------------------------------------------------------------
            if rule == FIXED or rule == OPTIMAL:
                arm = int(params[0])
            elif rule == ROUND_ROBIN or t <= 2 * N:
                arm = (t - 1) % N
            elif rule == KL_LCB:
                for n in range(N):
                    scales[n] = V[r, n]
                    levels[n] = 2.0 * thr / (params[1] * (count[r, n] - 1))
                arm = lazy_argmin(KL_ROOT, N, scales, levels, r, count, t, 0.0, 0.0, roots, lo,
                                  hi, exact)  # fmt: skip
            elif rule == CHI2_LCB:
                for n in range(N):
                    nu = params[1] * (count[r, n] - 1)
                    scales[n] = nu * V[r, n]  # the index ν V / q, in the NumPy rule's order
                    levels[n] = nu
                arm = lazy_argmin(CHI2_QUANTILE, N, scales, levels, r, count, t, tail, level,
                                  roots, lo, hi, exact)  # fmt: skip
            else:
                arm = 0
                best = np.inf
                for n in range(N):
                    if rule == EEGRAD:
                        gn = isg[r, n]
                        v = V[r, n] - _funcf_width(params[0], P[r], params[1], params[2], s, gn)
                    elif rule == THOMPSON:
                        nu = params[0] * (count[r, n] - 1)
                        v = nu * V[r, n] / (2.0 * sgen.standard_gamma(nu / 2.0))
                    else:
                        v = V[r, n]
                    if v < best:  # strict: ties keep the smallest n, as np.argmin
                        best = v
                        arm = n
            # -- the oracle, then tell (Welford, as ArmStatistics.update) --------------------
            _pull(gen, grad, sqrt_m, scale, r, arm, z, g, total)
            count[r, arm] += 1
            if not keep_stats:
                continue
            cnt = _welford(g, r, arm, count, mean, sq, mean, False)
            if cnt >= 2:
                V[r, arm] = sq[r, arm] / (cnt - 1)
                isg[r, arm] = 1.0 / math.sqrt(cnt - 1)
        if ci < ckpts.shape[0] and ckpts[ci] == t:
            ckpt_counts[ci] = count
            ci += 1
