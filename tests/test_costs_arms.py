import numpy as np
import pytest

from eegrad import Arms, InvalidParameterError
from eegrad.costs import (
    CallableAggregation,
    CallableCost,
    LinearAggregation,
    LogAggregation,
    PowerAggregation,
    PowerCost,
)


def test_interface_contract_example():
    arms = Arms.from_costs(PowerCost(c_min=0.1, a=1.0, p=2.0), LinearAggregation(b=0.04), 1.0)
    assert arms.N == 7
    assert arms.n_star == 4
    assert arms.theta.shape == arms.sigma2.shape == (7,)
    n = np.arange(1, 8)
    spend = (1.0 - 0.04 * (n - 1)) / n
    np.testing.assert_allclose(arms.theta, np.sqrt(spend - 0.1), rtol=1e-14)
    np.testing.assert_allclose(arms.sigma2, 1 / (n * arms.theta), rtol=1e-14)
    np.testing.assert_allclose(arms.delta, arms.sigma2 - arms.sigma2.min())


def test_linear_cost_closed_form_and_strict_boundary():
    # C(θ) = c_min + a θ  =>  σ_n² = 1/(n θ_n) = a / (B − D(n) − n c_min).
    a, c_min, b = 2.0, 0.25, 0.05
    # Choose B on the boundary of n = 4: B = 4 c_min + D(4) exactly, so N must be 3.
    B = 4 * c_min + b * 3
    arms = Arms.from_costs(PowerCost(c_min=c_min, a=a, p=1.0), LinearAggregation(b=b), B)
    assert arms.N == 3
    n = np.arange(1, 4)
    np.testing.assert_allclose(arms.sigma2, a / (B - b * (n - 1) - n * c_min), rtol=1e-12)
    # Just above the boundary the 4th arm appears.
    more = Arms.from_costs(PowerCost(c_min=c_min, a=a, p=1.0), LinearAggregation(b=b), B + 1e-9)
    assert more.N == 4


def test_root_finder_matches_closed_form_inverse():
    closed = PowerCost(c_min=0.1, a=1.5, p=0.7)
    user = CallableCost(lambda th: 0.1 + 1.5 * th**0.7, c_min=0.1)
    for agg in (LinearAggregation(0.02), LogAggregation(0.05), PowerAggregation(0.01, 1.5)):
        a1 = Arms.from_costs(closed, agg, budget=2.0)
        a2 = Arms.from_costs(user, agg, budget=2.0)
        assert a1.N == a2.N
        np.testing.assert_allclose(a2.theta, a1.theta, rtol=1e-10)


def test_aggregation_values():
    n = np.array([1, 2, 8])
    np.testing.assert_allclose(LinearAggregation(0.5)(n), [0, 0.5, 3.5])
    np.testing.assert_allclose(LogAggregation(1.0)(n), np.log(n))
    np.testing.assert_allclose(PowerAggregation(2.0, 2.0)(n), 2 * (n**2 - 1))


def test_a_fixed_per_round_cost_is_spent_whatever_n_is():
    """D(1) > 0 (e.g. broadcasting the model): N = max{n : B > n c_min + D(n)} and the spends
    (B − D(n))/n count it; D(1) = 0 stays the paper's case, with the same repr."""
    n = np.array([1, 2, 8])
    np.testing.assert_allclose(LinearAggregation(0.5, fixed=2.0)(n), [2.0, 2.5, 5.5])
    np.testing.assert_allclose(LogAggregation(1.0, fixed=2.0)(n), 2.0 + np.log(n))
    np.testing.assert_allclose(PowerAggregation(2.0, 2.0, fixed=1.0)(n), 1 + 2 * (n**2 - 1))
    assert repr(LinearAggregation(0.5)) == "LinearAggregation(b=0.5)"
    assert repr(LinearAggregation(0.5, fixed=2.0)) == "LinearAggregation(b=0.5, fixed=2.0)"
    cost = PowerCost(c_min=0.1, a=1.0, p=2.0)
    base = Arms.from_costs(cost, LinearAggregation(b=0.04), budget=1.0)
    fixed = Arms.from_costs(cost, LinearAggregation(b=0.04, fixed=0.3), budget=1.0)
    # B > n c_min + D₀ + b (n − 1): 1 > 0.1 n + 0.3 + 0.04 (n − 1) holds to n = 5
    assert (base.N, fixed.N) == (7, 5)
    np.testing.assert_allclose(fixed.spend, (1.0 - 0.3 - 0.04 * np.arange(5)) / np.arange(1, 6))
    with pytest.raises(ValueError, match=r"'budget'.*> c_min \+ D\(1\) = 1.3"):
        Arms.from_costs(PowerCost(c_min=1.0), LinearAggregation(fixed=0.3), budget=1.0)
    with pytest.raises(ValueError, match="'fixed' parameter of LinearAggregation"):
        LinearAggregation(0.5, fixed=-1.0)


def test_direct_arms_and_ties():
    arms = Arms(sigma2=[3.0, 1.0, 1.0])
    assert arms.n_star == 2  # ties: smallest n
    np.testing.assert_allclose(arms.theta, 1 / (np.arange(1, 4) * arms.sigma2))
    assert Arms([2.0, 4.0]).scaled(3.0) == Arms([6.0, 12.0])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"cost": PowerCost(c_min=1.0), "aggregation": LinearAggregation(), "budget": 1.0},
            r"'budget' parameter of Arms.from_costs must be > c_min \+ D\(1\) = 1",
        ),
        (
            {"cost": PowerCost(), "aggregation": CallableAggregation(lambda n: n - 2.0),
             "budget": 1.0},
            r"'aggregation'.*D\(1\) >= 0.*D\(1\) = -1",
        ),
        (
            {
                "cost": PowerCost(c_min=0.1),
                "aggregation": CallableAggregation(lambda n: -(n - 1)),
                "budget": 1.0,
            },
            r"'aggregation'.*increasing",
        ),
        (
            {
                "cost": CallableCost(lambda th: 0.1 + np.sin(th), c_min=0.1, inverse=lambda x: x),
                "aggregation": LinearAggregation(0.1),
                "budget": 5.0,
            },
            r"'cost'.*",
        ),
        (
            {
                "cost": CallableCost(
                    lambda th: 0.1 + th * (1.2 - th) ** 2, c_min=0.1, inverse=lambda x: np.nan
                ),
                "aggregation": LinearAggregation(0.1),
                "budget": 1.0,
            },
            r"'cost'.*finite",
        ),
        (
            {
                "cost": PowerCost(c_min=0.0, a=1.0),
                "aggregation": LinearAggregation(0.0),
                "budget": 1.0,
            },
            r"max_arms",
        ),
    ],
)
def test_from_costs_errors(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        Arms.from_costs(**kwargs)


def test_non_increasing_cost_is_named():
    # Decreasing on part of the region used: θ(1.2 − θ)² peaks at θ = 0.4.
    cost = CallableCost(
        lambda th: 0.1 + th * (1.2 - th) ** 2 + 0.0, c_min=0.1, inverse=lambda x: 1.0 - 0.1 * x
    )
    with pytest.raises(InvalidParameterError, match="strictly increasing|inverse"):
        Arms.from_costs(cost, LinearAggregation(0.01), budget=1.0)


@pytest.mark.parametrize(
    ("sigma2", "match"),
    [
        ([], "non-empty"),
        ([1.0, -2.0], "positive"),
        ([1.0, np.nan], "finite"),
        ([[1.0]], "1-dimensional"),
    ],
)
def test_bad_sigma2(sigma2, match):
    with pytest.raises(InvalidParameterError, match=f"'sigma2' parameter of Arms.*{match}"):
        Arms(sigma2=sigma2)


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (lambda: PowerCost(c_min=-1), "c_min"),
        (lambda: PowerCost(a=0), "a"),
        (lambda: PowerCost(p=np.inf), "p"),
        (lambda: LinearAggregation(b=-1), "b"),
    ],
)
def test_bad_cost_parameters(factory, name):
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
        factory()


def test_batch_sizes_from_spend():
    from eegrad.costs import batch_sizes

    arms = Arms.from_costs(PowerCost(c_min=2.0, a=0.5, p=1.0), LinearAggregation(0.25), 30.0)
    b = batch_sizes(arms.spend[:10], c_min=2.0, cost_per_sample=0.5)
    np.testing.assert_array_equal(b[:4], [56, 25, 15, 10])
    np.testing.assert_array_equal(b, np.floor(arms.theta[:10] + 1e-9))  # θ_n is the batch
    with pytest.raises(InvalidParameterError, match=r"'spend'.*arm n = 2"):
        batch_sizes(np.array([5.0, 2.2]), c_min=2.0, cost_per_sample=0.5)


def test_fit_power_cost_recovers_parameters_from_noisy_timings():
    from eegrad.costs import fit_power_cost

    rng = np.random.default_rng(0)
    theta = np.repeat(np.array([1.0, 2, 4, 8, 16, 32, 64]), 20)
    true = PowerCost(c_min=0.3, a=0.05, p=1.2)
    cost = true(theta) * (1 + 0.01 * rng.standard_normal(theta.size))  # 1 % timing noise
    fit = fit_power_cost(theta, cost)
    # 140 timings with 1 % noise: each parameter within a few percent (checked generously).
    assert fit.c_min == pytest.approx(0.3, rel=0.1)
    assert fit.a == pytest.approx(0.05, rel=0.1)
    assert fit.p == pytest.approx(1.2, rel=0.03)
    with pytest.raises(InvalidParameterError, match="'theta' parameter of fit_power_cost"):
        fit_power_cost(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
