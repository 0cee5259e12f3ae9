"""The split of a total budget over a run's rounds (eegrad.selectors.plan): against its closed
form on the quadratic, against every split of small problems, and as the total-budget rule's
choice where the rounds bind."""

import itertools

import numpy as np
import pytest

from eegrad import BudgetThompson, InvalidParameterError
from eegrad.selectors.evidence import Outlook
from eegrad.selectors.plan import plan_rounds, planned_value


@pytest.mark.parametrize("rho", [1.0, 0.95, 0.9, 0.7])
def test_the_split_is_the_closed_form_on_the_quadratic(rho):
    """v_n = 1/n, c_n = n, h = 20 rounds, B = 200: minimising Σ ρ^(h−j)/n_j at Σ n_j = B gives
    n_j = B √w_j / Σ √w (w_j = ρ^(h−j)); the integer split is within one client of it, spends
    the budget whole, and grows towards the end (even at ρ = 1: FedAvg's n = B/h)."""
    N, h, B = 200, 20, 200.0
    n = np.arange(1, N + 1, dtype=float)
    arms = plan_rounds(n, 1.0 / n, rho, h, B)
    clients = arms + 1
    w = rho ** np.arange(h - 1, -1, -1)
    closed = B * np.sqrt(w) / np.sqrt(w).sum()
    assert np.max(np.abs(clients - closed)) <= 1.0 + 1e-9
    assert clients.sum() == B
    assert np.all(np.diff(clients) >= 0)
    if rho == 1.0:
        assert np.all(clients == B / h)


@pytest.mark.parametrize("seed", range(6))
def test_the_split_is_the_best_of_every_split_of_a_small_problem(seed):
    """Random convex-ish costs and noises, N = 6 arms, h = 3 rounds: no affordable split
    (enumerated, 216) leaves less noise than the plan's, to within the Lagrangian's gap of one
    hull step (the plan is exact where its split is the enumeration's best; never worse than
    the best by more than the noise of one step between neighbouring hull arms)."""
    rng = np.random.default_rng(seed)
    N, h = 6, 3
    costs = np.cumsum(rng.uniform(0.5, 2.0, N))
    noise = np.sort(rng.uniform(0.1, 5.0, N))[::-1]
    rho = float(rng.uniform(0.5, 1.0))
    budget = float(rng.uniform(h * costs[0] * 1.1, h * costs[-1] * 0.9))
    plan = plan_rounds(costs, noise, rho, h, budget)
    assert costs[plan].sum() <= budget + 1e-12
    best = min(planned_value(np.array(s), noise, rho)
               for s in itertools.product(range(N), repeat=h)
               if costs[list(s)].sum() <= budget)  # fmt: skip
    got = planned_value(plan, noise, rho)
    assert got >= best - 1e-12
    assert got <= best + np.max(-np.diff(noise))


def test_a_budget_the_rounds_cannot_spend_and_one_they_cannot_afford():
    n = np.arange(1, 11, dtype=float)
    assert np.all(plan_rounds(n, 1 / n, 0.9, 5, 1000.0) == 9)  # all 10 every round: 50 spent
    assert np.all(plan_rounds(n, 1 / n, 0.9, 5, 3.0) == 0)  # the cheapest, the caller decides


@pytest.mark.parametrize(("kw", "match"), [
    ({"costs": [1.0, 0.0]}, "'costs'"), ({"noise": [1.0, -1.0]}, "'noise'"),
    ({"rho": 1.5}, "'rho'"), ({"rho": 0.0}, "'rho'"), ({"rounds": 0}, "'rounds'"),
    ({"rounds": 2.5}, "'rounds'"), ({"budget": -1.0}, "'budget'"),
])
def test_bad_input_is_named(kw, match):
    args = {"costs": [1.0, 2.0], "noise": [1.0, 0.5], "rho": 0.9, "rounds": 3, "budget": 4.0}
    with pytest.raises((InvalidParameterError, TypeError), match=match):
        plan_rounds(**{**args, **kw})


def _told_rule(K=20):
    rule = BudgetThompson(population=K)
    rule.init(1, K, 5)
    return rule


def test_where_the_rounds_bind_the_rule_asks_the_plans_first_round():
    """Told every n's cost (n trainings), a budget of 200 and 20 rounds left, before any fit:
    the plan's even split, FedAvg's n = 10 — not the rate's n = 1 every round, which would
    leave 180 unspent at the last round; the explanation says it splits the budget."""
    K = 20
    rule = _told_rule(K)
    costs = np.arange(1.0, K + 1)
    arm = rule.ask(1, outlook=Outlook(costs=costs, budget_left=200.0, rounds_left=20))
    assert arm[0] + 1 == 10
    assert rule.rounds_bind()
    assert "split over the 20 rounds left" in rule.explain()


def test_where_the_budget_binds_the_rule_keeps_its_rate():
    """20 rounds left but a budget of 15: even one client a round cannot last the rounds, so
    the budget binds and the rule asks as without rounds (its warm-up's two clients)."""
    K = 20
    rule = _told_rule(K)
    costs = np.arange(1.0, K + 1)
    bound = rule.ask(1, outlook=Outlook(costs=costs, budget_left=15.0, rounds_left=20))
    rule.withdraw()
    free = rule.ask(1, outlook=Outlook(costs=costs, budget_left=15.0))
    assert not rule.rounds_bind()
    assert bound[0] == free[0]
