"""Sums only: the within-round estimator from Σω, Σω², Σωu and Σω‖u‖² (what secure aggregation
reveals) equals the per-update one, and EEGradStrategy(secure_sums=True) runs on sums alone."""

import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from eegrad import GradientEstimator, SpreadThompson
from eegrad.spread import spread_sums, sums_design, variance_coefficients, weighted_mean


def test_the_spread_from_sums_equals_the_per_update_computation():
    rng = np.random.default_rng(0)
    parts = rng.standard_normal((7, 40)) + 3.0
    w = rng.uniform(1.0, 9.0, 7)
    sums = spread_sums(parts, w)
    mean = weighted_mean(parts, w)
    np.testing.assert_allclose(sums.mean(), mean, rtol=1e-13)
    q = float(w @ ((parts - mean) ** 2).sum(axis=1))
    assert sums.weighted_spread() == pytest.approx(q, rel=1e-11)  # cancellation: ‖u‖² ≫ Q
    _, coef = sums_design(sums.n, sums.total_weight, sums.total_weight2, population=30)
    np.testing.assert_allclose(coef, variance_coefficients(w, 30), rtol=1e-14)


def test_the_weighted_spread_is_unbiased_under_the_client_sampling_model():
    """E Q = S²(W − W₂/W) + τ²(n − 1) for n of K clients drawn without replacement, client
    means μ_k (S² their sample variance, summed over d), noise τ²/ω per coordinate sum. Over
    20,000 rounds the mean of Q/x·θ is 1 within 4 SE (SE from the rounds' spread)."""
    rng = np.random.default_rng(1)
    K, d, n, tau2 = 30, 3, 6, 2.0
    mu = rng.standard_normal((K, d)) * 1.5
    S2 = mu.var(axis=0, ddof=1).sum()
    ratios = []
    for _ in range(20_000):
        pick = rng.choice(K, n, replace=False)
        w = rng.uniform(1.0, 5.0, n)
        parts = mu[pick] + rng.standard_normal((n, d)) * np.sqrt(tau2 / d / w)[:, None]
        sums = spread_sums(parts, w)
        x, _ = sums_design(sums.n, sums.total_weight, sums.total_weight2)
        ratios.append(sums.weighted_spread() / (x @ [S2, tau2]))
    ratios = np.array(ratios)
    assert abs(ratios.mean() - 1.0) < 4 * ratios.std(ddof=1) / np.sqrt(ratios.size)


def test_with_equal_weights_sums_and_parts_give_the_same_choices():
    """Equal weights: Q·n/ω is the pair sum and the two designs are proportional, so the rule
    learns the same fit from sums as from parts (choices equal; estimates to rounding)."""
    picks, results = [], []
    for how in ("parts", "sums"):
        est = GradientEstimator(SpreadThompson(population=20), 6, T=1, dim=10, rng=2)
        rng = np.random.default_rng(3)
        p, r = [], []
        for _ in range(25):
            n = est.ask()
            parts = rng.standard_normal((n, 10)) * (1 + 3 / n) + 1.0
            if how == "parts":
                est.tell_parts(parts, np.full(n, 4.0))
            else:
                est.tell_sums(spread_sums(parts, np.full(n, 4.0)))
            p.append(n)
            r.append(est.result())
            est.next_iterate()
        picks.append(p)
        results.append(np.array(r))
    assert picks[0] == picks[1]
    assert len(set(picks[0])) > 1
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12, atol=1e-13)


sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def _quiet():
    pytest.importorskip("flwr")
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _summing_app():
    """The test_flower clients, their replies made summands (ω·u, ω², ω‖u‖²)."""
    from flwr.clientapp import ClientApp
    from test_flower import _app

    from eegrad.flower import with_spread_sums

    inner = _app()
    app = ClientApp()
    app.train()(with_spread_sums(lambda msg, ctx: inner(msg, ctx)))
    return app


@pytest.mark.usefixtures("_quiet")
def test_a_sums_only_server_steps_as_the_per_update_one():
    pytest.importorskip("flwr")
    from test_flower import K, _app, _start, _strategy

    from eegrad import FixedArm
    from eegrad.flower import LocalGrid

    a = _strategy(selector=FixedArm(3))
    res_a = _start(a, LocalGrid(_app(), K, seed=5), 6)
    b = _strategy(selector=FixedArm(3), secure_sums=True)
    res_b = _start(b, LocalGrid(_summing_app(), K, seed=5), 6)
    np.testing.assert_allclose(res_b.arrays["w"].numpy(), res_a.arrays["w"].numpy(), rtol=1e-12)
    assert [r["budget_used"] for r in a.records] == [r["budget_used"] for r in b.records]
    from eegrad import ProgressThompson

    # a rule that learns from the sums alone (the default keeps your n: sums carry no loss)
    c = _strategy(secure_sums=True, selector=ProgressThompson(noise_order=2))
    _start(c, LocalGrid(_summing_app(), K, seed=5), 20)
    assert len({r["arm"] for r in c.records}) > 1


def test_a_sums_only_server_says_once_that_it_reads_no_clients_local_steps(caplog):
    """Secure sums reveal no client's local steps: under B a round the default rule, which
    reads them, takes FedSGD's model, and the log says so once (the clients here report their
    steps, which the sums leave out)."""
    pytest.importorskip("flwr")
    from test_flower import K, _start, _strategy

    from eegrad.flower import LocalGrid

    with caplog.at_level(logging.INFO, logger="flwr"):
        _start(_strategy(secure_sums=True), LocalGrid(_summing_app(), K, seed=5), 4)
    assert caplog.text.count("reads no client's 'local-steps'") == 1


@pytest.mark.usefixtures("_quiet")
def test_a_sums_only_server_names_what_is_missing():
    pytest.importorskip("flwr")
    from test_flower import K, _app, _start, _strategy

    from eegrad import InvalidParameterError
    from eegrad.flower import CentralDP, ClientUpdateError, LocalGrid

    with pytest.raises(ClientUpdateError, match="with_spread_sums"):
        _start(_strategy(secure_sums=True), LocalGrid(_app(), K, seed=5), 1)
    with pytest.raises(InvalidParameterError, match="'secure_sums'"):
        _strategy(secure_sums=True, privacy=CentralDP(1.0, 1.0, 1e-5))


def test_second_order_noise_closed_forms_for_parts_and_sums():
    """A noise of variance τ²/ω + κ²/ω² (several local steps on the same samples): for n of K
    clients drawn without replacement with unequal weights, E y = x·(S², τ², κ²) for the pair
    sum (pair_design, order=2), E Q = x·(S², τ², κ²) for the weighted spread of the sums
    (sums_design with Σ1/ω), and E‖ū − μ̄‖² = S²(Σp² − 1/K) + τ²Σp²/ω + κ²Σp²/ω². Each over
    20,000 rounds: the mean of the statistic over its expectation is 1 within 4 SE (SE from the
    rounds' spread)."""
    from eegrad.spread import pair_design, pair_sum, predicted_variance

    rng = np.random.default_rng(4)
    K, d, n, tau2, kappa2 = 12, 3, 5, 2.0, 6.0
    mu = rng.standard_normal((K, d)) * 1.5
    mubar = mu.mean(axis=0)
    S2 = mu.var(axis=0, ddof=1).sum()
    theta = np.array([S2, tau2, kappa2])
    ratios = {"pairs": [], "sums": [], "mean": []}
    for _ in range(20_000):
        pick = rng.choice(K, n, replace=False)
        w = rng.uniform(0.5, 4.0, n)
        sd = np.sqrt((tau2 / w + kappa2 / w**2) / d)
        parts = mu[pick] + rng.standard_normal((n, d)) * sd[:, None]
        ratios["pairs"].append(pair_sum(parts, w) / (pair_design(w, order=2) @ theta))
        sums = spread_sums(parts, w)
        x, coef = sums_design(sums.n, sums.total_weight, sums.total_weight2, population=K,
                              inverse_weight_sum=sums.inverse_weight_sum)  # fmt: skip
        ratios["sums"].append(sums.weighted_spread() / (x @ theta))
        v = float(predicted_variance(S2, tau2, w, population=K, kappa2=kappa2))
        assert coef @ theta == pytest.approx(v, rel=1e-12)  # the sums' coefficients agree
        ratios["mean"].append(((weighted_mean(parts, w) - mubar) ** 2).sum() / v)
    for name, r in ratios.items():
        r = np.array(r)
        assert abs(r.mean() - 1.0) < 4 * r.std(ddof=1) / np.sqrt(r.size), name


def test_a_second_order_rule_told_sums_needs_the_inverse_weights():
    from eegrad import InvalidParameterError

    est = GradientEstimator(SpreadThompson(population=20, noise_order=2), 6, T=1, dim=4, rng=0)
    n = est.ask()
    sums = spread_sums(np.ones((n, 4)) + np.arange(n)[:, None], np.full(n, 3.0))
    with pytest.raises(InvalidParameterError, match="'inverse_weight_sum'.*noise_order=2"):
        est.tell_sums(sums._replace(inverse_weight_sum=None))
    est.tell_sums(sums)  # with Σ1/ω it is told
    assert est.done
