"""BudgetThompson, the rule of a total budget: its objective (the rate of decrease per unit of
cost) and its last round against their closed forms, and the fits it shares with
ProgressThompson (ProgressFit) under a total budget's equal spends."""

import numpy as np
import pytest

from eegrad import BudgetThompson, InvalidParameterError, ProgressThompson, ProtocolError
from eegrad.selectors.evidence import Outlook


def _per_cost_world(seed, K=20, d=6, sigma_b2=2.0, tau2=4.0):
    """Clients that train their own way: part k is m_k + e (e of trace τ²), the means m_k
    spread with σ_b² = Σ‖m_k − m̄‖²/(K − 1) around m̄ of norm 1."""
    rng = np.random.default_rng(500 + seed)
    m = rng.standard_normal((K, d))
    m -= m.mean(axis=0)
    m *= np.sqrt(sigma_b2 * (K - 1) / (m**2).sum())
    centre = np.zeros(d)
    centre[0] = 1.0
    return rng, m + centre, tau2


def test_the_shared_fits_under_a_total_budget_against_the_closed_forms():
    """The total-budget mode: every client trains its own way, so the arms share one
    per-client update (equal spends) and a round of n costs c_n = n + D₀. Closed forms: signal
    s = ‖m̄‖², noise v_n = σ_b²(1/n − 1/K) + τ²/n (σ_b² between the clients' means, τ² within).
    With equal client weights the spread identifies σ² = σ_b² + τ², not its split, so a fit of
    v_n is known to lie in [σ²(1/n − 1/K), σ²/n] (as v_n does). Over 12 seeds of 300 rounds
    of arms drawn at random: BudgetThompson's fitted signal (ProgressFit's) is within 4 SE
    (over seeds) of s, and its fitted noise of every arm within that interval, each with 5 %
    for the plug-in (the fits' memory is finite: discount 0.98)."""
    K, d, D0, rounds = 20, 6, 5.0, 300
    ns = np.arange(1, K + 1)
    cost = ns + D0
    noise_fits, signal_fits = [], []
    for seed in range(12):
        rng, m, tau2 = _per_cost_world(seed, K, d)
        s = float(np.sum(m.mean(axis=0) ** 2))
        sb2 = float(((m - m.mean(axis=0)) ** 2).sum() / (K - 1))
        v = sb2 * (1 / ns - 1 / K) + tau2 / ns
        rule = BudgetThompson(discount=0.98, population=K, spend=np.ones(K), seed=seed)
        rule.init(1, K, d)
        picks = np.random.default_rng(700 + seed)
        for t in range(1, rounds + 1):
            n = int(picks.integers(2, K + 1))  # the arms drawn at random: every n's noise seen
            arm = rule.ask(t, at_least=n, at_most=n, outlook=Outlook(costs=cost, budget_left=1e9))
            parts = m[rng.choice(K, n, replace=False)] + rng.standard_normal((n, d)) * np.sqrt(
                tau2 / d)  # fmt: skip
            rule.tell_parts(arm, parts[None], np.ones((1, n)),
                            mean_norm2=np.array([np.sum(parts.mean(axis=0) ** 2)]))
        sigma2 = sb2 + tau2
        low, high = sigma2 * (1 / ns - 1 / K), sigma2 / ns
        assert np.all((low <= v) & (v <= high))
        noise_fits.append(rule.predicted()[0])
        signal_fits.append(rule.model.signal()[0, 0] / s)
        bounds = (low, high)
    signal_fits = np.array(signal_fits)
    se = signal_fits.std(ddof=1) / np.sqrt(signal_fits.size)
    assert abs(signal_fits.mean() - 1.0) < 4 * se + 0.05, (signal_fits.mean(), se)
    fits = np.array(noise_fits)
    mean, se = fits.mean(axis=0), fits.std(axis=0, ddof=1) / np.sqrt(len(fits))
    low, high = bounds  # the same σ² in every seed's world (the spread is scaled to it)
    assert np.all(mean >= low * 0.95 - 4 * se), (mean, low)
    assert np.all(mean <= high * 1.05 + 4 * se), (mean, high)


def test_the_budget_rule_needs_costs_and_the_others_ignore_them():
    """The costs reach a rule with its ask's outlook: the budget rule refuses a cost of 0,
    naming costs; a rule that does not read them is told nothing of them."""
    rule = BudgetThompson(population=5)
    with pytest.raises(ProtocolError, match="before init"):
        rule.ask(1, outlook=Outlook(costs=np.ones(5)))
    rule.init(1, 5, 2)
    with pytest.raises(InvalidParameterError, match="'costs'"):
        rule.ask(1, outlook=Outlook(costs=np.array([1.0, 0.0, 1.0, 1.0, 1.0])))
    other = ProgressThompson(population=5)
    other.init(1, 5, 2)
    assert not other.uses_costs
    other.ask(1, outlook=Outlook(costs=np.ones(5)))
    assert not hasattr(other, "_costs")


def _contracting_signal_run(seed, K, d, rho, cost, budget_left, rule_class=BudgetThompson):
    """150 rounds of the per-cost test's clients whose signal's level contracts by ρ a round
    (the round mean's expectation shrinks by √ρ), each round told the costs and the budget
    left; the rule after them."""
    rng, m, tau2 = _per_cost_world(seed, K, d, sigma_b2=0.05, tau2=0.1)
    rule = rule_class(discount=0.9, population=K, spend=np.ones(K), seed=seed)
    rule.init(1, K, d)
    for t in range(1, 151):
        arm = rule.ask(t, outlook=Outlook(costs=cost, budget_left=budget_left))
        n = int(arm[0]) + 1
        scale = rho ** (t / 2)
        parts = scale * m[rng.choice(K, n, replace=False)] + rng.standard_normal(
            (n, d)) * np.sqrt(tau2 / d) * scale  # fmt: skip
        rule.tell_parts(arm, parts[None], np.ones((1, n)),
                        mean_norm2=np.array([np.sum(parts.mean(axis=0) ** 2)]))
    return rule


def test_the_fit_measures_the_contraction_of_the_signal_level():
    """A signal whose level contracts by ρ = 0.97 a round (the round mean's expectation
    shrinks by √ρ), clients as in the test of the shared fits, a round of n costing n + 5:
    over 8 seeds the measured contraction is within 4 SE (over seeds) of ρ, plus 0.01 for the
    smoothing's lag, under either rule (the fit is ProgressFit's)."""
    K, d, rho = 20, 6, 0.97
    cost = np.arange(1, K + 1) + 5.0
    for rule_class in (BudgetThompson, ProgressThompson):
        measured = np.array([
            float(_contracting_signal_run(seed, K, d, rho, cost, 300.0, rule_class).model.contraction()[0])
            for seed in range(8)])  # fmt: skip
        se = measured.std(ddof=1) / np.sqrt(measured.size)
        assert abs(measured.mean() - rho) < 4 * se + 0.01, (rule_class, measured.mean(), se)


def test_rate_objective_follows_its_closed_form():
    """The contraction test's signal (ρ = 0.97 a round) and clients: after 150 rounds the
    rule's objective equals (1 − ρ̂ − (1 − √ρ̂)² v_n/s)/c_n from the rule's own ρ̂, v and
    s, the rule asks its largest, and it does not depend on the budget left; while the noise
    is far below the level's floor the cheapest round, n = 1."""
    K, d, rho = 20, 6, 0.97
    cost = np.arange(1, K + 1) + 5.0
    for seed in range(3):
        rule = _contracting_signal_run(seed, K, d, rho, cost, 1e6)
        r = float(rule.model.contraction()[0])
        v, s = rule.predicted()[0], float(np.exp(rule.model.level.log_level[0]))
        closed = (1 - r - (1 - np.sqrt(r)) ** 2 * v / s) / cost
        np.testing.assert_allclose(rule.rate_of_decrease(rule.predicted())[0], closed,
                                   rtol=1e-10)  # fmt: skip
        for budget in (1e6, 300.0):
            rule.ask(151, outlook=Outlook(costs=cost, budget_left=budget))
            rule.withdraw()
            np.testing.assert_allclose(rule._objective(rule.predicted())[0], closed, rtol=1e-10)
        assert int(rule.ask(151)[0]) == int(np.argmax(closed)) == 0


def test_rate_is_the_best_policy_of_its_scalar_model():
    """E' = ρE + q_n at cost c_n (ρ = 0.95, q_n = 0.02/n, c_n = n + 2): over a budget of 300,
    the policy that asks the steepest descent of E per unit of cost, (q_n − (1 − ρ)E)/c_n,
    ends no higher than any fixed n, nor than any of 200 random schedules; and it asks the
    cheapest round far from the floor and more clients near it."""
    rho, N, budget = 0.95, 20, 300.0
    ns = np.arange(1, N + 1)
    q, c = 0.02 / ns, ns + 2.0

    def run(policy):
        E, left, asked = 1.0, budget, []
        while left >= c.min():
            n = policy(E, left)
            n = n if c[n] <= left else int(np.flatnonzero(c <= left).max())
            E, left = rho * E + q[n], left - c[n]
            asked.append(n)
        return E, asked

    greedy, asked = run(lambda E, left: int(np.argmin((q - (1 - rho) * E) / c)))
    assert asked[0] == 0  # the cheapest round far from the floor
    assert max(asked) > 0  # more clients near it
    for n in range(N):
        assert greedy <= run(lambda E, left, n=n: n)[0] + 1e-12
    rng = np.random.default_rng(0)
    for _ in range(200):
        draws = iter(rng.integers(0, N, 400))
        assert greedy <= run(lambda E, left, draws=draws: int(next(draws)))[0] + 1e-12


def test_the_budget_rule_ends_the_run_on_the_most_clients_it_affords():
    """Rounds of n costing n + 4 (the cheapest 5): a round of n ends the run where c_n <= B
    and B − c_n < 5, and the rule asks the largest such n, in its warm-up too: B = 24.5 → n =
    20 (c = 24), B = 20 → 16, B = 9 → 5, B = 5 → 1; where no round can end the run (B = 30:
    every round leaves 6 or more), the rate's choice (the warm-up's n = 2); before the
    costs are told, none."""
    K = 20
    cost = np.arange(1, K + 1) + 4.0
    for budget, n in ((24.5, 20), (20.0, 16), (9.0, 5), (5.0, 1), (30.0, None), (4.0, None)):
        rule = BudgetThompson(population=K, spend=np.ones(K))
        rule.init(1, K, 3)
        assert rule.last_round_arm() is None
        arm = rule.ask(1, outlook=Outlook(costs=cost, budget_left=budget))
        assert rule.last_round_arm() == (None if n is None else n - 1), budget
        if budget >= 5.0:
            assert int(arm[0]) == (1 if n is None else n - 1), budget
        # last_round=False: the objective's choice to the end (the warm-up's n = 2)
        keep = BudgetThompson(population=K, spend=np.ones(K), last_round=False)
        keep.init(1, K, 3)
        arm = keep.ask(1, outlook=Outlook(costs=cost, budget_left=budget))
        if budget >= 5.0:
            assert int(arm[0]) == 1, budget


def test_last_round_must_be_a_bool():
    with pytest.raises(TypeError, match="'last_round' parameter of BudgetThompson must be a bool"):
        BudgetThompson(last_round="no")
    assert BudgetThompson(last_round=False).get_params()["last_round"] is False


def test_the_budget_rule_warms_up_on_two_clients_unless_told_otherwise():
    rate = BudgetThompson(population=20)
    rate.init(1, 20, 3)
    assert rate.warmup_arms == [1, 1, 1]  # three rounds of two clients
    told = BudgetThompson(population=20, warmup=[4, 4])
    told.init(1, 20, 3)
    assert told.warmup_arms == [3, 3]
    assert told.get_params()["warmup"] == [4, 4]
    decrease = ProgressThompson(population=20)
    decrease.init(1, 20, 3)
    assert decrease.warmup_arms == [19, 1, 5]




def test_what_a_total_budget_has_ahead_is_kept_and_read_by_hand():
    """The outlook's plain object: nothing told, then costs c_n = 1 + 0.5 n, a budget left of
    7 and 3 rounds left. The rounds bind (3 · 1.5 < 7); the last round is the most clients
    whose cost fits in 7 and leaves less than the cheapest round (1.5): c_n in (5.5, 7], n = 10,
    11 or 12 (c = 6, 6.5, 7), so n = 12. An outlook without costs keeps what was told."""
    from eegrad.selectors.budget import BudgetAhead

    ahead = BudgetAhead(12)
    assert not ahead.told()
    assert not ahead.rounds_bind()
    assert ahead.last_round_arm() is None
    costs = 1.0 + 0.5 * np.arange(1, 13)
    ahead.take(Outlook(costs=costs, budget_left=7.0, rounds_left=3), "test")
    assert ahead.told()
    assert ahead.rounds_bind()
    assert ahead.last_round_arm() == 11  # n = 12
    ahead.take(Outlook(costs=costs, budget_left=6.9, rounds_left=3), "test")
    assert ahead.last_round_arm() == 10  # n = 11: 6.5 <= 6.9 < 7
    ahead.take(Outlook(rounds_left=1), "test")
    assert ahead.rounds_left == 3
    assert ahead.budget_left == 6.9
    ahead.take(Outlook(costs=costs, budget_left=7.0, rounds_left=5), "test")
    assert not ahead.rounds_bind()  # 5 · 1.5 > 7: the budget ends the run
    with pytest.raises(ValueError, match="'rounds_left'"):
        ahead.take(Outlook(costs=costs, budget_left=7.0, rounds_left=0), "test")
