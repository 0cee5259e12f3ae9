"""Selection with memory across iterates: the model fit, the posterior, the protocol, changing
costs and unbiasedness."""

import numpy as np
import pytest
from conftest import preset_copy
from scipy import optimize, stats

from eegrad import (
    Arms,
    GaussianOracle,
    GradientEstimator,
    MemoryKLLCB,
    MemoryThompson,
    OptimalArm,
    Quadratic,
    estimate_gradient,
    run_sgd,
)
from eegrad._random import RealizationStreams
from eegrad.cli import main as cli
from eegrad.results import read_table


def evidence(seed=0, K=3, N=3, d=2):
    """Sufficient statistics of simulated pulls: count (1, K, N), mean (1, K, N, d), Q."""
    rng = np.random.default_rng(seed)
    s2 = np.array([2.0, 1.0, 3.0])[:N]
    count = rng.integers(1, 6, size=(1, K, N)).astype(float)
    mean = np.zeros((1, K, N, d))
    Q = np.zeros((1, K, N, d))
    for k in range(K):
        m = rng.uniform(0.2, 3.0, d)
        mu = rng.standard_normal(d)
        for n in range(N):
            x = mu + np.sqrt(s2[n] * m) * rng.standard_normal((int(count[0, k, n]), d))
            mean[0, k, n] = x.mean(axis=0)
            Q[0, k, n] = ((x - x.mean(axis=0)) ** 2).sum(axis=0)
    return count, mean, Q


def pseudo_loglik(params, count, mean, Q):
    """The objective whose fixed point the fit is: Σ −ν/2 ln(σ² m) − S(μ)/(2σ² m)."""
    _, K, N, d = mean.shape
    ls2 = np.concatenate([[0.0], params[: N - 1]])  # σ²_1 = 1 fixes the scale
    lm = params[N - 1 : N - 1 + K * d].reshape(K, d)
    mu = params[N - 1 + K * d :].reshape(K, d)
    c = count[0]
    gamma = c.sum(axis=1)
    nu = c * (1 - 1 / gamma)[:, None]
    S = Q[0] + c[..., None] * (mean[0] - mu[:, None, :]) ** 2
    s2 = np.exp(ls2)[None, :, None]
    m = np.exp(lm)[:, None, :]
    return -(np.sum(-nu[..., None] / 2 * np.log(s2 * m)) - np.sum(S / (2 * s2 * m)))


def test_fit_maximises_the_pseudo_likelihood():
    count, mean, Q = evidence()
    sel = MemoryKLLCB()
    sel.init(1, 3, 2)
    sel._past_count, sel._past_where, sel._past_sq = count, mean, Q
    sel.iterations = 500
    sel._refit_past()
    K, N, d = 3, 3, 2
    x0 = np.zeros(N - 1 + 2 * K * d)
    res = optimize.minimize(pseudo_loglik, x0, args=(count, mean, Q), method="BFGS",
                            options={"gtol": 1e-10, "maxiter": 10_000})  # fmt: skip
    brute = np.exp(np.concatenate([[0.0], res.x[: N - 1]]))
    np.testing.assert_allclose(sel.sigma2[0] / sel.sigma2[0, 0], brute, rtol=1e-5)


def test_scalar_shape_for_large_d_recovers_ratios():
    """d = 20 > 16: 'auto' pools coordinates (M_k = m_k I). With isotropic noise of very
    different scale per iterate the fitted σ² ratios match the truth (400 pulls per arm and
    iterate, 20 coordinates: relative SE ≈ 1/√(4000) per ratio; tolerance 5 %)."""
    d, N, K = 20, 3, 3
    s2 = np.array([2.0, 1.0, 4.0])
    arms = Arms(s2)
    sel = MemoryKLLCB()
    rng = np.random.default_rng(3)
    for k in range(K):
        scale = [0.1, 10.0, 1.0][k]
        oracle = GaussianOracle(Quadratic(d), arms, M=lambda w, g, s=scale: np.full_like(w, s))
        w = rng.standard_normal((1, d))
        at = oracle.at(w)
        if k == 0:
            sel.init(1, N, d, truth=at.truth())
        else:
            sel.next_iterate(truth=at.truth())
        streams = RealizationStreams(np.random.default_rng(k), 1)
        for n in range(N):
            for _ in range(400):
                a = np.array([n])
                sel.stats.update(a, at.sample(a, streams))
    assert sel.scalar
    sel.next_iterate()
    ratio = sel.sigma2[0] / sel.sigma2[0, 1]
    np.testing.assert_allclose(ratio, s2 / s2[1], rtol=0.05)


def test_posterior_draws_follow_the_inverse_gamma():
    R, nu, s2 = 20000, 12.0, 1.7
    sel = MemoryThompson(seed=5)
    sel.init(R, 1, 2)
    draws = sel.index(10, np.full((R, 1), s2), np.full((R, 1), nu))[:, 0]
    law = stats.invgamma(nu / 2, scale=nu * s2 / 2)
    assert stats.kstest(draws, law.cdf).pvalue > 1e-3  # fixed seed; false-alarm bound 1e-3


def paper(T):
    return GaussianOracle(Quadratic(2), Arms(np.array([50.0, 26.0, 16.7]) * T / 50))


def test_next_iterate_keeps_and_reset_forgets():
    oracle = paper(50)
    w = np.random.default_rng(0).standard_normal((50, 2))
    sel = MemoryThompson()
    first = estimate_gradient(oracle, sel, w, 50, rng=1)
    assert np.all(first.counts.min(axis=1) >= 2)  # the first iterate pulls every arm twice
    second = estimate_gradient(oracle, sel, w, 50, rng=2, new_iterate=True)
    assert sel.iterate == 1
    assert sel._past_count.shape == (50, 1, 3)
    # Later iterates choose by index from the first round: no forced exploration.
    assert np.mean(second.counts.min(axis=1) < 2) > 0.5
    sel.reset()
    assert sel.iterate == 0
    assert sel._past_count.shape == (50, 0, 3)


def test_memory_beats_per_iterate_rules_in_sgd():
    """Figure 1 setting, T = 50: the last iterate's pulls of the best arm grow across iterates
    with memory (averages over 1000 runs; the gap between iterates 1 and 5, ~12 pulls, is many
    times the SE of ~0.3)."""
    oracle = paper(50)
    w0 = np.random.default_rng(0).standard_normal((1000, 2))
    out = run_sgd(oracle, MemoryKLLCB(), w0, 5, 50, 0.85, rng=1)
    best = out.counts[:, :, 2].mean(axis=0)
    assert best[-1] > best[0] + 5
    assert np.all(out.counts.sum(axis=2) == 50)


def test_discount_forgets_a_changed_arm():
    """The best arm changes at iterate 3: with a discount the rule follows it sooner."""
    before = GaussianOracle(Quadratic(2), Arms([4.0, 12.0]))
    after = GaussianOracle(Quadratic(2), Arms([12.0, 4.0]))
    w0 = np.random.default_rng(0).standard_normal((600, 2))
    oracles = [before, before, after, after]
    keep = run_sgd(oracles, MemoryKLLCB(), w0, 4, 40, 0.5, rng=1)
    forget = run_sgd(oracles, MemoryKLLCB(discount=0.2), w0, 4, 40, 0.5, rng=1)
    # Pulls of the new best arm (n = 2) at iterate 3, averaged over 600 runs.
    assert forget.counts[:, 2, 1].mean() > keep.counts[:, 2, 1].mean() + 3


@pytest.mark.parametrize("make", [MemoryKLLCB, MemoryThompson])
def test_estimate_stays_unbiased(make):
    """G is the plain mean of the T outputs: E[G − ∇F] = 0 (4 SE per coordinate)."""
    oracle = paper(50)
    R = 20000
    w = np.tile([1.0, -0.5], (R, 1))
    sel = make()
    estimate_gradient(oracle, sel, w, 50, rng=1)
    res = estimate_gradient(oracle, sel, w, 50, rng=2, new_iterate=True)
    err = res.gradient - w
    assert np.all(np.abs(err.mean(axis=0)) < 4 * err.std(axis=0) / np.sqrt(R))


def loop_against_simulator(oracle, w, T, iterates, convert=lambda g: g, rtol=1e-12):
    """Run a user loop and the simulator side by side (same seed, MemoryThompson) and check at
    every iterate that their pulls and estimates agree; returns both rules."""
    sim_gen, est_gen = np.random.default_rng(4), np.random.default_rng(4)
    sim = MemoryThompson()
    est = GradientEstimator(MemoryThompson(), oracle.arms, T, dim=w.shape[1], rng=est_gen)
    at = oracle.at(w)
    for iterate in range(iterates):
        res = estimate_gradient(oracle, sim, w, T, sim_gen, engine="numpy",
                                new_iterate=iterate > 0)  # fmt: skip
        if iterate > 0:
            est.next_iterate()
        while not est.done:
            n = est.ask()
            est.tell(convert(at.sample(np.array([n - 1]), est.streams)[0]))
        np.testing.assert_array_equal(est.counts, res.counts[0])
        out = est.result()
        np.testing.assert_allclose(np.asarray(out), res.gradient[0], rtol=rtol)
    return est, sim


def test_estimator_with_memory_equals_simulator_over_two_iterates():
    est, sim = loop_against_simulator(paper(50), np.array([[1.0, -0.5]]), 30, 2)
    assert est._mode == "full"  # d = 2: the whole gradient on the host
    np.testing.assert_allclose(est.selector.sigma2, sim.sigma2, rtol=1e-12)


def test_estimator_next_iterate_keeps_memory():
    est = GradientEstimator(MemoryThompson(), 3, T=6, dim=2, rng=0)
    rng = np.random.default_rng(0)
    for _ in range(2):
        while not est.done:
            n = est.ask()
            est.tell(rng.standard_normal(2) * n)
        est.next_iterate()
    assert est.selector.iterate == 2
    est.reset()
    assert est.selector.iterate == 0


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: MemoryKLLCB(discount=0.0), ValueError, "'discount' parameter of MemoryKLLCB"),
        (lambda: MemoryKLLCB(discount=1.5), ValueError, "'discount'"),
        (lambda: MemoryThompson(shape="full"), TypeError, "'shape' parameter of MemoryThompson"),
        (lambda: MemoryKLLCB(loglog=-1.0), ValueError, "'loglog' parameter of MemoryKLLCB"),
        (lambda: MemoryKLLCB(horizon=0), ValueError, "'horizon' parameter of MemoryKLLCB"),
        (lambda: MemoryThompson(window=0), ValueError, "'window' parameter of MemoryThompson"),
    ],
)
def test_bad_parameters(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_memory_study_runs(tmp_path):
    f = preset_copy(tmp_path, "memory", {"T": "[20]"})
    out = tmp_path / "m"
    assert cli(["run", str(f), "--out", str(out), "-R", "40", "-q"]) == 0
    rows = read_table(out / "memory.csv")
    assert {r["method"] for r in rows} == {"eegrad-c1", "kl_lcb", "thompson", "memory_kl_lcb",
                                           "memory_kl_lcb-hKT", "memory_thompson"}  # fmt: skip
    assert all(float(r["final_gap_ratio"]) > 0 for r in rows)
    pulls = read_table(out / "memory_pulls.csv")
    assert {int(p["k"]) for p in pulls} == {1, 2, 3, 4, 5}


def test_optimal_oracle_unchanged_by_memory_protocol():
    oracle = paper(50)
    w0 = np.random.default_rng(0).standard_normal((10, 2))
    out = run_sgd(oracle, OptimalArm(), w0, 3, 50, 0.85, rng=1)
    assert np.all(out.counts[:, :, 2] == 50)


def test_scalar_shape_keeps_no_d_sized_history():
    """Scalar shape: a past iterate is kept as N×N Gram numbers, whatever d, and the distances
    ‖x̄_n − μ‖² it gives equal those of the means for any weights (exact)."""
    count, mean, Q = evidence(K=3, d=40)
    sel = MemoryKLLCB(shape="scalar")
    sel.init(1, 3, 40)
    sq = Q.sum(axis=-1, keepdims=True)
    s2 = np.array([[0.7, 1.3, 2.0]])
    centred = mean - mean.mean(axis=2, keepdims=True)  # any common shift leaves distances alone
    gram = np.einsum("rknd,rkmd->rknm", centred, centred)
    from_means = sel._terms(count, mean, sq, s2)
    from_gram = sel._terms(count, gram, sq, s2, gram=True)
    np.testing.assert_allclose(from_gram[0], from_means[0], rtol=1e-10)
    np.testing.assert_allclose(from_gram[1], from_means[1], rtol=1e-12)
    # Through the protocol: the stored history has no d axis.
    oracle = GaussianOracle(Quadratic(40), Arms([2.0, 1.0, 3.0]))
    w = np.random.default_rng(1).standard_normal((5, 40))
    estimate_gradient(oracle, sel, w, 12, rng=2)
    estimate_gradient(oracle, sel, w, 12, rng=3, new_iterate=True)
    assert sel._past_where.shape == (5, 1, 3, 3)


def test_window_folds_old_iterates():
    """A window as long as the run changes nothing; a short one bounds the history and keeps
    the fit close (the folded iterates keep their fitted scales)."""
    oracle = paper(50)
    w0 = np.random.default_rng(0).standard_normal((200, 2))
    full, wide, short = (MemoryKLLCB(window=v) for v in (None, 8, 2))
    outs = [run_sgd(oracle, sel, w0, 6, 50, 0.85, rng=1) for sel in (full, wide, short)]
    np.testing.assert_array_equal(outs[0].counts, outs[1].counts)
    np.testing.assert_allclose(wide.sigma2, full.sigma2, rtol=1e-12)
    assert short._past_count.shape[1] == 2
    assert full._past_count.shape[1] == 5
    np.testing.assert_array_equal(short.pulls().sum(axis=1), 6 * 50)  # folded pulls still count
    # Same decisions up to iterate 3 (nothing folded before its end), close fits after.
    np.testing.assert_array_equal(outs[2].counts[:, :3], outs[0].counts[:, :3])
    ratio = np.log(short.sigma2 / full.sigma2)
    assert np.median(np.abs(ratio)) < 0.05


def test_horizon_level_falls_to_greedy_at_the_end():
    """Told H, the level ln⁺((H − t + 1)/(N p_n)) is 0 at the last round: the index is the
    fitted σ̂²; past H the rule warns and stays greedy."""
    sel = MemoryKLLCB(horizon=20)
    oracle = paper(50)
    w = np.random.default_rng(0).standard_normal((4, 2))
    estimate_gradient(oracle, sel, w, 10, rng=1)
    estimate_gradient(oracle, sel, w, 9, rng=2, new_iterate=True)
    s2, nu = sel._refit_current()
    np.testing.assert_array_equal(sel.index(20, s2, nu), s2)
    early = sel.index(5, s2, nu)  # rounds remain: a lower bound for the arms pulled least
    rare = np.argmin(sel.pulls(), axis=1)
    assert np.all(early <= s2)
    assert np.all(early[np.arange(4), rare] < s2[np.arange(4), rare])
    with pytest.warns(RuntimeWarning, match="horizon=20"):
        sel.index(21, s2, nu)


def test_horizon_rule_in_a_study_and_on_the_command_line(tmp_path):
    f = preset_copy(tmp_path, "figure1", {"T": "[20]"})
    out = tmp_path / "f"
    assert cli(["run", str(f), "--out", str(out), "-R", "20", "-q", "--rule", "MemoryKLLCB"]) == 0
    assert "memory_kl_lcb" in {r["method"] for r in read_table(out / "figure1.csv")}


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_estimator_scalar_shape_sends_gram_rows_and_matches_the_simulator(backend):
    """d = 40: the user loop keeps the arm means in the gradients' backend and sends the rule N
    Gram numbers per round; its choices, estimates and fit equal the simulator's, which works
    from the means themselves (equal up to rounding)."""
    convert = lambda g: g
    if backend == "torch":
        torch = pytest.importorskip("torch")
        convert = torch.as_tensor
    d = 40
    oracle = GaussianOracle(Quadratic(d), Arms([3.0, 1.0, 2.0]))
    w = np.random.default_rng(0).standard_normal((1, d)) + 5.0  # means far from 0
    est, sim = loop_against_simulator(oracle, w, 24, 3, convert, rtol=1e-10)
    assert est._mode == "gram"
    np.testing.assert_allclose(est.selector.sigma2, sim.sigma2, rtol=1e-8)
    assert est.selector._past_where.shape == (1, 2, 3, 3)


def test_posterior_sampler_against_a_grid_posterior():
    """The model's exact posterior of r = ln(σ₂²/σ₁²) — μ_k and every m_{k,i} integrated out
    (flat prior on μ, Jeffreys on m and on the scale) — on a grid, against MemoryThompson's
    draws of ln(σ̃₂²/σ̃₁²), which plug in the fitted m_{k,i} (the stated approximation). Arm 1
    is pulled 200 times per iterate, so the m's are precise and the two laws must agree: KS
    distance under 0.02 (for identical laws, 20000 draws exceed 0.0138 with probability 1e-3;
    the margin is for the plug-in approximation)."""
    rng = np.random.default_rng(11)
    K, d = 3, 2
    s2_true = np.array([1.0, 2.0])
    count = np.zeros((1, K, 2))
    count[0, :, 0], count[0, :, 1] = 200, 8
    mean = np.zeros((1, K, 2, d))
    Q = np.zeros((1, K, 2, d))
    for k in range(K):
        m = rng.uniform(0.3, 3.0, d)
        mu = rng.standard_normal(d)
        for n in range(2):
            x = mu + np.sqrt(s2_true[n] * m) * rng.standard_normal((int(count[0, k, n]), d))
            mean[0, k, n], Q[0, k, n] = x.mean(axis=0), ((x - x.mean(axis=0)) ** 2).sum(axis=0)
    # Grid posterior: per (k, i), integrating μ then m gives
    # (Σ_n γ_n/σ_n²)^(−1/2) Π_n σ_n^(−γ_n) A^(−(Γ−1)/2), A = Σ_n (Q_n + γ_n(x̄_n − μ̂)²)/σ_n².
    r = np.linspace(-3.0, 4.0, 4001)
    logp = np.zeros_like(r)
    for k in range(K):
        g = count[0, k]
        for i in range(d):
            prec = g[:, None] / np.stack([np.ones_like(r), np.exp(r)])  # (2, grid)
            mu_hat = (prec * mean[0, k, :, i, None]).sum(axis=0) / prec.sum(axis=0)
            A = ((Q[0, k, :, i, None] + g[:, None] * (mean[0, k, :, i, None] - mu_hat) ** 2)
                 / np.stack([np.ones_like(r), np.exp(r)])).sum(axis=0)  # fmt: skip
            logp += (
                -0.5 * g[1] * r - 0.5 * np.log(prec.sum(axis=0)) - 0.5 * (g.sum() - 1) * np.log(A)
            )
    cdf = np.cumsum(np.exp(logp - logp.max()))
    cdf /= cdf[-1]
    # The rule's fit, then R draws from its posterior.
    sel = MemoryThompson(seed=3)
    sel.init(1, 2, d)
    sel._past_count, sel._past_where, sel._past_sq = count, mean, Q
    sel.iterations = 500
    sel._refit_past()
    s2, nu = sel._refit_current()
    R = 20000
    sel.init(R, 2, d)
    draws = sel.index(100, np.repeat(s2, R, axis=0), np.repeat(nu, R, axis=0))
    log_ratio = np.log(draws[:, 1] / draws[:, 0])
    ks = stats.kstest(log_ratio, lambda x: np.interp(x, r, cdf)).statistic
    assert ks < 0.02


def test_oracles_that_change_N_are_refused_for_a_rule_with_memory():
    # Memory across iterates needs one set of arms; per-iterate oracles with another N used to
    # drop the evidence silently. Rules without memory start afresh at every iterate anyway.
    from eegrad import (
        Arms,
        GaussianOracle,
        InvalidParameterError,
        Quadratic,
        ThompsonVariance,
        estimate_gradient,
        run_sgd,
    )

    obj = Quadratic(d=2)
    three, four = GaussianOracle(obj, Arms([3.0, 2.0, 2.5])), GaussianOracle(obj, Arms([3.0, 2.0, 2.5, 2.8]))
    w0 = np.ones((4, 2))
    with pytest.raises(InvalidParameterError, match=r"iterate 2 with N = 4"):
        run_sgd([three, four], MemoryThompson(), w0, 2, 8, 0.5, 0)
    sel = MemoryThompson()
    estimate_gradient(three, sel, w0, 8, 0)
    with pytest.raises(InvalidParameterError, match="keeps its evidence across iterates"):
        estimate_gradient(four, sel, w0, 8, 0, new_iterate=True)
    run_sgd([three, four], ThompsonVariance(), w0, 2, 8, 0.5, 0)  # no memory: allowed


@pytest.mark.parametrize("make", [lambda: MemoryThompson(discount=0.8),
                                  lambda: MemoryKLLCB(loglog=1.0),
                                  lambda: MemoryKLLCB(horizon=3 * 40, window=1)])  # fmt: skip
@pytest.mark.parametrize("d", [3, 40])  # diagonal shape (whole gradients); scalar (Gram rows)
def test_estimator_compiled_choice_equals_numpy(make, d):
    """GradientEstimator's per-round choice of a rule with memory, compiled (engine "numba":
    memory_kernels.memory_choice) and in NumPy: the same pulls at every round over three
    iterates, and the same fit and estimates (the kernel repeats the NumPy operations in their
    order; 1e-12 leaves room for the last bit of a log)."""
    pytest.importorskip("numba")
    oracle = GaussianOracle(Quadratic(d), Arms([3.0, 1.0, 2.0, 1.5]))
    w = np.random.default_rng(1).standard_normal(d) + 2.0
    at = oracle.at(w[None])
    loops = [GradientEstimator(make(), oracle.arms, 40, dim=d, rng=5, engine=e)
             for e in ("numpy", "numba")]  # fmt: skip
    assert not loops[0].selector.compiled_choice
    assert loops[1].selector.compiled_choice
    for iterate in range(3):
        for est in loops:
            if iterate:
                est.next_iterate()
        while not loops[0].done:
            arms = [est.ask() for est in loops]
            assert arms[0] == arms[1]
            g = at.sample(np.array([arms[0] - 1]), loops[0].streams)[0]
            for est in loops:
                est.tell(g)
        np.testing.assert_allclose(loops[1].result(), loops[0].result(), rtol=1e-12)
        np.testing.assert_allclose(loops[1].selector.sigma2, loops[0].selector.sigma2,
                                   rtol=1e-12)  # fmt: skip


def test_estimator_engine_is_checked():
    with pytest.raises(ValueError, match="'engine' parameter of GradientEstimator must be one"):
        GradientEstimator(MemoryThompson(), 3, T=6, dim=2, engine="gpu")


@pytest.mark.parametrize("engine", ["numpy", "auto"])
def test_estimator_warns_past_the_horizon(engine):
    """A user's loop that runs past the horizon told to MemoryKLLCB is warned, whichever path
    makes the choice (the compiled choice asks the rule's check_horizon as the NumPy index does)."""
    est = GradientEstimator(MemoryKLLCB(horizon=10), 3, T=6, dim=2, rng=0, engine=engine)
    rng = np.random.default_rng(0)

    def two_iterates():
        for _ in range(2):
            while not est.done:
                n = est.ask()
                est.tell(rng.standard_normal(2) * n)
            est.next_iterate()

    with pytest.warns(RuntimeWarning, match="told horizon=10 rounds"):
        two_iterates()


@pytest.mark.parametrize("make", [lambda: MemoryThompson(discount=0.8),
                                  lambda: MemoryKLLCB(shape="scalar", window=2),
                                  lambda: MemoryKLLCB(shape="diagonal", window=3)])  # fmt: skip
def test_compiled_past_refit_equals_numpy(make):
    """The refit of the past iterates when an iterate ends, compiled
    (memory_kernels.refit_past) and in NumPy (iterate_terms, sigma2_update), from the same
    evidence: the same σ² and cached terms to a few ulps, and the same kept history exactly, with
    the window folding iterates and the discount ageing them; N = 4, d = 5, 30 realizations, six
    iterates of 20 rounds.

    The kernel repeats the NumPy operations in their order, and sums of fewer than eight terms
    are added in index order by both, but each sweep's normalisation exp(mean ln σ²) calls
    NumPy's vectorised exp and log, which on a CPU with AVX-512 are NumPy's own and elsewhere
    the C library's; they differ by 1 ulp at most (exp for about 5% of arguments, log for a few
    in 10⁴: measured over 2·10⁵ arguments). A 1-ulp change of the normaliser moves σ²
    by at most 2 ulps per sweep; the sweeps are a block ascent towards one fixed point, which
    damps rather than compounds such a change, and the cached terms are sums of at most five
    non-negative quotients S/m (each reordering-free, ≤ 1 ulp per operation from σ²). So
    16 ulps bounds them with room (measured: 4 with AVX-512, 0 without); the history arrays are
    copies of the evidence, compared exactly."""
    import copy

    pytest.importorskip("numba")
    oracle = GaussianOracle(Quadratic(5), Arms([3.0, 1.0, 2.0, 1.5]))
    w = np.random.default_rng(4).standard_normal((30, 5))
    rule = make()
    for k in range(6):
        estimate_gradient(oracle, rule, w, 20, rng=k, engine="numpy", new_iterate=k > 0)
        ends = [copy.deepcopy(rule) for _ in range(2)]
        for end, compiled in zip(ends, (False, True), strict=True):
            end.compiled_choice = compiled
            end.next_iterate()
        for name in ("sigma2", "_cache_num", "_frozen_num"):  # computed from σ²: in ulps
            np.testing.assert_array_max_ulp(getattr(ends[1], name), getattr(ends[0], name),
                                            maxulp=16)  # fmt: skip
        for name in ("_cache_dof", "_cache_pulls", "_frozen_dof", "_past_count", "_past_where",
                     "_past_sq"):  # counts and copies of the evidence: exactly  # fmt: skip
            np.testing.assert_array_equal(getattr(ends[1], name), getattr(ends[0], name))
    assert ends[0]._past_count.shape[1] == (6 if rule.window is None else min(6, rule.window))


def test_engine_of_each_estimate_decides_the_compiled_path():
    """A rule used by a compiled user's loop and then by a NumPy estimate takes the NumPy path
    for that estimate (the switch is set per estimate, not left on the rule), and back."""
    pytest.importorskip("numba")
    rule = MemoryThompson()
    est = GradientEstimator(rule, 3, 12, dim=2, rng=0, engine="numba")
    assert rule.compiled_choice
    oracle = GaussianOracle(Quadratic(2), Arms([3.0, 1.0, 2.0]))
    estimate_gradient(oracle, rule, np.ones((1, 2)), 12, rng=1, engine="numpy")
    assert not rule.compiled_choice
    est.reset()
    assert rule.compiled_choice
    est.next_iterate()
    assert rule.compiled_choice


def test_a_subclass_without_its_own_kernel_chooses_by_its_own_index():
    """A subclass that changes a memory rule's index but not its compiled one
    (``_kernel_rule``) is run by its NumPy index in a user's loop too, as on the engine."""
    pytest.importorskip("numba")

    class LastArm(MemoryThompson):
        def index(self, t, sigma2, nu):
            return -np.broadcast_to(np.arange(sigma2.shape[1], dtype=float), sigma2.shape)

    from eegrad.selectors.base import has_kernel

    assert has_kernel(MemoryThompson)
    assert not has_kernel(LastArm)
    est = GradientEstimator(LastArm(), 3, 12, dim=2, rng=0, engine="auto")
    arms = []
    while not est.done:
        arms.append(est.ask())
        est.tell(np.ones(2) * arms[-1])
    assert arms[6:] == [3] * 6  # after the 2N warm-up rounds: the last arm, its index


def test_compiled_fit_and_choice_attach_from_the_engines_side(monkeypatch):
    """The selectors import no engine (the layers contract of pyproject.toml, run by
    lint-imports): importing eegrad.engines attaches the compiled refit and choice to the rules
    with memory, and a compiled user's loop calls them — both, over two iterates."""
    pytest.importorskip("numba")
    from eegrad.engines.memory_glue import CompiledMemory
    from eegrad.selectors.memory import MemoryRule

    assert isinstance(MemoryRule.compiled, CompiledMemory)
    calls = {"choose": 0, "refit_past": 0}

    class Spy(CompiledMemory):
        @staticmethod
        def choose(rule, t):
            calls["choose"] += 1
            return CompiledMemory.choose(rule, t)

        @staticmethod
        def refit_past(rule):
            calls["refit_past"] += 1
            return CompiledMemory.refit_past(rule)

    monkeypatch.setattr(MemoryRule, "compiled", Spy())
    oracle = GaussianOracle(Quadratic(2), Arms([3.0, 1.0, 2.0]))
    est = GradientEstimator(MemoryThompson(), oracle.arms, 12, dim=2, rng=0, engine="numba")
    at = oracle.at(np.ones((1, 2)))
    for iterate in range(2):
        if iterate:
            est.next_iterate()
        while not est.done:
            arm = est.ask()
            est.tell(at.sample(np.array([arm - 1]), est.streams)[0])
    assert calls["choose"] > 0
    assert calls["refit_past"] > 0
