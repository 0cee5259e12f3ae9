"""Numba kernels: Algorithm 1's T rounds for one block of realizations.

Imported only when Numba is installed. Each kernel call runs one block with its own
``numpy.random.Generator`` and releases the GIL (``nogil=True``), so blocks run on threads in
parallel while every block's numbers are those of the NumPy engine: the same generator, the
same draws in the same order (round-major, then realization, then coordinate) and the same
floating-point operations in the same order. kl-LCB's and χ²-LCB's indices (and the memory
kl-LCB's) are evaluated only where a round's argmin needs them (:mod:`.index_kernels`); the
evaluated ones are the NumPy rules' values, so the choices are theirs.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ..theory import funcf_width
from .index_kernels import CHI2_QUANTILE, KL_ROOT, index_cache, lazy_argmin

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
        old = mean[r, arm, j]
        delta = g[j] - old
        mean[r, arm, j] = old + delta / cnt
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


# Rules with memory (see eegrad.selectors.memory): codes of run_memory_block.
MEMORY_THOMPSON, MEMORY_KL_LCB = 0, 1
MEMORY_CODES = {"memory_thompson": MEMORY_THOMPSON, "memory_kl_lcb": MEMORY_KL_LCB}


@nb.njit(nogil=True, cache=True, error_model="numpy", inline="always")  # x/0 -> inf
def _memory_arm(rule, loglog, horizon, tg, N, count, cache_pulls, s2, nu, sgen, r, roots, y, lo,
                hi, exact):  # pragma: no cover - compiled
    """The memory rule's choice at global round ``tg``: the argmin (ties: the smallest n) of
    MemoryThompson.index or MemoryKLLCB.index — the same draws in the same order, the same
    operations; kl-LCB's roots solved only where they can matter
    (:func:`index_kernels.lazy_argmin`, row ``r`` of its cache ``roots``). ``y``, ``lo``,
    ``hi``, ``exact``: scratch of length N."""
    if rule == MEMORY_THOMPSON:
        arm = 0
        best = np.inf
        for n in range(N):
            g = sgen.standard_gamma(max(nu[n], 1e-12) / 2.0)
            if nu[n] > 0:
                v = nu[n] * s2[n] / (2.0 * g) if g > 0 else np.inf
            else:
                v = -np.inf
            if v < best:  # strict: ties keep the smallest n, as np.argmin
                best = v
                arm = n
        return arm
    for n in range(N):
        if not nu[n] > 0:
            return n  # the first arm without evidence: index −∞
    if horizon < 0:
        lt = math.log(tg)
        level = lt + (loglog * math.log(lt) if lt > 1 else 0.0)
    for n in range(N):
        if horizon >= 0:
            pulls = max(cache_pulls[n] + count[n], 1.0)
            left = max(horizon - tg + 1, 0)
            level = math.log(max(left / (N * pulls), 1.0))
        y[n] = 2.0 * level / nu[n]
    # (kl-LCB reads no counts: the cache's count array stands in for them)
    return lazy_argmin(KL_ROOT, N, s2, y, r, roots[2], tg, 0.0, 0.0, roots, lo, hi, exact)


@nb.njit(nogil=True, cache=True, error_model="numpy", inline="always")  # x/0 -> inf
def _refit_current(N, d, scalar, gram, count, where, sq_dev, sq_coord, s2, cache_num, cache_dof,
                   nu, wt, mu, m, S):  # pragma: no cover - compiled
    """One block sweep with the current iterate (MemoryRule._refit_current and
    eegrad.selectors.memory.iterate_terms / sigma2_update for K = 1, the same operations in
    the same order); updates ``s2`` in place and leaves ν per arm in ``nu``.

    ``where`` holds the arms' means (N, d), or with ``gram`` (scalar shape) their Gram matrix
    about any fixed reference (N, N). Scratch (:func:`memory_scratch`): ``wt`` (N), ``mu``
    (max(N, d)), ``m`` (nc), ``S`` (N, nc), nc = 1 for the scalar shape, else d: S per arm and
    coordinate (scalar shape: the deviations summed over d), computed once and used twice."""
    total = 0.0
    gamma = 0.0
    for n in range(N):
        total += count[n] / s2[n]
        gamma += count[n]
    for n in range(N):
        wt[n] = (count[n] / s2[n]) / total if total > 0 else 0.0
    nc = 1 if scalar else d
    if gram:  # ‖x̄_n − μ‖² = G_nn − 2 (G w)_n + wᵀ G w
        wgw = 0.0
        for n in range(N):
            gw = 0.0
            for p in range(N):
                gw += where[n, p] * wt[p]
            mu[n] = gw
        for n in range(N):
            wgw += wt[n] * mu[n]
        for n in range(N):
            S[n, 0] = sq_dev[n] + count[n] * max((where[n, n] - 2.0 * mu[n]) + wgw, 0.0)
    else:
        for j in range(d):
            mu[j] = 0.0
        for n in range(N):
            for j in range(d):
                mu[j] += wt[n] * where[n, j]
        for n in range(N):
            if scalar:
                dev = 0.0
                for j in range(d):
                    x = where[n, j] - mu[j]
                    dev += count[n] * (x * x)
                S[n, 0] = sq_dev[n] + dev
            else:
                for j in range(d):
                    x = where[n, j] - mu[j]
                    S[n, j] = sq_coord[n, j] + count[n] * (x * x)
    per_coord = d if scalar else 1
    dof_k = per_coord * (gamma - 1.0)
    share = 1.0 - 1.0 / gamma if gamma > 1 else 0.0
    for j in range(nc):
        m[j] = 0.0
    for n in range(N):
        for j in range(nc):
            m[j] += S[n, j] / s2[n]
    for j in range(nc):
        m[j] = m[j] / dof_k
    logsum = 0.0
    for n in range(N):
        acc = 0.0
        if dof_k > 0:
            for j in range(nc):
                acc += S[n, j] / m[j]
        v = cache_num[n] + acc
        nu[n] = cache_dof[n] + per_coord * count[n] * share * nc
        v = v / nu[n] if nu[n] > 0 else s2[n]
        v = max(v, 1e-300)
        wt[n] = v  # reused: the unnormalised σ²
        logsum += math.log(v)
    scale = math.exp(logsum / N)
    for n in range(N):
        s2[n] = wt[n] / scale


@nb.njit(nogil=True, cache=True, error_model="numpy", inline="always")  # x/0 -> inf
def memory_choice(rule, loglog, horizon, tg, d, scalar, gram, count, where, sq_dev, sq_coord, s2,
                  cache_num, cache_dof, cache_pulls, sgen, r, roots, nu, wt, mu, m, S, lo, hi,
                  exact):  # pragma: no cover - compiled
    """A rule with memory's choice at global round ``tg`` for one realization: the round's refit
    (``s2`` updated in place) and the argmin of the arms' indices (ties: the smallest n, as
    np.argmin; :func:`_memory_arm`). Used by :func:`run_memory_block` per realization and by the rule itself for one
    realization (a user's loop). Arrays as :func:`_refit_current`, scratch from
    :func:`memory_scratch` (``roots``: kl-LCB's roots kept between rounds, of which row ``r``
    is this realization's); ``count`` as floats."""
    N = s2.shape[0]
    _refit_current(N, d, scalar, gram, count, where, sq_dev, sq_coord, s2, cache_num, cache_dof,
                   nu, wt, mu, m, S)  # fmt: skip
    # wt is free once the refit is done: the choice's scratch.
    return _memory_arm(rule, loglog, horizon, tg, N, count, cache_pulls, s2, nu, sgen, r, roots,
                       wt, lo, hi, exact)  # fmt: skip


@nb.njit(nogil=True, cache=True)
def memory_scratch(N, d, scalar, Rb):  # pragma: no cover - compiled
    """The scratch arrays of :func:`memory_choice` for Rb realizations, N arms and dimension d
    (kl-LCB's roots for Rb realizations, then ν, weights, μ or (G w), m, S and the choice's
    bounds), allocated once per block or per rule."""
    nc = 1 if scalar else d
    return (index_cache(KL_ROOT, Rb, N, 1), np.empty(N), np.empty(N), np.empty(max(N, d)),
            np.empty(nc), np.empty((N, nc)), np.empty(N), np.empty(N), np.empty(N))


@nb.njit(nogil=True, cache=True, error_model="numpy")  # x/0 -> inf, as NumPy
def run_memory_block(
    gen, sgen, grad, sqrt_m, scale, rule, loglog, horizon, scalar, warm, rounds_before, T,
    total, count, mean, sq_dev, sq_coord, s2, cache_num, cache_dof, cache_pulls, ckpts,
    ckpt_counts,
):  # pragma: no cover - compiled; exercised through the engine's tests
    """T rounds of a rule with memory for one block: as run_block, with the rule's fit
    (σ² per realization, ``s2``, updated in place) refitted every round from the current
    iterate's statistics and the past iterates' cached terms (``cache_num``, ``cache_dof``,
    ``cache_pulls``, shape (Rb, N), computed by the NumPy rule at the iterate's start).
    ``warm``: the run's first iterate, whose first 2N rounds pull every arm twice."""
    Rb, d = grad.shape
    N = scale.shape[0]
    z = np.empty(d)
    g = np.empty(d)
    roots, nu, wt, mu, m, S, lo, hi, exact = memory_scratch(N, d, scalar, Rb)
    cnt_f = np.empty(N)
    ci = 0
    for t in range(1, T + 1):
        for r in range(Rb):
            if warm and t <= 2 * N:
                arm = (t - 1) % N
            else:
                for n in range(N):
                    cnt_f[n] = count[r, n]
                arm = memory_choice(rule, loglog, horizon, rounds_before + t, d, scalar, False,
                                    cnt_f, mean[r], sq_dev[r], sq_coord[r], s2[r], cache_num[r],
                                    cache_dof[r], cache_pulls[r], sgen, r, roots, nu, wt, mu,
                                    m, S, lo, hi, exact)  # fmt: skip
            _pull(gen, grad, sqrt_m, scale, r, arm, z, g, total)
            count[r, arm] += 1
            _welford(g, r, arm, count, mean, sq_dev, sq_coord, not scalar)
        if ci < ckpts.shape[0] and ckpts[ci] == t:
            ckpt_counts[ci] = count
            ci += 1
