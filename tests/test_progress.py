"""ProgressThompson: its estimators (the signal's curve, the curvature from the persistence of
consecutive round means) against the closed forms of the quadratic model, and its choices."""


import numpy as np
import pytest

from eegrad import (
    BudgetThompson,
    GradientEstimator,
    InvalidParameterError,
    ProgressThompson,
    ProtocolError,
    SpreadThompson,
)
from eegrad.checkpoint import capture_state
from eegrad.selectors.evidence import Outlook, RoundEvidence
from eegrad.selectors.progress import STEPS_SPAN, nonnegative_minima, nonnegative_minimum
from eegrad.selectors.progress_fits import shrink_to_prior
from eegrad.selectors.progress_model import ProgressModel
from eegrad.testing import check_rule

K, D = 20, 6
B, AGG = 100.0, 0.5
SPEND = np.array([(B - AGG * (n - 1)) / n for n in range(1, K + 1)])
OMEGA = np.maximum(np.floor((SPEND - 3.0) * 2.0), 1.0)
ELL = np.log(SPEND) - np.log(SPEND).mean()  # the rule's centred log-spend, before scaling
ELL = ELL / (np.log(SPEND).max() - np.log(SPEND).min())



def _signal(rule, arms, mean_norm2, persistence=None):
    """The signal's fit told one round's signal alone (white-box: the fit, not the record a
    driver tells through tell_round)."""
    rule.model.note_signal(np.asarray(arms), mean_norm2, persistence, "test")


def _steps(rule, arms, steps):
    """The local steps' prior told one round's steps alone (white-box, as :func:`_signal`)."""
    rule.model.note_local_steps(np.asarray(arms), steps, "test")


def _look(rule, rounds):
    """The rounds left, as the next ask's outlook would tell them (without the ask)."""
    rule._look_ahead(Outlook(rounds_left=rounds), "test")

def _mc_check(samples: np.ndarray, expected: float) -> None:
    # Tolerance: 4 Monte Carlo standard errors of the mean (std / sqrt(reps)).
    se = samples.std(ddof=1) / np.sqrt(samples.size)
    assert abs(samples.mean() - expected) < 4 * se, (samples.mean(), expected, se)


def _world(seed, scale=0.3):
    mu = np.random.default_rng(100 + seed).standard_normal((K, D)) * scale
    return mu - mu.mean(axis=0)


def _drive(rule, seed, rounds, gain, tau2=50.0, quadratic=False, rounds_left=None,
           steps=None):  # fmt: skip
    """``rounds`` rounds: n clients of K drawn without replacement, client k's update
    gain(n)·(g + μ_k + e), e of trace τ²/ω_n (the local work scales the whole update). With
    ``quadratic`` the direction is the gradient of F(w) = ½‖w‖² and every round steps
    w ← w − ū; else g is fixed (no curvature: consecutive updates alike). Returns the picks
    and every arm's true signal (at ‖g‖ = 1) and noise. ``rounds_left(t)``, where given, is told
    before the ask of round t (0-based); ``steps(n)``, where given, the clients' local steps
    told after it."""
    rng = np.random.default_rng(seed)
    mu = _world(seed)
    w = np.full(D, 1.0 / np.sqrt(D))
    S2 = float((mu**2).sum() / (K - 1))
    ns = np.arange(1, K + 1)
    a = np.array([gain(n) for n in ns])
    signal = a**2
    noise = a**2 * (S2 * (1 / ns - 1 / K) + tau2 / (ns * OMEGA))
    est = GradientEstimator(rule, K, T=1, dim=D, rng=seed)
    picks = []
    for t in range(rounds):
        if rounds_left is not None:
            est.tell_rounds_left(rounds_left(t))
        n = est.ask()
        picks.append(n)
        if steps is not None:
            est.tell_local_steps(steps(n))
        c = rng.choice(K, n, replace=False)
        weights = np.full(n, OMEGA[n - 1])
        e = rng.standard_normal((n, D)) * np.sqrt(tau2 / weights / D)[:, None]
        est.tell_parts(a[n - 1] * (w + mu[c] + e), weights)
        step = est.result()
        if quadratic:
            w = w - step
        est.next_iterate()
    return np.array(picks), signal, noise


def _rule(**kw):
    return ProgressThompson(population=K, spend=SPEND, **kw)


def test_progress_closed_form_and_its_limits():
    # D_n = x_n − Λ_g x_n² − Λ_ξ v_n: equal signals reduce it to −Λ_ξ v_n up to a constant
    # (the spread rule's choice); no signal anywhere gives −v_n itself.
    v = np.array([[3.0, 1.0, 2.0]])
    s = np.full((1, 3), 4.0)
    lam = np.array([[0.25, 0.5]])
    d = ProgressModel.progress(s, v, lam)
    np.testing.assert_allclose(d, 2.0 - 0.25 * 4.0 - 0.5 * v)
    assert int(np.argmax(d)) == int(np.argmin(v))
    np.testing.assert_allclose(ProgressModel.progress(np.zeros((1, 3)), v, lam), -v)
    # One Λ for both terms: x − Λ(x² + v).
    np.testing.assert_allclose(ProgressModel.progress(s, v, np.array([0.25])),
                               2.0 - 0.25 * (4.0 + v))  # fmt: skip
    # A longer update is worth its noise while x − Λ_g x² − Λ_ξ v grows, and with a small Λ
    # (steps far shorter than the curvature allows) the longer one wins.
    s2, v2 = np.array([[4.0, 1.0]]), np.array([[2.0, 0.0]])
    assert int(np.argmax(ProgressModel.progress(s2, v2, np.array([[0.25, 0.5]])))) == 1
    assert int(np.argmax(ProgressModel.progress(s2, v2, np.array([[0.025, 0.05]])))) == 0


@pytest.mark.parametrize("k", [1, 2, 3])
def test_nonnegative_minimum_is_the_non_negative_least_squares(k):
    # argmin over λ >= 0 of λᵀAλ − 2bᵀλ = ‖Lᵀλ − L⁻¹b‖² + const with A = LLᵀ: SciPy's NNLS of
    # (Lᵀ, L⁻¹b) gives the same minimiser (to rounding: a relative tolerance).
    from scipy.optimize import nnls

    rng = np.random.default_rng(k)
    As, bs, refs = [], [], []
    for _ in range(50):
        M = rng.normal(size=(k + 2, k))
        A, b = M.T @ M, rng.normal(size=k)
        L = np.linalg.cholesky(A)
        ref, _ = nnls(L.T, np.linalg.solve(L, b))
        got = nonnegative_minimum(A, b)
        assert np.all(got >= 0)
        np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-10)
        As.append(A), bs.append(b), refs.append(ref)
    assert nonnegative_minimum(np.zeros((k, k)), np.ones(k)) is None  # no evidence
    # All rows at once, with rows of no evidence (zero, non-finite) among them: the same fits.
    As += [np.zeros((k, k)), np.full((k, k), np.nan)]
    bs += [np.ones(k), np.ones(k)]
    fits, found = nonnegative_minima(np.array(As), np.array(bs))
    np.testing.assert_array_equal(found, [True] * 50 + [False, False])
    np.testing.assert_allclose(fits[:50], refs, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(fits[50:], 0.0)


def test_persistence_recovers_the_curvature_of_a_quadratic():
    # F(w) = ½ wᵀ H w with H = λI: a round of gain a at w gives ū = a(∇F + ξ), and the next
    # round, after the step, ū' = a'(∇F(w − ū) + ξ'). The model's closed form: Λ_g = Λ_ξ =
    # λ/(2‖∇F‖). With the rule's signal and noise set to the truth, its least-squares fit of
    # the persistence over pairs of rounds, averaged over 10 seeds, is within 4 SE (spread
    # across seeds / sqrt(10)) of it, for both.
    lam, d = 2.0, 40
    seeds = range(10)  # the rule's 10 realizations (rows), each row its seed's draws
    rngs = [np.random.default_rng(seed) for seed in seeds]
    rule = _rule(discount=1.0, seed=0)
    rule.init(len(seeds), K, d)
    w = np.array([rng.standard_normal(d) for rng in rngs])
    w *= 1.0 / (lam * np.linalg.norm(w, axis=1, keepdims=True))  # ‖∇F‖ = 1
    gains = 0.05 * (1.0 + 3.0 * np.arange(K)[::-1] / K)  # longer updates for small n
    v0 = 0.5 / np.arange(1, K + 1)  # the normalised noise, trace of ξ's covariance
    signal = gains**2  # ‖∇F‖² = 1
    noise = gains**2 * v0
    rows = len(seeds)
    rule.model.signal = lambda: np.tile(signal, (rows, 1))  # the truth, so that the fit alone is tested
    rule.model.predicted = lambda: np.tile(noise, (rows, 1))
    for _ in range(400):
        arms = np.empty((2, rows), dtype=np.int64)
        u, u2 = np.empty((rows, d)), np.empty((rows, d))
        for r, rng in enumerate(rngs):
            n, n2 = rng.integers(0, K, 2)
            arms[:, r] = n, n2
            u[r] = gains[n] * (lam * w[r] + rng.standard_normal(d) * np.sqrt(v0[n] / d))
            u2[r] = gains[n2] * (lam * (w[r] - u[r]) + rng.standard_normal(d) *
                                 np.sqrt(v0[n2] / d))  # fmt: skip
        rule.model.forget_persistence()
        _signal(rule, arms[0], np.einsum("rd,rd->r", u, u))
        _signal(rule, arms[1], np.einsum("rd,rd->r", u2, u2), np.einsum("rd,rd->r", u2, u))
    fits = rule.model.curvature()
    truth = lam / 2.0  # λ/(2‖∇F‖)
    for j in range(2):
        _mc_check(fits[:, j], truth)


def test_shrink_to_prior_closed_form():
    # p + (λ̂ − p) max(0, 1 − Var/(λ̂ − p)²), Var = σ² diag(A⁻¹), clipped at 0: no residual
    # keeps the fit, a residual as large as the distance to the prior takes it to the prior,
    # and a singular A (no variance to weigh the fit by) keeps it.
    A = np.array([[4.0, 0.0], [0.0, 1.0]])  # diag(A⁻¹) = (0.25, 1)
    fit, prior = np.array([3.0, 0.0]), 1.0
    np.testing.assert_allclose(shrink_to_prior(fit, A, 0.0, prior), fit)
    # σ² = 1: Var = (0.25, 1); off = (2, −1): keep = (1 − 0.25/4, 1 − 1/1) = (0.9375, 0)
    np.testing.assert_allclose(shrink_to_prior(fit, A, 1.0, prior),
                               [1.0 + 2.0 * 0.9375, 1.0])  # fmt: skip
    np.testing.assert_allclose(shrink_to_prior(fit, A, 1e9, prior), [1.0, 1.0])
    singular = np.array([[1.0, 1.0], [1.0, 1.0]])
    np.testing.assert_array_equal(shrink_to_prior(fit, singular, 1.0, prior), fit)


def _pairs(rule, zhats, seed=0):
    """Pairs of rounds (arms drawn at random) told with persistences whose ẑ = 1 − ū'·ū/(x'x)
    are ``zhats``, at the rule's own signal and noise (set to fixed values: the fit alone is
    tested); the clients report one local step at every arm."""
    rng = np.random.default_rng(seed)
    signal = 0.04 * np.ones(K)
    noise = 0.5 / np.arange(1, K + 1) * signal
    rule.model.signal = lambda: signal[None]
    rule.model.predicted = lambda: noise[None]
    for z in zhats:
        n, n2 = rng.integers(0, K, 2)
        rule.model.forget_persistence()
        _steps(rule, np.array([n]), np.array([1.0]))
        _signal(rule, np.array([n]), np.array([signal[n] + noise[n]]))
        p = signal[n] * (1.0 - z)  # x' x (1 − ẑ), x' = x = 0.2
        _signal(rule, np.array([n2]), np.array([signal[n2] + noise[n2]]), np.array([p]))
    return 0.5 / np.sqrt(signal.max())  # the prior 1/(2x*)


def test_with_equal_steps_thin_evidence_of_no_curvature_falls_back_to_the_prior():
    # Ten pairs of rounds whose ẑ scatter around −0.2 (SD 1): the non-negative least squares
    # puts both costs at the bound 0, which would make the noise free. Where every arm takes
    # the same steps the rule shrinks them towards the prior 1/(2x*) by their evidence: the
    # fit's standard error here is of the order of the prior's distance, so both are near it.
    # Where the steps differ the fit stands.
    zhats = -0.2 + np.random.default_rng(3).standard_normal(10)
    rule = _rule(discount=1.0)
    rule.init(1, K, D)
    prior = _pairs(rule, zhats)
    raw = nonnegative_minimum(rule.model.persistence.A[0], rule.model.persistence.b[0])
    np.testing.assert_array_equal(raw, [0.0, 0.0])  # the bound: both costs 0
    lam = rule.model.curvature()[0]
    assert np.all(lam > 0.5 * prior), (lam, prior)
    assert np.all(lam <= prior), (lam, prior)
    differ = _rule(discount=1.0)
    differ.init(1, K, D)
    _pairs(differ, zhats)
    _steps(differ, np.array([K - 1]), np.array([8.0]))  # the steps now differ
    assert differ.model.steps_differ()[0]
    np.testing.assert_array_equal(differ.model.curvature()[0], [0.0, 0.0])


def test_with_equal_steps_consistent_evidence_keeps_the_fit():
    # 400 pairs whose ẑ = 0.05 exactly (consecutive rounds alike, a small curvature): the
    # residual variance is 0, and the shrunk fit is the least squares', far below the prior.
    rule = _rule(discount=1.0)
    rule.init(1, K, D)
    prior = _pairs(rule, np.full(400, 0.05))
    raw = nonnegative_minimum(rule.model.persistence.A[0], rule.model.persistence.b[0])
    lam = rule.model.curvature()[0]
    np.testing.assert_allclose(lam, np.maximum(raw, [0.0, 1e-3 * raw.max()]), rtol=1e-6)
    assert lam.max() < 0.2 * prior


def test_signal_curve_is_unbiased_without_discount():
    # Arms pulled in turn, each update gain·(g + μ_k + e) with the signal a_n² = exp(1.5 ℓ_n)
    # (the curve's family) and the noise scaled by the same gain; with discounts 1 the fitted
    # signal of arms 1 (never pulled: extrapolated), 5 and 20, over 12 seeds, is within 4 SE
    # (spread across seeds / sqrt(12)) of the truth, plus 5 %: each round's own noise is its
    # spread times the model's ratio at the θ̂ fitted so far, a plug-in whose bias falls as the
    # rounds grow (measured: within 3.5 % at 1,600 rounds, 10 % at 400).
    # The 12 seeds are the rule's 12 realizations (rows), each row its seed's world and draws.
    seeds = range(12)
    rule = _rule(discount=1.0, shape_discount=1.0, seed=0)
    rule.init(len(seeds), K, D)
    rngs = [np.random.default_rng(seed) for seed in seeds]
    mus = [_world(seed) for seed in seeds]
    g = np.full(D, 1.0 / np.sqrt(D))
    gains = np.exp(0.75 * ELL)
    for t in range(1200):
        n = 2 + t % (K - 1)  # n = 2..K (n = 1 has no spread)
        w = np.full((len(seeds), n), OMEGA[n - 1])
        parts = np.empty((len(seeds), n, D))
        for r, (rng, mu) in enumerate(zip(rngs, mus, strict=True)):
            c = rng.choice(K, n, replace=False)
            e = rng.standard_normal((n, D)) * np.sqrt(50.0 / w[r] / D)[:, None]
            parts[r] = gains[n - 1] * (g + mu[c] + e)
        arms = np.full(len(seeds), n - 1)
        rule._pending = arms
        mean = np.einsum("rk,rkd->rd", w, parts) / w.sum(axis=1, keepdims=True)
        rule.tell_parts(arms, parts, w, mean_norm2=np.einsum("rd,rd->r", mean, mean))
    fits = rule.model.signal()[:, [0, 4, K - 1]] / gains[[0, 4, K - 1]] ** 2
    se = fits.std(axis=0, ddof=1) / np.sqrt(len(fits))
    assert np.all(np.abs(fits.mean(axis=0) - 1.0) < 4 * se + 0.05), (fits.mean(axis=0), se)


def test_the_signal_curve_alone_recovers_a_curve_of_its_family_and_bends_at_exhausted_data():
    # The plain object, told exact signals s_n = 0.4·exp(1.5 ℓ_n) at four arms with equal
    # weights, 50 times: the fit is the curve itself, arms never told included (the first
    # rounds' shapes, divided by a level not yet fitted, are forgotten at discounts 0.9:
    # measured 6e-7 relative at 50 rounds). Then clients that report 6 steps at n = 1 and 3
    # (a client's data exhausted) and 2 at n = 8 and 20: the regressor turns to their log
    # steps, whose prior slope is 2 (s ∝ k²).
    from eegrad.selectors.signal_curve import STEPS_SPAN, SignalCurve

    curve = SignalCurve(SPEND.copy(), 2, degree=1, discount=0.9, shape_discount=0.9)
    assert not curve.told()
    np.testing.assert_array_equal(curve.signal(), 0.0)
    truth = 0.4 * np.exp(1.5 * ELL)
    for _ in range(50):
        for n in (1, 4, 9, K):
            arms = np.full(2, n - 1)
            curve.add(arms, truth[arms], np.ones(2))
    assert curve.told()
    np.testing.assert_allclose(curve.signal(), np.tile(truth, (2, 1)), rtol=1e-5)
    np.testing.assert_allclose(curve.gain2(), np.tile(np.exp(1.5 * ELL), (2, 1)), rtol=1e-5)
    steps = np.where(np.arange(K) < 5, 6.0, 2.0)  # n <= 5: 6 steps; more clients: 2
    for n in (1, 3, 8, K):
        curve.note_steps(np.full(2, n - 1), np.full(2, steps[n - 1]))
    assert 6.0 / 2.0 >= STEPS_SPAN
    told = curve.arm_steps()[0]  # the arms told, interpolated between, constant beyond
    np.testing.assert_allclose(told[[0, 1, 2, 7, K - 1]], steps[[0, 1, 2, 7, K - 1]])
    np.testing.assert_allclose(told[7:], 2.0)
    assert np.all(np.diff(told[2:8]) < 0)
    np.testing.assert_array_equal(curve.steps_prior()[:, 1], 2.0)  # s ∝ k²
    assert np.all(curve.steps_differ())


def test_with_equal_updates_the_rule_chooses_as_the_spread_rule():
    # FedSGD on F = ½‖w‖² (gain 0.3 for every arm: every expected update the same), so the
    # progress is −Λ_ξ v_n up to a constant. Over the last half of 300 rounds (4 seeds), at
    # the noise floor, the mean noise of the arms the progress rule pulls is within 5 % of the
    # spread rule's on the same seeds, and both are below uniform pulls'.
    def mean_ratio(rule_of_seed):
        out = []
        for seed in range(4):
            picks, _, noise = _drive(rule_of_seed(seed), seed, 300, lambda n: 0.3,
                                     quadratic=True)  # fmt: skip
            out.append(noise[picks[150:] - 1].mean() / noise.min())
        return float(np.mean(out)), noise

    progress, noise = mean_ratio(lambda s: _rule(seed=s))
    spread, _ = mean_ratio(lambda s: SpreadThompson(population=K, spend=SPEND, seed=s))
    assert progress < 1.05 * spread, (progress, spread)
    assert max(progress, spread) < noise.mean() / noise.min() - 0.05


def test_without_curvature_the_longest_updates_win():
    # A fixed gradient (consecutive updates alike: the persistence shows no curvature) and
    # arms whose updates grow with the share (gain ∝ spend^0.75): the progress is the update's
    # length, so over the last half of 300 rounds (3 seeds) the progress rule's pulls have, on
    # average, at least 80 % of the longest update, where the spread rule's (which minimises
    # the noise, so the shortest updates) have under 40 %.
    def gain(n):
        return (SPEND[n - 1] / SPEND[0]) ** 0.75

    def mean_length(rule_of_seed):
        out = []
        for seed in range(3):
            picks, signal, _ = _drive(rule_of_seed(seed), seed, 300, gain)
            x = np.sqrt(signal)
            out.append(x[picks[150:] - 1].mean() / x.max())
        return float(np.mean(out))

    assert mean_length(lambda s: _rule(seed=s)) > 0.8
    assert mean_length(lambda s: SpreadThompson(population=K, spend=SPEND, seed=s)) < 0.4


def _growing_gain(n):
    """Updates that grow with the share (gain ∝ spend^0.75): few clients go furthest, noisily."""
    return (SPEND[n - 1] / SPEND[0]) ** 0.75


def _growing_steps(n):
    """The local steps behind :func:`_growing_gain` (k steps move a client k times as far)."""
    return 4.0 * _growing_gain(n)


def test_rounds_left_divide_the_curvature_cost_of_the_decrease():
    # The run's end (the module's notes): told h rounds left by clients whose steps differ
    # between the arms, the rule's objective is x_n − (Λ_g s_n + Λ_ξ v_n)/√h from its own fits
    # (the later rounds forget a round's overshoot, of its signal as of its noise), to
    # rounding; h = 1 is the myopic D_n exactly, and so is a rule never told. Where every arm
    # takes the same steps (none told: a flat prior), the weight is 1 whatever h.
    rule = _rule(seed=0)
    _drive(rule, 0, 40, _growing_gain, quadratic=True, steps=_growing_steps)
    signal, noise, lam = rule.model.signal(), rule.predicted(), rule.model.curvature()
    myopic = rule.predicted_progress()
    np.testing.assert_array_equal(myopic, rule.model.progress(signal, noise, lam))
    _look(rule, 1)
    np.testing.assert_array_equal(rule.predicted_progress(), myopic)
    _look(rule, 25)
    assert rule.curvature_weight()[0, 0] == 0.2
    x = np.sqrt(signal)
    expected = x - (lam[:, :1] * signal + lam[:, 1:] * noise) / 5.0
    np.testing.assert_allclose(rule.predicted_progress(), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(rule.predicted_progress(), rule.model.progress(signal, noise, lam / 5.0),
                               rtol=1e-12)  # fmt: skip
    assert np.any(rule.predicted_progress() != myopic)
    flat = _rule(seed=0)
    _drive(flat, 0, 40, _growing_gain, quadratic=True)
    myopic = flat.predicted_progress()
    _look(flat, 25)
    assert flat.curvature_weight()[0, 0] == 1.0
    np.testing.assert_array_equal(flat.predicted_progress(), myopic)


def test_far_from_the_end_the_rule_goes_further_and_turns_to_less_noise_at_it():
    # Updates that grow with the share on the quadratic (few clients: the longest and noisiest
    # updates; the clients report the steps behind them), 240 rounds, 4 seeds. Told the rounds left to the run's end, the rule's picks in
    # the first half go further than the myopic rule's (mean length of the picked updates,
    # larger by over 10 %), and in the last 10 rounds, where √h < 3.2, have a mean noise at
    # most that of its own first half. Told h = 1 every round, it picks exactly as untold.
    rounds = 240

    def picks(seed, rounds_left):
        return _drive(_rule(seed=seed), seed, rounds, _growing_gain, quadratic=True,
                      rounds_left=rounds_left, steps=_growing_steps)  # fmt: skip

    far, near, myopic_far = [], [], []
    for seed in range(4):
        told, signal, noise = picks(seed, lambda t: rounds - t)
        untold, _, _ = picks(seed, None)
        x = np.sqrt(signal)
        far.append(x[told[: rounds // 2] - 1].mean())
        myopic_far.append(x[untold[: rounds // 2] - 1].mean())
        near.append(noise[told[-10:] - 1].mean() / noise[told[: rounds // 2] - 1].mean())
        ones, _, _ = picks(seed, lambda t: 1)
        np.testing.assert_array_equal(ones, untold)
    assert np.mean(far) > 1.1 * np.mean(myopic_far), (far, myopic_far)
    assert np.mean(near) <= 1.0, near


def test_rounds_left_errors():
    rule = _rule()
    with pytest.raises(ProtocolError, match="before init"):
        rule.ask(1, outlook=Outlook(rounds_left=3))
    rule.init(1, K, D)
    for bad in (0, -2):
        with pytest.raises(InvalidParameterError, match="'rounds'.*>= 1"):
            rule.ask(1, outlook=Outlook(rounds_left=bad))
    for bad in (1.5, "3", np.nan):
        with pytest.raises(TypeError, match="'rounds'.*an integer"):
            rule.ask(1, outlook=Outlook(rounds_left=bad))
    assert rule.uses_rounds_left
    assert BudgetThompson(population=K).uses_rounds_left  # it splits the budget over them
    assert not SpreadThompson(population=K).uses_rounds_left
    est = GradientEstimator(_rule(), K, T=1, dim=D, rng=0)
    est.tell_rounds_left(5)
    est.ask()
    with pytest.raises(ProtocolError, match="pull pending"):
        est.tell_rounds_left(4)


@pytest.mark.parametrize("rule_class", [ProgressThompson, BudgetThompson])
def test_progress_rules_keep_the_rule_contract(rule_class):
    check_rule(rule_class(population=50, noise_order=2))


def test_progress_rule_errors_and_params():
    with pytest.raises(InvalidParameterError, match="signal_degree"):
        ProgressThompson(signal_degree=3)
    with pytest.raises(InvalidParameterError, match="objective"):
        ProgressThompson(objective="fastest")
    # the total budget's rate is a rule of its own, and the error says which
    with pytest.raises(InvalidParameterError, match=r"'objective' parameter of ProgressThompson "
                                                    r".*eegrad\.BudgetThompson's"):  # fmt: skip
        ProgressThompson(objective="rate")
    with pytest.raises(InvalidParameterError, match="shape_discount"):
        ProgressThompson(shape_discount=0.0)
    with pytest.raises(ProtocolError, match="before init"):
        _rule().ask(1)
    bad_records = (({"mean_norm2": [-1.0]}, "mean_norm2"), ({"mean_norm2": [np.nan]}, "mean_norm2"),
                   ({"mean_norm2": [1.0], "persistence": [np.inf]}, "persistence"),
                   ({"mean_norm2": [1.0], "local_steps": [0.0]}, "'steps'"))  # fmt: skip
    for fields, name in bad_records:
        rule = _rule()
        rule.init(1, K, D)
        arms = rule.ask(1)
        tree, arrays = capture_state(rule)  # the rule and its model, whole
        with pytest.raises(InvalidParameterError, match=name):
            rule.tell_round(RoundEvidence(arms, pair_sums=np.array([1.0]),
                                          weights=np.ones((1, int(arms[0]) + 1)),
                                          **{k: np.array(v) for k, v in fields.items()}))
        # refused whole: nothing of the record reached the rule or its model, and the round
        # still pends
        tree_after, arrays_after = capture_state(rule)
        assert tree_after == tree
        for k, v in arrays.items():
            np.testing.assert_array_equal(arrays_after[k], v, err_msg=k)
        rule.withdraw()
    params = rule.get_params()
    assert params["signal_degree"] == 1
    assert ProgressThompson(**params).get_params() == params


def test_steps_prior_is_twice_the_slope_of_the_log_steps():
    # Clients that report k_n = c·spend_n^γ local steps, spanning less than STEPS_SPAN = 2
    # across the arms (γ ≤ 0.2: 22^0.2 = 1.86): log k = const + γ·span·ℓ in the rule's scaled
    # log-spend ℓ, so the prior of the log-signal's slope is 2γ·span (s ∝ k²), exactly,
    # whatever the arms told and how often; constant steps (FedSGD) give 0, one arm gives 0
    # (no slope is identified), and with a bend (signal_degree=2) the ℓ² prior is 0 here.
    span = np.log(SPEND).max() - np.log(SPEND).min()
    assert (SPEND.max() / SPEND.min()) ** 0.2 < STEPS_SPAN
    for degree, gamma in [(1, 0.2), (1, 0.1), (2, 0.2)]:
        rule = _rule(signal_degree=degree)
        rule.init(1, K, D)
        np.testing.assert_array_equal(rule.model.steps_prior(), 0.0)
        _steps(rule, np.array([3]), np.array([2.0 * SPEND[3] ** gamma]))
        np.testing.assert_array_equal(rule.model.steps_prior(), 0.0)  # one arm: none
        for arm in [0, 7, 19, 7, 12]:
            _steps(rule, np.array([arm]), np.array([2.0 * SPEND[arm] ** gamma]))
        expected = [0.0, 2.0 * gamma * span] + [0.0] * (degree - 1)
        np.testing.assert_allclose(rule.model.steps_prior()[0], expected, atol=1e-9)
    flat = _rule()
    flat.init(1, K, D)
    for arm in [0, 5, 19]:
        _steps(flat, np.array([arm]), np.array([1.0]))
    np.testing.assert_allclose(flat.model.steps_prior(), 0.0, atol=1e-12)


def _saturating_steps(n):
    """Mini-batch steps that grow with the share until the client's data is exhausted: 2
    epochs of batches of 16 on min(72, 2·(spend − 2)) samples (1 step at least per epoch)."""
    samples = min(72.0, 2.0 * (SPEND[n - 1] - 2.0))
    return 2.0 * max(1.0, np.ceil(samples / 16.0))


def test_where_the_steps_span_twofold_the_curve_is_in_the_log_steps():
    # Told steps that span STEPS_SPAN or more, the curve's regressor is the arms' log steps
    # (arm_steps): each arm's mean weighted by its clients, non-decreasing in the spend,
    # interpolated in the log-spend between arms told and constant beyond; its slope's prior
    # is 2 (s ∝ k²). Closed forms: told arms 20, 6 and 2 of _saturating_steps (2, 4 and 10
    # steps), arm 1 (never told) reads 10 as arm 2 does, arm 4 the interpolation between arms
    # 2 and 6 in the log-spend; a report out of order (arm 3 told more steps than arm 2) is
    # pooled with arm 2, weighted by their clients (no discount of the evidence here).
    rule = _rule(shape_discount=1.0)
    rule.init(1, K, D)
    for n in (20, 2, 6):
        _steps(rule, np.array([n - 1]), np.array([_saturating_steps(n)]))
    k = rule.model.arm_steps()[0]
    np.testing.assert_allclose(k[[19, 1, 5]], [2.0, 10.0, 4.0], rtol=1e-12)
    assert k[0] == k[1]  # constant beyond the largest share told
    ell = np.log(SPEND)
    t = (ell[3] - ell[5]) / (ell[1] - ell[5])
    np.testing.assert_allclose(np.log(k[3]), np.log(4.0) + t * np.log(10.0 / 4.0), rtol=1e-12)
    np.testing.assert_array_equal(rule.model.steps_prior(), [[0.0, 2.0]])
    _steps(rule, np.array([2]), np.array([12.0]))  # arm 3 (3 clients) above arm 2 (2)
    pooled = np.exp((2 * np.log(10.0) + 3 * np.log(12.0)) / 5)
    np.testing.assert_allclose(rule.model.arm_steps()[0, [0, 1, 2]], pooled, rtol=1e-12)
    np.testing.assert_array_equal(rule.model.steps_prior(), [[0.0, 2.0]])


def test_arms_of_equal_steps_get_equal_signals():
    # Clients whose share stops buying steps once their data is exhausted (_saturating_steps:
    # arms 1 and 2 take 10 steps each), their updates growing with the steps. The curve in the
    # log steps gives arms 1 and 2 the same signal exactly (in the log-spend it extrapolated a
    # longer update to n = 1, which the clients' data cannot give), and a longer update to the
    # arms of more steps.
    def gain(n):
        return _saturating_steps(n) / 10.0

    rule = _rule(seed=0)
    _drive(rule, 0, 30, gain, quadratic=True, steps=_saturating_steps)
    s = rule.model.signal()[0]
    assert s[0] == s[1]
    assert s[1] > s[5] > s[19]


def test_the_curve_shrinks_towards_the_steps_prior_and_yields_to_evidence():
    # FedSGD-like truth (every arm's update the same) told by clients that report steps ∝
    # spend (spanning 22×: the curve is in the log steps, with a prior of slope 2). After a few rounds the evidence is too thin to move the
    # curve off its prior (without the report: off 0, a flat signal); after many, the curve
    # leaves the prior for the flat truth. The arms are pulled in turn, as the rule's warm-up.
    def run(rounds, steps, seed=0):
        rule = _rule(discount=1.0, shape_discount=1.0, seed=seed)
        rule.init(1, K, D)
        rng = np.random.default_rng(seed)
        mu = _world(seed)
        g = np.full(D, 1.0 / np.sqrt(D))
        for t in range(rounds):
            n = 2 + (7 * t) % (K - 1)
            c = rng.choice(K, n, replace=False)
            w = np.full(n, OMEGA[n - 1])
            parts = 0.3 * (g + mu[c] + rng.standard_normal((n, D)) * np.sqrt(50.0 / w / D)[:, None])
            rule._pending = np.array([n - 1])
            if steps:
                _steps(rule, np.array([n - 1]), np.array([SPEND[n - 1]]))
            mean = np.average(parts, axis=0, weights=w)
            rule.tell_parts(np.array([n - 1]), parts[None], w[None],
                            mean_norm2=np.array([mean @ mean]))
        return rule

    prior = run(6, True).model.steps_prior()[0, 1]
    assert prior > 1.0
    assert run(6, True).model.signal_curve()[0, 1] == pytest.approx(prior)
    assert run(6, False).model.signal_curve()[0, 1] == 0.0
    late = run(600, True)
    assert abs(late.model.signal_curve()[0, 1]) < 0.25 * prior, late.model.signal_curve()


def test_local_steps_are_told_through_the_estimator():
    # GradientEstimator.tell_local_steps keeps the pending arm's steps for the round's record,
    # which a rule that learns from the signal reads when the round is told; it needs a pending
    # ask and steps > 0, and a rule that models no signal refuses them.
    est = GradientEstimator(_rule(), K, T=1, dim=D, rng=0)
    with pytest.raises(ProtocolError, match="pending ask"):
        est.tell_local_steps(2.0)
    n = est.ask()
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(InvalidParameterError, match="'steps'"):
            est.tell_local_steps(bad)
    est.tell_local_steps(4.0)
    assert est.selector.model.curve.steps.weight[0, n - 1] == 0.0  # not before the round is told
    est.tell_parts(np.ones((n, D)) + np.arange(n)[:, None], np.ones(n))
    assert est.selector.model.curve.steps.weight[0, n - 1] == 1.0
    assert est.selector.model.curve.steps.log[0, n - 1] == pytest.approx(np.log(4.0))
    spread = GradientEstimator(SpreadThompson(population=K, spend=SPEND), K, T=1, dim=D, rng=0)
    spread.ask()
    with pytest.raises(ProtocolError, match="not in its reads"):
        spread.tell_local_steps(2.0)


@pytest.mark.parametrize("rule_class", [SpreadThompson, ProgressThompson])
def test_a_round_of_one_part_does_not_use_up_a_warm_up_round(rule_class):
    """A driver that caps a round to one client (a total budget's first round, before any cost
    is known) leaves the warm-up where it was: one part shows no spread, so the next round asks
    the warm-up's first arm again."""
    rule = rule_class(population=K, spend=SPEND, noise_order=2)
    est = GradientEstimator(rule, K, T=1, dim=D, rng=0)
    rng = np.random.default_rng(3)
    assert est.ask(at_most=1) == 1
    est.tell_parts(rng.standard_normal((1, D)), np.ones(1))
    est.next_iterate()
    assert rule.rounds == 0
    assert est.ask() == rule.warmup_arms[0] + 1
    est.tell_parts(rng.standard_normal((rule.warmup_arms[0] + 1, D)),
                   np.ones(rule.warmup_arms[0] + 1))  # fmt: skip
    assert rule.rounds == 1


def test_a_signal_told_before_any_spread_is_not_taken():
    """Before a round with a spread the noise in ‖ū‖² is unknown: a one-part round's signal
    leaves the signal's evidence as it was (and the next round's persistence unpaired)."""
    rule = ProgressThompson(population=K, spend=SPEND, noise_order=2)
    est = GradientEstimator(rule, K, T=1, dim=D, rng=0)
    est.ask(at_most=1)
    est.tell_parts(np.ones((1, D)), np.ones(1))
    assert not np.any(rule.model.curve.arm_rounds > 0)
    assert rule.model._last is None
    est.next_iterate()
    n = est.ask()
    est.tell_parts(np.random.default_rng(1).standard_normal((n, D)), np.ones(n))
    assert np.any(rule.model.curve.arm_rounds > 0)


@pytest.mark.parametrize("rule_class", [SpreadThompson, ProgressThompson, BudgetThompson])
def test_an_error_of_a_rules_parameters_names_that_rule(rule_class):
    # The parameters the three rules share are checked by the one base that holds them, and
    # named by the rule the user built.
    with pytest.raises(InvalidParameterError,
                       match=f"'discount' parameter of {rule_class.__name__} "):  # fmt: skip
        rule_class(discount=2.0)
    rule = rule_class(population=5)
    with pytest.raises(InvalidParameterError,
                       match=f"'population' parameter of {rule_class.__name__} "):  # fmt: skip
        rule.init(1, 6, 3)


def test_a_variant_of_the_model_is_the_model_the_rule_holds_and_fits():
    # A subclass of the model given as model_type is what init builds, and its hook reaches
    # every fit: here the noise's κ² held at 0 (noise_order=2) is 0 in the fit and in the
    # prediction's parameters, where the default model fits it; the objective is the rule's.
    class KappaHeld(ProgressModel):
        def free_parameters(self):
            free = super().free_parameters()
            free[:, 2] = False
            return free

    class Held(ProgressThompson):
        model_type = KappaHeld

    held = Held(population=K, spend=SPEND, noise_order=2)
    default = _rule(noise_order=2)
    for rule in (held, default):
        _drive(rule, 0, 12, lambda n: 1.0, steps=lambda n: 3.0)
    assert type(held.model) is KappaHeld
    assert type(default.model) is ProgressModel
    theta_held, cov_held = held.model.fit()
    np.testing.assert_array_equal(theta_held[:, 2], 0.0)
    np.testing.assert_array_equal(cov_held[:, 2], 0.0)
    assert np.all(default.model.fit()[0][:, 2] != 0.0)
    assert held.get_params() == _rule(noise_order=2).get_params()


def test_the_signal_weight_hook_weighs_every_rounds_signal_in_the_curves_fit():
    # ProgressModel.signal_weight is what the curve's fit weighs each round's signal by: a
    # variant that gives every round the same weight is told each round's ‖ū‖² and the
    # prediction, and fits another curve than the default's 1/predicted² (the rounds' n, and so
    # their expected ‖ū‖², differ: the gain grows with n's share).
    seen = []

    class Even(ProgressModel):
        def signal_weight(self, predicted, y):
            seen.append((predicted.copy(), y.copy()))
            return np.ones_like(predicted)

    class EvenRule(ProgressThompson):
        model_type = Even

    even, default = EvenRule(population=K, spend=SPEND), _rule()
    for rule in (even, default):
        _drive(rule, 0, 12, lambda n: 1.0 / np.sqrt(n))
    assert len(seen) == 12  # every round's signal
    assert all(np.all(p > 0) and np.all(np.isfinite(y)) for p, y in seen)
    assert not np.allclose(even.model.curve.curve(), default.model.curve.curve())


def test_a_round_tells_its_signal_through_the_models_hooks():
    # takes_signal decides whether a round's ‖ū‖² tells a signal, round_noise what noise is
    # taken from it: a variant that takes none after its first signal leaves the curve as that
    # round made it, and round_noise is handed the noise predicted for the arm played.
    handed = []

    class FirstOnly(ProgressModel):
        def takes_signal(self, own):
            return super().takes_signal(own) and not self.curve.told()

        def round_noise(self, arms, predicted, own):
            handed.append((predicted.copy(), self.predicted()[self._rows, arms]))
            return super().round_noise(arms, predicted, own)

    class Rule(ProgressThompson):
        model_type = FirstOnly

    rule = Rule(population=K, spend=SPEND)
    _drive(rule, 0, 12, lambda n: 1.0 / np.sqrt(n))
    assert rule.model.curve.arm_rounds.sum() == 1.0  # the first signal alone, undiscounted
    assert len(handed) == 1
    np.testing.assert_array_equal(*handed[0])
