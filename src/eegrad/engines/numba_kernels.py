"""Numba kernels: Algorithm 1's T rounds for one block of realizations.

Imported only when Numba is installed. Each kernel call runs one block with its own
``numpy.random.Generator`` and releases the GIL (``nogil=True``), so blocks run on threads in
parallel while every block's numbers are those of the NumPy engine: the same generator, the
same draws in the same order (round-major, then realization, then coordinate) and the same
floating-point operations in the same order.
"""

from __future__ import annotations

import math

import llvmlite.binding as llvm
import numba as nb
import numpy as np
from numba import types
from numba.extending import get_cython_function_address

from ..selectors.rules import ONE_UP
from ..theory import funcf_width

#: Eq. (funcf), compiled from its one definition.
_funcf_width = nb.njit(nogil=True, cache=True)(funcf_width)

# SciPy's χ² quantile, the function the NumPy χ²-LCB calls (scipy.special.chdtri), from SciPy's
# Cython API. The compiled code links to it by a symbol name, not an address, so that Numba's
# on-disk cache stays valid from one process to the next.
llvm.add_symbol("eegrad_scipy_chdtri",
                get_cython_function_address("scipy.special.cython_special", "chdtri"))
_chdtri = types.ExternalFunction("eegrad_scipy_chdtri",
                                 types.float64(types.float64, types.float64, types.intc))

#: Counts below this share one χ² quantile per round in run_block (a table of this many floats
#: per block).
_QUANTILE_TABLE = 1 << 16

# Rule codes of run_block, and the names a rule's KernelSpec gives them.
EEGRAD, GREEDY, FIXED, OPTIMAL, ROUND_ROBIN, KL_LCB, THOMPSON, CHI2_LCB = range(8)
RULE_CODES = {"eegrad": EEGRAD, "greedy": GREEDY, "fixed": FIXED, "optimal": OPTIMAL,
              "round_robin": ROUND_ROBIN, "kl_lcb": KL_LCB, "thompson": THOMPSON,
              "chi2_lcb": CHI2_LCB}  # fmt: skip


@nb.njit(nogil=True, cache=True, inline="always")
def _kl_first(y):  # pragma: no cover - compiled
    """The start and first Newton step of :func:`_kl_ratio`: (x, done). Not done, x lies above
    the root (the first step sends any start above it, and the later steps decrease), so
    V / x is a lower bound of the index V / root; done, x is :func:`_kl_ratio`'s value."""
    if not y > 0:
        return 1.0, True
    s = math.sqrt(2.0 * y)
    x = max(1.0 + s + s * s / 3.0 + s * s * s / 36.0, ONE_UP)
    step = x - (x - 1.0 - math.log(x) - y) / (1.0 - 1.0 / x)
    if step == x:
        return x, True
    return step, False


@nb.njit(nogil=True, cache=True, inline="always")
def _kl_rest(y, x):  # pragma: no cover - compiled
    """The Newton steps of :func:`_kl_ratio` after :func:`_kl_first`'s, from its ``x``."""
    for _ in range(29):
        step = x - (x - 1.0 - math.log(x) - y) / (1.0 - 1.0 / x)
        if step == x:  # a fixed point: the remaining iterations would return x unchanged
            break
        x = step
    return x


@nb.njit(nogil=True, cache=True)
def _kl_ratio(y):  # pragma: no cover - compiled
    """As eegrad.selectors.rules.kl_lcb_ratio for one value (same start, same operations: at
    most 30 Newton steps, stopping at a fixed point)."""
    x, done = _kl_first(y)
    return x if done else _kl_rest(y, x)


#: Relative slack of the lower bounds in :func:`_kl_argmin`: a bound counts only when it exceeds
#: the best index by more than any last-bit wobble of the Newton steps near the root.
_BOUND_SLACK = 1e-12


@nb.njit(nogil=True, cache=True, inline="always")
def _kl_argmin(N, scale, y, x):  # pragma: no cover - compiled
    """argmin_n scale[n] / root(y[n]) (ties: the smallest n, as np.argmin of the indices), with
    the root of x − 1 − ln x = y solved to the end only where it can matter.

    Every arm's first Newton step (:func:`_kl_first`) bounds its index from below; the arm of
    the smallest bound is solved first, and another arm only if its bound does not exceed the
    best index so far. The chosen arm is the argmin of the fully solved indices, whose values
    are those of :func:`_kl_ratio` — the choice is the same, a fraction of the logarithms
    spent. ``y`` and ``x`` are scratch of length N; ``y`` holds the levels on entry (−1 marks
    a solved arm on exit)."""
    first = 0
    low = np.inf
    for n in range(N):
        xn, done = _kl_first(y[n])
        x[n] = xn
        if done:
            y[n] = -1.0
        bound = scale[n] / xn
        if bound < low:
            low = bound
            first = n
    if y[first] >= 0.0:
        x[first] = _kl_rest(y[first], x[first])
    arm = first
    best = scale[first] / x[first]
    for n in range(N):
        if n == first:
            continue
        if y[n] >= 0.0:
            if scale[n] / x[n] * (1.0 - _BOUND_SLACK) > best:
                continue  # its index exceeds the bound, which exceeds the best: not chosen
            x[n] = _kl_rest(y[n], x[n])
        v = scale[n] / x[n]
        if v < best or (v == best and n < arm):
            best = v
            arm = n
    return arm


#: Relative slack of :func:`_chi2_argmin`'s bounds: above the error of SciPy's quantile.
_QUANTILE_SLACK = 1e-9


@nb.njit(nogil=True, cache=True, inline="always")
def _chi2_quantile(nu, c, t, tail, q_tab, q_at):  # pragma: no cover - compiled
    """q_ν(1 − δ_t) by SciPy's chdtri, once per distinct count and round (``q_tab[c]``, valid
    where ``q_at[c] == t``), as the NumPy rule once per distinct ν."""
    if c >= q_tab.shape[0]:
        return _chdtri(nu, tail, 0)
    if q_at[c] != t:
        q_tab[c] = _chdtri(nu, tail, 0)
        q_at[c] = t
    return q_tab[c]


@nb.njit(nogil=True, cache=True, inline="always")
def _chi2_argmin(r, N, dims, V, count, t, tail, level, q_tab, q_at, q_last, level_last, count_last,
                 lo, hi, exact):  # pragma: no cover - compiled
    r"""argmin_n ν_n V_n / q_{ν_n}(1 − δ_t) (ties: the smallest n, as np.argmin of ChiSquareLCB's
    indices), with SciPy's quantile evaluated only where it can matter.

    Each arm keeps its last exact quantile q₀ (count γ₀, level L₀ = ln 1/δ), which bounds its
    index on both sides until it is evaluated again:

    * from above, ν V / q₀: the quantile grows with ν and with L;
    * from below, if the arm was not pulled since (same ν) and ν ≥ 2, ν V / q̄ with

      .. math:: \bar q = q_0 + (L_t - L_0)\,\frac{2 q_0}{q_0 - \nu + 2}

      for the quantile is concave in L (dq/dL = S(q)/f(q), the inverse hazard of χ²_ν,
      decreases in q as the density is log-concave) and S(q)/f(q) ≤ 2q/(q − ν + 2) for
      q > ν − 2 (the Gamma law's Mills ratio bound).

    An arm whose upper bound is below every other arm's lower bound is the argmin, and no
    quantile is evaluated. Otherwise, as :func:`_kl_argmin`: the arm of the smallest lower
    bound is evaluated first, another only if its bound does not exceed the best index so
    far. Either way the choice is the argmin of the exact indices. ``V``, ``count``,
    ``q_last``, ``level_last``, ``count_last``: the block's (Rb, N) arrays, of which the rule
    reads and writes row ``r``; ``lo``, ``hi`` and ``exact``: scratch of length N."""
    for n in range(N):
        c = count[r, n]
        nu = dims * (c - 1)
        c0 = count_last[r, n]
        q0 = q_last[r, n]
        if c0 == 0:  # no quantile yet (a block's first choice)
            exact[n] = 0.0
            _chi2_exact(r, n, dims, V, count, t, tail, level, q_tab, q_at, q_last, level_last,
                        count_last, lo, hi, exact)  # fmt: skip
            continue
        exact[n] = 0.0
        hi[n] = nu * V[r, n] / q0 * (1.0 + _QUANTILE_SLACK)
        if c0 == c and nu >= 2.0 and q0 > nu - 2.0:
            q = q0 + (level - level_last[r, n]) * (2.0 * q0 / (q0 - nu + 2.0))
            lo[n] = nu * V[r, n] / q * (1.0 - _QUANTILE_SLACK)
        else:
            lo[n] = -np.inf  # unknown: evaluated if it can matter
    first = 0
    for n in range(1, N):
        if hi[n] < hi[first]:
            first = n
    alone = True
    for n in range(N):
        if n != first and not lo[n] > hi[first]:
            alone = False
            break
    if alone:
        return first  # below every other arm's lower bound: the argmin, whatever the values
    first = 0
    for n in range(1, N):
        if lo[n] < lo[first]:
            first = n
    arm = first
    best = _chi2_exact(r, first, dims, V, count, t, tail, level, q_tab, q_at, q_last, level_last,
                       count_last, lo, hi, exact)  # fmt: skip
    for n in range(N):
        if n == first:
            continue
        if exact[n] == 0.0 and lo[n] > best:
            continue  # its index exceeds the bound, which exceeds the best: not chosen
        v = _chi2_exact(r, n, dims, V, count, t, tail, level, q_tab, q_at, q_last, level_last,
                        count_last, lo, hi, exact)  # fmt: skip
        if v < best or (v == best and n < arm):
            best = v
            arm = n
    return arm


@nb.njit(nogil=True, cache=True, inline="always")
def _chi2_exact(r, n, dims, V, count, t, tail, level, q_tab, q_at, q_last, level_last, count_last,
                lo, hi, exact):  # pragma: no cover - compiled
    """Arm n's exact χ²-LCB index (:func:`_chi2_argmin`), its quantile then kept as its last."""
    if exact[n] == 0.0:
        c = count[r, n]
        nu = dims * (c - 1)
        q = _chi2_quantile(nu, c, t, tail, q_tab, q_at)
        q_last[r, n], level_last[r, n], count_last[r, n] = q, level, c
        lo[n] = hi[n] = nu * V[r, n] / q
        exact[n] = 1.0
    return lo[n]


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
    kl_v, kl_y, kl_x = np.empty(N), np.empty(N), np.empty(N)  # KL_LCB's and CHI2_LCB's scratch
    # CHI2_LCB: the round's quantile depends on t and the count only — one per distinct count
    # and round (q_tab[γ], valid where q_at[γ] == t), as the NumPy rule's one per distinct ν.
    size = min(T, _QUANTILE_TABLE) + 1 if rule == CHI2_LCB else 1
    q_tab = np.empty(size)
    q_at = np.zeros(size, np.int64)
    # and each arm's last exact quantile, its level and count (:func:`_chi2_argmin`)
    cached = (Rb, N) if rule == CHI2_LCB else (1, 1)
    q_last, level_last = np.empty(cached), np.empty(cached)
    count_last = np.zeros(cached, np.int64)
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
                    kl_v[n] = V[r, n]
                    kl_y[n] = 2.0 * thr / (params[1] * (count[r, n] - 1))
                arm = _kl_argmin(N, kl_v, kl_y, kl_x)
            elif rule == CHI2_LCB:
                arm = _chi2_argmin(r, N, params[1], V, count, t, tail, level, q_tab, q_at, q_last,
                                   level_last, count_last, kl_v, kl_y, kl_x)  # fmt: skip
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
def _memory_arm(rule, loglog, horizon, tg, N, count, cache_pulls, s2, nu, sgen, y,
                x):  # pragma: no cover - compiled
    """The memory rule's choice at global round ``tg``: the argmin (ties: the smallest n) of
    MemoryThompson.index or MemoryKLLCB.index — the same draws in the same order, the same
    operations; kl-LCB's roots solved to the end only where they can matter
    (:func:`_kl_argmin`). ``y`` and ``x``: scratch of length N."""
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
    return _kl_argmin(N, s2, y, x)


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
                  cache_num, cache_dof, cache_pulls, sgen, nu, wt, mu, m,
                  S):  # pragma: no cover - compiled
    """A rule with memory's choice at global round ``tg`` for one realization: the round's refit
    (``s2`` updated in place) and the argmin of the arms' indices (ties: the smallest n, as
    np.argmin; :func:`_memory_arm`). Used by :func:`run_memory_block` per realization and by the rule itself for one
    realization (a user's loop). Arrays as :func:`_refit_current`, scratch from
    :func:`memory_scratch`; ``count`` as floats."""
    N = s2.shape[0]
    _refit_current(N, d, scalar, gram, count, where, sq_dev, sq_coord, s2, cache_num, cache_dof,
                   nu, wt, mu, m, S)  # fmt: skip
    # wt and mu are free once the refit is done: the choice's scratch.
    return _memory_arm(rule, loglog, horizon, tg, N, count, cache_pulls, s2, nu, sgen, wt, mu)


@nb.njit(nogil=True, cache=True)
def memory_scratch(N, d, scalar):  # pragma: no cover - compiled
    """The scratch arrays of :func:`memory_choice` for N arms and dimension d (ν, weights,
    μ or (G w), m, S), allocated once per block or per rule."""
    nc = 1 if scalar else d
    return np.empty(N), np.empty(N), np.empty(max(N, d)), np.empty(nc), np.empty((N, nc))


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
    nu, wt, mu, m, S = memory_scratch(N, d, scalar)
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
                                    cache_dof[r], cache_pulls[r], sgen, nu, wt, mu, m,
                                    S)  # fmt: skip
            _pull(gen, grad, sqrt_m, scale, r, arm, z, g, total)
            count[r, arm] += 1
            _welford(g, r, arm, count, mean, sq_dev, sq_coord, not scalar)
        if ci < ckpts.shape[0] and ckpts[ci] == t:
            ckpt_counts[ci] = count
            ci += 1
