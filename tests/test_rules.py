"""The selection rules that need no unknown constants: indices against direct computations,
monotonicity, consistency and parameter errors."""

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import brentq

from eegrad import (
    KLLCB,
    Arms,
    ChiSquareLCB,
    GaussianOracle,
    MemoryThompson,
    Quadratic,
    ThompsonVariance,
    default_selector,
    estimate_gradient,
)
from eegrad.config import SelectorConfig
from eegrad.experiment import build_selector
from eegrad.selectors import DEFAULT_RULE
from eegrad.selectors.rules import kl_lcb_ratio


def state(sel, counts, sq, d=2):
    """Put a selector in a given statistics state (R = rows of counts)."""
    counts = np.asarray(counts)
    sel.init(counts.shape[0], counts.shape[1], d)
    sel.stats.count[:] = counts
    sel.stats.sq_dev[:] = sq
    return sel


COUNTS = np.array([[2, 5, 40], [3, 3, 3], [10, 2, 7]])
SQ = np.array([[1.5, 8.0, 20.0], [0.2, 4.0, 1.0], [9.0, 0.01, 3.3]])


@pytest.mark.parametrize("dims", ["d", 1.0, 1.5])
@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
def test_chi_square_index_against_scipy_quantile(dims, alpha):
    sel = state(ChiSquareLCB(exponent=alpha, dims=dims), COUNTS, SQ)
    t = 57
    per_pull = 2 if dims == "d" else dims
    nu = per_pull * (COUNTS - 1)
    V = SQ / (COUNTS - 1)
    expected = nu * V / stats.chi2.ppf(1 - t ** (-alpha), nu)
    np.testing.assert_allclose(sel.index(t), expected, rtol=1e-10)


@pytest.mark.parametrize("c", [0.0, 1.0])
@pytest.mark.parametrize("dims", ["d", 1.0])
def test_kl_index_against_scalar_bisection(c, dims):
    sel = state(KLLCB(loglog=c, dims=dims), COUNTS, SQ)
    t = 300
    got = sel.index(t)
    per_pull = 2 if dims == "d" else dims
    level = np.log(t) + c * np.log(np.log(t))
    for (r, n), g in np.ndenumerate(COUNTS):
        nu = per_pull * (g - 1)
        V = SQ[r, n] / (g - 1)

        def h(s, V=V, nu=nu):
            return nu / 2 * (V / s - 1 - np.log(V / s)) - level

        s = brentq(h, V * 1e-12, V, xtol=1e-15 * V, rtol=1e-14)  # the smallest s on [0, V]
        np.testing.assert_allclose(got[r, n], s, rtol=1e-9)


def test_kl_ratio_root():
    y = np.array([0.0, 1e-8, 0.3, 5.0, 400.0])
    x = kl_lcb_ratio(y)
    np.testing.assert_allclose(x - 1 - np.log(x), y, rtol=1e-10, atol=1e-15)
    assert np.all(x >= 1)


def test_kl_ratio_for_tiny_levels_and_compiled_equal():
    """Where x − 1 − ln x cancels (y down to 1e-24), the root against its expansion
    1 + s + s²/3 + s³/36 (s = √(2y); the next term is O(s⁴), so 1e-6 relative on x − 1 is far
    above it), to four spacings of the floats at 1 (x − 1 cannot be finer); and the compiled
    solve equals the NumPy one from 1e-24 to 1e8 to within 2 units in the last place: the same
    steps, but NumPy's vectorised log and the C library's (the kernel's) differ in the last bit
    for a few arguments in a thousand."""
    y = np.logspace(-24, -8, 9)
    s = np.sqrt(2 * y)
    np.testing.assert_allclose(kl_lcb_ratio(y) - 1, s + s * s / 3 + s**3 / 36, rtol=1e-6,
                               atol=4 * np.finfo(float).eps)  # fmt: skip
    pytest.importorskip("numba")
    from eegrad.engines.index_kernels import kl_ratio

    y = np.concatenate([[0.0], np.logspace(-24, 8, 300)])
    np.testing.assert_array_max_ulp(np.array([kl_ratio(v) for v in y]), kl_lcb_ratio(y), maxulp=2)


def test_compiled_kl_argmin_is_the_argmin_of_the_solved_indices():
    """The compiled kl-LCB choice solves an arm's root only where the bounds from its last
    solved root (tangent and chord, kept between rounds) cannot decide: its choice must be
    np.argmin of the fully solved indices — over runs of rounds whose levels move up and down
    (from 1e-12 to 50, some 0), with random scales, and with near ties: scales s_n =
    x_n (1 + k ε) for the solved roots x_n, so that the indices tie or differ in the last few
    bits, where only the solve can decide (ties: the smallest n)."""
    pytest.importorskip("numba")
    from eegrad.engines.index_kernels import KL_ROOT, index_cache, kl_ratio, lazy_argmin

    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(300):
        N = int(rng.integers(2, 7))
        cache = index_cache(KL_ROOT, 2, N, 1)
        scratch = np.empty(N), np.empty(N), np.empty(N)
        y = 10.0 ** rng.uniform(-12, np.log10(50), N)
        for rnd in range(20):
            y = y * np.exp(rng.normal(0.0, [0.01, 0.3][rnd % 2], N))  # small and large moves
            y[rng.random(N) < 0.05] = 0.0
            x = np.array([kl_ratio(v) for v in y])
            if rnd % 3 == 0:
                scale = x * (1 + rng.integers(-2, 3, N) * np.finfo(float).eps)
            else:
                scale = rng.uniform(0.5, 2.0, N)
            want = int(np.argmin(scale / x))
            got = lazy_argmin(KL_ROOT, N, scale, y, 1, cache[2], 0, 0.0, 0.0, cache, *scratch)
            assert got == want, (y, scale)
            checked += 1
    assert checked == 6000


def test_compiled_chi2_argmin_is_the_argmin_of_the_quantile_indices():
    """The compiled χ²-LCB choice calls SciPy's quantile only where the bounds from an arm's
    last quantile cannot decide (above: the quantile grows with ν and the level; below, for an
    arm not pulled since: the tangent in the level). Over runs of rounds in which one arm is
    pulled at a time (counts and t only grow, as in a run), its choice must be np.argmin of
    ν V / q_ν(1 − t^(−e)) computed by SciPy — on random V, and on near ties (V set so that the
    indices tie or differ in the last bits)."""
    pytest.importorskip("numba")
    from scipy.special import chdtri

    from eegrad.engines.index_kernels import CHI2_QUANTILE, index_cache, lazy_argmin

    rng = np.random.default_rng(12)
    checked = 0
    for trial in range(200):
        N, dims, e = int(rng.integers(2, 6)), float(rng.integers(1, 4)), 2.0
        T = 400
        cache = index_cache(CHI2_QUANTILE, 1, N, T)
        scratch = np.empty(N), np.empty(N), np.empty(N)
        count = rng.integers(2, 6, (1, N))
        V = rng.uniform(0.5, 2.0, N)
        for t in range(2 * N + 1, T, 7):
            nu = dims * (count[0] - 1.0)
            q = chdtri(nu, float(t) ** -e)
            if trial % 2 and t % 3 == 0:  # near ties: equal indices up to a few bits
                V = q / nu * (1 + rng.integers(-2, 3, N) * np.finfo(float).eps)
            want = int(np.argmin(nu * V / q))
            got = lazy_argmin(CHI2_QUANTILE, N, nu * V, nu, 0, count, t, float(t) ** -e,
                              e * np.log(t), cache, *scratch)  # fmt: skip
            assert got == want, (t, count, V)
            checked += 1
            pulled = got if rng.random() < 0.7 else int(rng.integers(N))
            count[0, pulled] += 1
            V[pulled] *= np.exp(rng.normal(0.0, 0.1))  # the pulled arm's statistic moves
    assert checked > 5000


def test_thompson_draws_from_the_inverse_gamma_posterior():
    sel = state(ThompsonVariance(seed=3), COUNTS, SQ)
    nu = 2 * (COUNTS - 1)
    V = SQ / (COUNTS - 1)
    g = np.random.default_rng(3).standard_gamma(nu / 2)
    np.testing.assert_allclose(sel.index(11), nu * V / (2 * g), rtol=1e-14)


def test_thompson_posterior_law():
    """Many draws for one arm: ν V / s̃ ~ χ²_ν, checked by a Kolmogorov–Smirnov test (fixed
    seed; the p-value threshold 1e-3 bounds the false-alarm rate)."""
    R = 20000
    sel = state(ThompsonVariance(seed=1), np.full((R, 1), 6), np.full((R, 1), 10.0))
    nu, V = 10, 2.0
    draws = sel.index(20)[:, 0]
    assert stats.kstest(nu * V / draws, stats.chi2(nu).cdf).pvalue > 1e-3


@pytest.mark.parametrize("make", [lambda: ChiSquareLCB(), lambda: KLLCB(), lambda: KLLCB(loglog=1.0)])
def test_lcb_indices_are_monotone(make):
    """Increasing in V at fixed γ; increasing in γ at fixed V (a tighter interval)."""
    gammas = np.arange(2, 40)
    Vs = np.linspace(0.1, 10, 38)
    sel = state(make(), np.full((1, len(Vs)), 8), (Vs * 7)[None])
    assert np.all(np.diff(sel.index(100)[0]) > 0)
    sel = state(make(), gammas[None], (3.0 * (gammas - 1))[None])
    idx = sel.index(100)[0]
    assert np.all(np.diff(idx) > 0)
    assert np.all(idx < 3.0)  # a lower bound on the scale


@pytest.mark.parametrize("make", [lambda: ChiSquareLCB(), lambda: KLLCB(),
                                  lambda: ThompsonVariance(), default_selector])  # fmt: skip
def test_rules_are_consistent(make):
    """Normalised regret Σ Δ_n γ_T(n)/(T σ*²) falls towards 0: at T = 3000 it is under a third
    of its value at T = 100 (each estimated from 300 realizations; the SE of each mean is under
    5 % of it here, so the factor 3 is far outside the noise)."""
    arms = Arms([3.0, 2.0, 1.0])
    oracle = GaussianOracle(Quadratic(2), arms)
    w = np.ones((300, 2))
    regret = []
    for T in (100, 3000):
        res = estimate_gradient(oracle, make(), w, T, rng=T)
        regret.append((res.counts @ arms.delta).mean() / (T * arms.sigma2_star))
    assert regret[1] < regret[0] / 3


def test_default_selector():
    """The memory study's winner (README, "Selection with memory"): Thompson with memory."""
    sel = default_selector()
    assert isinstance(sel, MemoryThompson)
    assert sel.get_params() == {"shape": "auto", "discount": 1.0, "window": 64, "seed": 0}
    assert DEFAULT_RULE == "memory_thompson"
    assert isinstance(build_selector(SelectorConfig(rule=DEFAULT_RULE)), MemoryThompson)


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: ChiSquareLCB(exponent=0.0), ValueError, "'exponent' parameter of ChiSquareLCB"),
        (lambda: KLLCB(loglog=-1.0), ValueError, "'loglog' parameter of KLLCB must be a finite float >= 0"),
        (lambda: KLLCB(dims=0.5), ValueError, "'dims' parameter of KLLCB"),
        (lambda: ThompsonVariance(dims="iso"), TypeError, "'dims' parameter of ThompsonVariance"),
        (lambda: ThompsonVariance(seed=-1), ValueError, "'seed' parameter"),
    ],
)
def test_bad_parameters(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_dims_larger_than_d():
    oracle = GaussianOracle(Quadratic(2), Arms([2.0, 1.0]))
    with pytest.raises(ValueError, match=r"'dims' parameter of KLLCB must be 'd' or a float in"):
        estimate_gradient(oracle, KLLCB(dims=3.0), np.ones((2, 2)), 6, rng=0)


def test_renamed_parameters_still_work_with_a_deprecation_warning():
    # One name, one meaning: c and alpha are EE-Grad's (the paper's symbols); the kl-LCB's
    # ln ln t weight is now 'loglog' and the χ²-LCB's exponent 'exponent'.
    from eegrad import MemoryKLLCB

    with pytest.warns(DeprecationWarning, match="'c' parameter of KLLCB is now 'loglog'"):
        assert KLLCB(c=2.0).loglog == 2.0
    with pytest.warns(DeprecationWarning, match="'c' parameter of MemoryKLLCB is now 'loglog'"):
        assert MemoryKLLCB(c=2.0).get_params()["loglog"] == 2.0
    with pytest.warns(DeprecationWarning, match="'alpha' parameter of ChiSquareLCB"):
        assert ChiSquareLCB(alpha=2.0).exponent == 2.0
    with pytest.raises(ValueError, match="both 'loglog' and its old name 'c'"):
        KLLCB(loglog=1.0, c=2.0)
