"""Numba kernels of the rules with memory (:mod:`eegrad.selectors.memory`).

Per realization: a round's refit, index and choice (:func:`memory_choice`), a block's T rounds
(:func:`run_memory_block`, the compiled engine) and the refit of the past iterates when an
iterate ends (:func:`refit_past`). Each repeats the NumPy rule's operations in their order —
:func:`~eegrad.selectors.memory.iterate_terms`, :func:`~eegrad.selectors.memory.sigma2_update`
and the indices — so both give the same numbers to a few ulps, with two sources of last-bit
differences: the exponential and logarithm (NumPy's vectorised ones on a CPU with AVX-512, which
differ from the C library's by 1 ulp for about 5% of exp's arguments), and sums of eight terms or
more (arms, or coordinates of the diagonal shape), which NumPy adds pairwise and these kernels in
order. The tests compare choices exactly and fits in ulps, on both of NumPy's dispatch paths.

Imported only when Numba is installed.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .index_kernels import KL_ROOT, index_cache, lazy_argmin
from .numba_kernels import _pull, _welford

# Codes of memory_choice and run_memory_block, and the names a rule's KernelSpec gives them.
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
def _unnormalised(num, dof, previous):  # pragma: no cover - compiled
    """One arm's σ² before the normalisation (sigma2_update): num/dof where dof > 0, else the
    previous value; at least 1e-300."""
    v = num / dof if dof > 0 else previous
    return max(v, 1e-300)


@nb.njit(nogil=True, cache=True, inline="always")
def _normalise(N, v, logsum, s2):  # pragma: no cover - compiled
    """``s2`` = ``v`` over its geometric mean (``logsum``: Σ ln v, in arm order)."""
    scale = math.exp(logsum / N)
    for n in range(N):
        s2[n] = v[n] / scale


@nb.njit(nogil=True, cache=True, error_model="numpy", inline="always")  # x/0 -> inf
def _sigma2_update(N, num, dof, s2, v):  # pragma: no cover - compiled
    """sigma2_update for one realization, in place on ``s2``. ``v``: scratch of length N."""
    logsum = 0.0
    for n in range(N):
        v[n] = _unnormalised(num[n], dof[n], s2[n])
        logsum += math.log(v[n])
    _normalise(N, v, logsum, s2)


@nb.njit(nogil=True, cache=True, error_model="numpy", inline="always")  # x/0 -> inf
def _iterate_terms(N, d, scalar, gram, count, where, sq_dev, sq_coord, s2, base_num, base_dof,
                   refit, num, nu, wt, mu, m, S):  # pragma: no cover - compiled
    """One iterate's terms of the fit at the arms' ``s2`` (iterate_terms for one realization and
    one iterate, the same operations in the same order), added to ``base_num`` and
    ``base_dof``: Σ_i S/m per arm into ``num`` and ν per arm into ``nu``; or, with ``refit``,
    σ² from them at once (sigma2_update, in the same loop: measured faster than a second pass)
    into ``s2``, ``num`` left untouched.

    ``where`` holds the arms' means (N, d), or with ``gram`` (scalar shape) their Gram matrix
    about any fixed reference (N, N); the squared deviations are ``sq_dev`` (N,) for the scalar
    shape, else ``sq_coord`` (N, d). Scratch: ``wt`` (N), ``mu`` (max(N, d)), ``m`` (nc),
    ``S`` (N, nc), nc = 1 for the scalar shape, else d: S per arm and coordinate (scalar shape:
    the deviations summed over d), computed once and used twice."""
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
        v = base_num[n] + acc
        nu[n] = base_dof[n] + per_coord * count[n] * share * nc
        if not refit:
            num[n] = v
            continue
        v = _unnormalised(v, nu[n], s2[n])
        wt[n] = v  # reused: the unnormalised σ²
        logsum += math.log(v)
    if refit:
        _normalise(N, wt, logsum, s2)




@nb.njit(nogil=True, cache=True, error_model="numpy", inline="always")  # x/0 -> inf
def memory_choice(rule, loglog, horizon, tg, d, scalar, gram, count, where, sq_dev, sq_coord, s2,
                  cache_num, cache_dof, cache_pulls, sgen, r, roots, nu, wt, mu, m, S, lo, hi,
                  exact):  # pragma: no cover - compiled
    """A rule with memory's choice at global round ``tg`` for one realization: the round's refit
    (MemoryRule._refit_current: the current iterate's terms added to the past iterates' cached
    ``cache_num`` and ``cache_dof``; ``s2`` updated in place, ν per arm left in ``nu``) and the
    argmin of the arms' indices (ties: the smallest n, as np.argmin; :func:`_memory_arm`).

    Used by :func:`run_memory_block` per realization and by the rule itself for one realization
    (a user's loop). Arrays as :func:`_iterate_terms`, ``count`` as floats; scratch from
    :func:`memory_scratch` (``roots``: kl-LCB's roots kept between rounds, of which row ``r`` is
    this realization's)."""
    N = s2.shape[0]
    # (with refit, the terms' ``num`` is not written: ``nu`` stands in for it)
    _iterate_terms(N, d, scalar, gram, count, where, sq_dev, sq_coord, s2, cache_num, cache_dof,
                   True, nu, nu, wt, mu, m, S)  # fmt: skip
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
            np.empty(nc), np.empty((N, nc)), np.empty(N), np.empty(N), np.empty(N))  # fmt: skip


@nb.njit(nogil=True, cache=True, error_model="numpy")  # x/0 -> inf, as NumPy
def run_memory_block(
    gen, sgen, grad, sqrt_m, scale, rule, loglog, horizon, scalar, warm, rounds_before, T,
    total, count, mean, sq_dev, sq_coord, s2, cache_num, cache_dof, cache_pulls, ckpts,
    ckpt_counts,
):  # pragma: no cover - compiled; exercised through the engine's tests
    """T rounds of a rule with memory for one block: as numba_kernels.run_block, with the rule's
    fit (σ² per realization, ``s2``, updated in place) refitted every round from the current
    iterate's statistics and the past iterates' cached terms (``cache_num``, ``cache_dof``,
    ``cache_pulls``, shape (Rb, N), computed at the iterate's start). ``warm``: the run's first
    iterate, whose first 2N rounds pull every arm twice."""
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


@nb.njit(nogil=True, cache=True, error_model="numpy")  # x/0 -> inf, as NumPy
def refit_past(count, where, sq, s2, frozen_num, frozen_dof, d, scalar, iterations, num,
               nu):  # pragma: no cover - compiled; exercised through the rules' tests
    """The refit of the past iterates when an iterate ends (MemoryRule._refit_past before its
    fold): ``iterations`` block sweeps per realization — every past iterate's terms at the
    current σ², then σ² from their sums over the iterates added to the folded totals — and the
    terms at the final σ² left in ``num`` and ``nu`` (R, K, N).

    ``count`` (R, K, N) as floats, ``sq`` (R, K, N, nc) and ``where`` (R, K, N, d) the arms'
    means, or with ``scalar`` (R, K, N, N) their Gram matrices about each iterate's pooled
    mean; ``s2`` (R, N) updated in place; ``frozen_num``, ``frozen_dof`` (R, N)."""
    R, K, N = count.shape
    nc = sq.shape[3]
    wt, mu, m, S = np.empty(N), np.empty(max(N, d)), np.empty(nc), np.empty((N, nc))
    tot_num, tot_dof, zero = np.empty(N), np.empty(N), np.zeros(N)
    for r in range(R):
        for sweep in range(iterations + 1):
            for k in range(K):
                _iterate_terms(N, d, scalar, scalar, count[r, k], where[r, k], sq[r, k, :, 0],
                               sq[r, k], s2[r], zero, zero, False, num[r, k], nu[r, k], wt,
                               mu, m, S)  # fmt: skip
            if sweep == iterations:
                break
            for n in range(N):
                a = 0.0
                b = 0.0
                for k in range(K):  # NumPy's sum over axis 1, in iterate order
                    a += num[r, k, n]
                    b += nu[r, k, n]
                tot_num[n] = frozen_num[r, n] + a
                tot_dof[n] = frozen_dof[r, n] + b
            _sigma2_update(N, tot_num, tot_dof, s2[r], wt)
