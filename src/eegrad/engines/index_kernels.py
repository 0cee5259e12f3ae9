r"""Numba kernels: the argmin of a round's confidence indices, evaluated lazily.

kl-LCB's and χ²-LCB's indices are ``scale[n] / root[n]``, with a root that costs logarithms
(kl-LCB: the root x of x − 1 − ln x = y, by Newton's method) or a call of SciPy's χ²
quantile (χ²-LCB). Between two evaluations of an arm its root moves little and in a known
direction, so its last evaluated root bounds the index on both sides (:func:`_bounds`); the
argmin (:func:`lazy_argmin`) evaluates an arm only where the bounds cannot decide. The
evaluated indices are the NumPy rules' values (same functions, same operations), so the choice
is theirs: ``np.argmin`` of the indices, ties to the smallest n.

Imported only when Numba is installed.
"""

from __future__ import annotations

import llvmlite.binding as llvm
import numba as nb
import numpy as np
from numba import types
from numba.extending import get_cython_function_address

from ..selectors.rules import kl_newton_start, kl_newton_step

# SciPy's χ² quantile, the function the NumPy χ²-LCB calls (scipy.special.chdtri), from SciPy's
# Cython API. The compiled code links to it by a symbol name, not an address, so that Numba's
# on-disk cache stays valid from one process to the next.
llvm.add_symbol("eegrad_scipy_chdtri",
                get_cython_function_address("scipy.special.cython_special", "chdtri"))
_chdtri = types.ExternalFunction("eegrad_scipy_chdtri",
                                 types.float64(types.float64, types.float64, types.intc))

#: The kinds of root :func:`lazy_argmin` evaluates.
KL_ROOT, CHI2_QUANTILE = 0, 1

#: Counts below this share one χ² quantile per round (a table of this many floats per block).
QUANTILE_TABLE = 1 << 16

#: Relative slack of the bounds: a bound decides only where it clears the other side by more
#: than the evaluated roots' own error (Newton's last bit; SciPy's quantile: at most 3.7e-15
#: relative against mpmath at 40 digits, on 300 random ν ≤ 40000 and ln 1/δ in [0.5, 30]).
_SLACK = (1e-12, 1e-9)


# kl-LCB's Newton start and step, compiled from their one definition (as eq. (funcf) in
# numba_kernels).
_kl_start = nb.njit(nogil=True, cache=True, inline="always")(kl_newton_start)
_kl_step = nb.njit(nogil=True, cache=True, inline="always")(kl_newton_step)


@nb.njit(nogil=True, cache=True)
def kl_ratio(y):  # pragma: no cover - compiled
    """As eegrad.selectors.rules.kl_lcb_ratio for one value (the same start and steps: at most
    30 Newton steps, stopping at a fixed point)."""
    if not y > 0:
        return 1.0
    x = _kl_start(y)
    for _ in range(30):
        step = _kl_step(x, y)
        if step == x:  # a fixed point: the remaining iterations would return x unchanged
            break
        x = step
    return x


@nb.njit(nogil=True, cache=True, inline="always")
def _chi2_quantile(nu, c, t, tail, q_tab, q_at):  # pragma: no cover - compiled
    """q_ν(1 − δ_t) by SciPy's chdtri, once per distinct count c and round (``q_tab[c]``, valid
    where ``q_at[c] == t``), as the NumPy rule once per distinct ν."""
    if c >= q_tab.shape[0]:
        return _chdtri(nu, tail, 0)
    if q_at[c] != t:
        q_tab[c] = _chdtri(nu, tail, 0)
        q_at[c] = t
    return q_tab[c]


@nb.njit(nogil=True, cache=True)
def index_cache(kind, Rb, N, T):  # pragma: no cover - compiled
    """The state :func:`lazy_argmin` keeps for a block of Rb realizations over T rounds: each
    arm's last root, where it was evaluated (kl-LCB: its level y, −1 for never; χ²-LCB: its
    level ln 1/δ) and at which count (χ²-LCB), and χ²-LCB's per-round quantile table."""
    size = min(T, QUANTILE_TABLE) + 1 if kind == CHI2_QUANTILE else 1
    return (np.empty((Rb, N)), np.full((Rb, N), -1.0), np.zeros((Rb, N), np.int64),
            np.empty(size), np.zeros(size, np.int64))  # fmt: skip


@nb.njit(nogil=True, cache=True, inline="always")
def _bounds(kind, n, r, scale, y, count, level, root_last, at_last, count_last, lo,
            hi):  # pragma: no cover - compiled
    r"""Bounds ``lo[n]`` ≤ index ≤ ``hi[n]`` of arm n from its last root; False where it has
    none (it must be evaluated).

    kl-LCB: the root x(y) increases with y and is concave in y (the inverse of an increasing
    convex function), so from x₀ = x(y₀)

    .. math:: x_0 \le x(y) \le x_0 + (y - y_0)\,\frac{x_0}{x_0 - 1} \quad (y \ge y_0), \qquad
              1 + (x_0 - 1)\,\frac{y}{y_0} \le x(y) \le x_0 \quad (y < y_0),

    the tangent and the chord. χ²-LCB (``y[n]`` = ν): the quantile grows with ν and with the
    level L = ln 1/δ, so q ≥ q₀ while counts and rounds only grow; and for the same ν ≥ 2 it
    is concave in L (dq/dL = S(q)/f(q), the inverse hazard of χ²_ν, decreases in q as the
    density is log-concave), with S(q)/f(q) ≤ 2q/(q − ν + 2) for q > ν − 2 (the Gamma law's
    Mills ratio bound), so

    .. math:: q \le q_0 + (L - L_0)\,\frac{2 q_0}{q_0 - \nu + 2}.
    """
    x0 = root_last[r, n]
    a0 = at_last[r, n]
    yn = y[n]
    slack = _SLACK[kind]
    if kind == KL_ROOT:
        if a0 < 0.0 or not yn > 0.0:
            return False
        if yn >= a0:
            hi[n] = scale[n] / x0 * (1.0 + slack)
            if x0 > 1.0:
                lo[n] = scale[n] / (x0 + (yn - a0) * (x0 / (x0 - 1.0))) * (1.0 - slack)
            else:
                lo[n] = -np.inf
        else:
            lo[n] = scale[n] / x0 * (1.0 - slack)
            hi[n] = scale[n] / (1.0 + (x0 - 1.0) * (yn / a0)) * (1.0 + slack)
        return True
    if count_last[r, n] == 0:
        return False
    hi[n] = scale[n] / x0 * (1.0 + slack)
    if count_last[r, n] == count[r, n] and yn >= 2.0 and x0 > yn - 2.0:
        q = x0 + (level - a0) * (2.0 * x0 / (x0 - yn + 2.0))
        lo[n] = scale[n] / q * (1.0 - slack)
    else:
        lo[n] = -np.inf  # unknown: evaluated if it can matter
    return True


@nb.njit(nogil=True, cache=True, inline="always")
def _evaluate(kind, n, r, scale, y, count, t, tail, level, root_last, at_last, count_last, q_tab,
              q_at, lo, hi, exact):  # pragma: no cover - compiled
    """Arm n's index, its root evaluated (once per round) and kept as its last."""
    if exact[n] == 0.0:
        if kind == KL_ROOT:
            x = kl_ratio(y[n])
            at_last[r, n] = max(y[n], 0.0)
        else:
            c = count[r, n]
            x = _chi2_quantile(y[n], c, t, tail, q_tab, q_at)
            at_last[r, n] = level
            count_last[r, n] = c
        root_last[r, n] = x
        lo[n] = hi[n] = scale[n] / x
        exact[n] = 1.0
    return lo[n]


@nb.njit(nogil=True, cache=True, inline="always")
def lazy_argmin(kind, N, scale, y, r, count, t, tail, level, cache, lo, hi,
                exact):  # pragma: no cover - compiled
    """argmin_n scale[n] / root_n (ties: the smallest n), evaluating roots only where it matters.

    An arm whose upper bound is below every other arm's lower bound is the argmin, nothing
    evaluated. Otherwise the arm of the smallest lower bound is evaluated first, and another
    only if its lower bound does not exceed the best index so far: the argmin of the evaluated
    indices, which is the argmin of all of them.

    Parameters
    ----------
    kind : int
        KL_ROOT (``y``: the levels y_n) or CHI2_QUANTILE (``y``: the degrees of freedom ν_n,
        with ``t``, ``tail`` = δ_t and ``level`` = ln 1/δ_t).
    scale, y : (N,) arrays
        This round's index scales (kl-LCB: V_n or σ̂_n²; χ²-LCB: ν_n V_n) and levels.
    r : int
        The realization: the row of ``count`` (χ²-LCB's counts, (Rb, N) int) and of the cache.
    cache : tuple
        :func:`index_cache`'s arrays.
    lo, hi, exact : (N,) arrays
        Scratch.
    """
    root_last, at_last, count_last, q_tab, q_at = cache
    for n in range(N):
        exact[n] = 0.0
        if not _bounds(kind, n, r, scale, y, count, level, root_last, at_last, count_last, lo,
                       hi):  # fmt: skip
            _evaluate(kind, n, r, scale, y, count, t, tail, level, root_last, at_last, count_last,
                      q_tab, q_at, lo, hi, exact)  # fmt: skip
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
    best = _evaluate(kind, first, r, scale, y, count, t, tail, level, root_last, at_last,
                     count_last, q_tab, q_at, lo, hi, exact)  # fmt: skip
    for n in range(N):
        if n == first:
            continue
        if exact[n] == 0.0 and lo[n] > best:
            continue  # its index exceeds the bound, which exceeds the best: not chosen
        v = _evaluate(kind, n, r, scale, y, count, t, tail, level, root_last, at_last, count_last,
                      q_tab, q_at, lo, hi, exact)  # fmt: skip
        if v < best or (v == best and n < arm):
            best = v
            arm = n
    return arm
