"""ProgressThompson: the signal's estimator against the simulated truth, the progress criterion's
closed form, and the choice where arms differ in how far their updates go."""

import numpy as np
import pytest

from eegrad import (
    GradientEstimator,
    InvalidParameterError,
    ProgressThompson,
    ProtocolError,
    SpreadThompson,
)
from eegrad.testing import check_rule

K, D = 20, 6
B, AGG = 100.0, 0.5
SPEND = np.array([(B - AGG * (n - 1)) / n for n in range(1, K + 1)])
OMEGA = np.maximum(np.floor((SPEND - 3.0) * 2.0), 1.0)


def _mc_check(samples: np.ndarray, expected: float) -> None:
    # Tolerance: 4 Monte Carlo standard errors of the mean (std / sqrt(reps)).
    se = samples.std(ddof=1) / np.sqrt(samples.size)
    assert abs(samples.mean() - expected) < 4 * se, (samples.mean(), expected, se)


def _drive(rule, seed, rounds, gain, tau2=50.0, scale=0.3):
    """``rounds`` rounds: n clients of K drawn without replacement, client k's update
    gain(n)·g + μ_k + noise of trace τ²/ω_n (the spread model's noise; the arms' expected
    updates differ by their gains), with a fixed direction g; returns the picks and the arms'
    true signal and noise."""
    rng = np.random.default_rng(seed)
    mu = np.random.default_rng(100 + seed).standard_normal((K, D)) * scale
    mu -= mu.mean(axis=0)
    g = np.full(D, 1.0 / np.sqrt(D))
    S2 = float((mu**2).sum() / (K - 1))
    ns = np.arange(1, K + 1)
    a = np.array([gain(n) for n in ns])
    signal = a**2 * float(g @ g)
    noise = S2 * (1 / ns - 1 / K) + tau2 / (ns * OMEGA)
    est = GradientEstimator(rule, K, T=1, dim=D, rng=seed)
    picks = []
    for _ in range(rounds):
        n = est.ask()
        picks.append(n)
        c = rng.choice(K, n, replace=False)
        w = np.full(n, OMEGA[n - 1])
        e = rng.standard_normal((n, D)) * np.sqrt(tau2 / w / D)[:, None]
        est.tell_parts(a[n - 1] * g + mu[c] + e, w)
        est.result()
        est.next_iterate()
    return np.array(picks), signal, noise


def _rule(**kw):
    return ProgressThompson(population=K, spend=SPEND, **kw)


def test_progress_closed_form_and_its_limits():
    # D_n = x_n − (x_n² + v_n)/(2 x*): equal signals reduce it to −v_n up to a constant (the
    # spread rule's choice); no signal anywhere gives −v_n itself.
    v = np.array([[3.0, 1.0, 2.0]])
    s = np.full((1, 3), 4.0)
    d = ProgressThompson.progress(s, v)
    np.testing.assert_allclose(d, 2.0 - (4.0 + v) / 4.0)
    assert int(np.argmax(d)) == int(np.argmin(v))
    np.testing.assert_allclose(ProgressThompson.progress(np.zeros((1, 3)), v), -v)
    # A larger update is worth its noise while x − m/(2x*) grows: x = (2, 1), v = (2, 0).
    d = ProgressThompson.progress(np.array([[4.0, 1.0]]), np.array([[2.0, 0.0]]))
    np.testing.assert_allclose(d, [[2.0 - 6.0 / 4.0, 1.0 - 1.0 / 4.0]])


def test_signal_estimator_is_unbiased_without_discount():
    # Arms pulled in turn; arm n's expected update a_n g with a signal a_n² linear in the
    # log-spend (the fitted curve's family) and noise as the spread model has it; with
    # discount 1 the weighted least-squares fit of ‖ū‖² − v̂ is unbiased up to the noise fit's
    # own error. Over 12 seeds, the fitted signal of arms 1, 5 and 20 is within 4 SE (spread
    # across seeds / sqrt(12)) of the truth.
    fits = []
    for seed in range(12):
        rule = _rule(discount=1.0, seed=seed)
        rule.init(1, K, D)
        rule.warmup = []  # pull in turn below, not by the rule's choice
        rng = np.random.default_rng(seed)
        mu = np.random.default_rng(100 + seed).standard_normal((K, D)) * 0.3
        mu -= mu.mean(axis=0)
        g = np.full(D, 1.0 / np.sqrt(D))
        gains = np.sqrt(1.0 + 0.5 * np.log(SPEND / SPEND[-1]))
        for t in range(300):
            n = 2 + t % (K - 1)  # n = 2..K (n = 1 has no spread)
            c = rng.choice(K, n, replace=False)
            w = np.full(n, OMEGA[n - 1])
            e = rng.standard_normal((n, D)) * np.sqrt(50.0 / w / D)[:, None]
            parts = gains[n - 1] * g + mu[c] + e
            rule._pending = np.array([n - 1])
            rule.tell_parts(np.array([n - 1]), parts[None], w[None])
            mean = np.average(parts, axis=0, weights=w)
            rule.tell_signal(np.array([n - 1]), np.array([mean @ mean]))
        fits.append(rule.signal()[0][[0, 4, K - 1]] / gains[[0, 4, K - 1]] ** 2)
    fits = np.array(fits)
    for j in range(3):
        _mc_check(fits[:, j], 1.0)


def test_with_equal_updates_the_rule_chooses_as_the_spread_rule():
    # FedSGD: every arm's expected update is the same, so the progress is −v_n up to a constant.
    # Over the last half of 300 rounds (4 seeds) the mean noise of the arms the progress rule
    # pulls is within 5 % of the spread rule's on the same seeds, and both are below uniform
    # pulls'.
    def mean_ratio(rule_of_seed):
        out = []
        for seed in range(4):
            picks, _, noise = _drive(rule_of_seed(seed), seed, 300, lambda n: 1.0)
            out.append(noise[picks[150:] - 1].mean() / noise.min())
        return float(np.mean(out)), noise

    progress, noise = mean_ratio(lambda s: _rule(seed=s))
    spread, _ = mean_ratio(lambda s: SpreadThompson(population=K, spend=SPEND, seed=s))
    assert progress < 1.05 * spread, (progress, spread)
    assert max(progress, spread) < noise.mean() / noise.min() - 0.05


def test_where_larger_shares_go_further_the_rule_follows_the_progress():
    # Arms whose expected updates differ (the signal a_n² = 1 + 5 log(s_n/s_K) grows with the
    # share s_n, a curve of the rule's family; the best arm's progress is 2.5x the largest n's)
    # and whose noise is the spread model's. The spread rule minimises the noise; over the last
    # half of 300 rounds (3 seeds) the progress rule's pulls make at least 97 % of the best
    # arm's true progress x − (x² + v)/(2 x*) on average, the spread rule's (measured: 90 %)
    # at least 3 points less.
    def gain(n):
        return np.sqrt(1.0 + 5.0 * np.log(SPEND[n - 1] / SPEND[-1]))

    def mean_share_of_best(rule_of_seed):
        out = []
        for seed in range(3):
            picks, signal, noise = _drive(rule_of_seed(seed), seed, 300, gain)
            d = ProgressThompson.progress(signal[None], noise[None])[0]
            out.append(d[picks[150:] - 1].mean() / d.max())
        return float(np.mean(out))

    progress = mean_share_of_best(lambda s: _rule(seed=s))
    spread = mean_share_of_best(lambda s: SpreadThompson(population=K, spend=SPEND, seed=s))
    assert progress > 0.97, (progress, spread)
    assert progress > spread + 0.03, (progress, spread)


def test_progress_rule_keeps_the_rule_contract():
    check_rule(ProgressThompson(population=50, noise_order=2))


def test_progress_rule_errors_and_params():
    with pytest.raises(InvalidParameterError, match="signal_degree"):
        ProgressThompson(signal_degree=3)
    with pytest.raises(TypeError, match="sample_signal"):
        ProgressThompson(sample_signal="yes")
    rule = _rule()
    with pytest.raises(ProtocolError, match="before init"):
        rule.tell_signal(np.array([0]), np.array([1.0]))
    rule.init(1, K, D)
    with pytest.raises(InvalidParameterError, match="mean_norm2"):
        rule.tell_signal(np.array([0]), np.array([-1.0]))
    with pytest.raises(InvalidParameterError, match="mean_norm2"):
        rule.tell_signal(np.array([0]), np.array([np.nan]))
    with pytest.raises(InvalidParameterError, match="'arms'"):
        rule.tell_signal(np.array([K]), np.array([1.0]))
    params = rule.get_params()
    assert params["signal_degree"] == 1
    assert params["sample_signal"] is False
    assert ProgressThompson(**params).get_params() == params
