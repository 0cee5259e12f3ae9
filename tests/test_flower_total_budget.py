"""EEGradStrategy(total_budget=...): clients that train their own way, a run's total budget."""

import csv
import itertools
import logging

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg

from eegrad import FixedArm, InvalidParameterError
from eegrad.checkpoint import CheckpointError
from eegrad.flower import ClientUpdateError, EEGradStrategy, LocalGrid
from eegrad.flower.round_costs import RoundCosts

K, D = 10, 4
MU = np.random.default_rng(1).standard_normal((K, D))
SIZES = np.arange(20, 20 + 10 * K, 10)  # client i holds 20 + 10 i samples


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _quickstart_app(seen=None, cost=None):
    """A client as Flower's quickstarts write them: it trains E = 2 local steps on its own data
    and replies its model, its train loss and num-examples; nothing of eegrad. ``cost``:
    ``cost(pid) -> dict`` of extra metrics."""
    app = ClientApp()

    @app.train()
    def train(msg, context):
        pid = int(context.node_config["partition-id"])
        if seen is not None:
            seen.append(dict(msg.content["config"]))
        w = msg.content["arrays"]["w"].numpy()
        rng = np.random.default_rng([pid, int(msg.content["config"]["server-round"])])
        for _ in range(2):
            w = w - 0.3 * (w - MU[pid] + rng.standard_normal(D) / np.sqrt(SIZES[pid]))
        metrics = {"train_loss": float(np.sum((w - MU[pid]) ** 2)), "num-examples": int(SIZES[pid])}
        metrics.update({} if cost is None else cost(pid))
        return Message(RecordDict({"arrays": ArrayRecord({"w": Array(w)}),
                                   "metrics": MetricRecord(metrics)}), reply_to=msg)  # fmt: skip

    return app


def _model():
    return ArrayRecord({"w": Array(np.zeros(D))})


def _run(strategy, app=None, rounds=500, **grid):
    res = strategy.start(grid=LocalGrid(app or _quickstart_app(), K, seed=2, **grid),
                         initial_arrays=_model(), num_rounds=rounds)  # fmt: skip
    return res


def test_an_unchanged_quickstart_client_runs_until_the_budget_is_spent():
    """Cost = num-examples × 0.01 a client, D(n) = 1 + 0.1 n: no share is sent, every round's
    cost is its clients' plus D(n), the records carry budget_left, and the run ends before the
    round it cannot afford (the last budget_left is below the cheapest round)."""
    seen = []
    s = EEGradStrategy(total_budget=60.0, aggregation=lambda n: 1.0 + 0.1 * np.asarray(n),
                       cost_metric="num-examples", cost_scale=0.01)  # fmt: skip
    res = _run(s, _quickstart_app(seen))
    assert seen
    assert all("budget-share" not in cfg for cfg in seen)
    assert "budget left" in s.stopped
    for r in s.records:
        assert r["budget_left"] == pytest.approx(60.0 - r["cost"])
        assert r["budget"] == ""
    assert s.records[-1]["cost"] <= 60.0  # never overspent
    # it stopped before a round of one client as costly as the costliest it had seen
    assert s.records[-1]["budget_left"] < 1.0 + 0.1 + 0.01 * SIZES.max()
    assert len({r["arm"] for r in s.records}) > 1
    assert np.all(np.isfinite(res.arrays["w"].numpy()))


def test_the_stopping_rule_at_the_budget_with_a_fixed_n():
    """Every client costs 2, D(n) = 3: a round of n = 4 costs 11. Before any client has
    reported a cost the first round asks one (cost 5: no worst case is known before); the 55
    left afford five rounds of n = 4, and nothing after."""
    s = EEGradStrategy(total_budget=60.0, aggregation=lambda n: 3.0 + 0 * np.asarray(n),
                       selector=FixedArm(4), cost_metric="c")  # fmt: skip
    _run(s, _quickstart_app(cost=lambda pid: {"c": 2.0}))
    assert [r["arm"] for r in s.records] == [1, 4, 4, 4, 4, 4]
    assert [r["budget_used"] for r in s.records] == [5.0] + [11.0] * 5
    assert s.records[-1]["budget_left"] == 0.0
    assert "Server round 7" in s.stopped


@pytest.mark.parametrize("budget", [60.0, 100.0])
def test_the_default_rule_ends_the_run_on_the_most_clients_it_affords(budget):
    """Every client costs 2, D(n) = 3: c_n = 2n + 3. The default rule's last round asks the most
    clients the budget left L affords, n = min(K, (L − 3) // 2), and is the run's last: what it
    leaves buys no round of one client (5); every round before it could not have ended the run
    so (it left 5 or more after a round of K)."""
    s = EEGradStrategy(total_budget=budget, aggregation=lambda n: 3.0 + 0 * np.asarray(n),
                       cost_metric="c")  # fmt: skip
    _run(s, _quickstart_app(cost=lambda pid: {"c": 2.0}))
    left_before = [budget] + [r["budget_left"] for r in s.records[:-1]]
    last = s.records[-1]
    assert last["arm"] == min(K, int((left_before[-1] - 3.0) // 2)) > 2
    assert last["budget_left"] < 5.0
    assert all(b - (2 * K + 3) >= 5.0 for b in left_before[:-1])


def test_with_wall_clock_a_round_costs_its_slowest_client():
    """round_cost="slowest": a round lasts as long as its slowest client (seconds reported),
    plus D(n) (the first round asks one client: no cost is known before it)."""
    seconds = {pid: 1.0 + pid for pid in range(K)}
    s = EEGradStrategy(total_budget=200.0, round_cost="slowest", cost_metric="seconds",
                       aggregation=lambda n: 0.5 + 0 * np.asarray(n), selector=FixedArm(3))  # fmt: skip
    seen = []
    app = _quickstart_app(cost=lambda pid: (seen.append(pid), {"seconds": seconds[pid]})[1])
    _run(s, app, rounds=4)
    chunks = [seen[:1]] + [seen[i:i + 3] for i in range(1, len(seen), 3)]
    assert [r["arm"] for r in s.records] == [1, 3, 3, 3]
    for r, round_pids in zip(s.records, chunks, strict=True):
        assert r["budget_used"] == pytest.approx(0.5 + max(seconds[p] for p in round_pids))


def test_round_costs_expected_cost_against_closed_forms():
    """sum: n c̄ + D(n); slowest: the expected maximum of n of the m costs seen without
    replacement, checked against every subset's maximum."""
    costs = RoundCosts("sum", lambda n: 2.0 * np.ones_like(np.asarray(n, float)))
    costs.tell({1: 1.0, 2: 3.0, 3: 8.0})
    np.testing.assert_allclose(costs.expected(3), 2.0 + np.arange(1, 4) * 4.0)
    slow = RoundCosts("slowest", lambda n: np.zeros_like(np.asarray(n, float)))
    seen = {i: c for i, c in enumerate([5.0, 1.0, 4.0, 2.0, 9.0])}
    slow.tell(seen)
    for n in range(1, 6):
        brute = np.mean([max(c) for c in itertools.combinations(seen.values(), n)])
        assert slow.expected(6)[n - 1] == pytest.approx(brute)
    # more clients than costs seen: with replacement, E max = Σ c_(j) [(j/m)^n − ((j−1)/m)^n]
    c = np.sort(list(seen.values()))
    j = np.arange(1, 6)
    assert slow.expected(6)[5] == pytest.approx(np.sum(c * ((j / 5) ** 6 - ((j - 1) / 5) ** 6)))
    fresh = RoundCosts("slowest", lambda n: np.ones_like(np.asarray(n, float)), c_min=0.5)
    np.testing.assert_allclose(fresh.expected(3), 1.5)  # before any report: c_min


def test_a_reply_without_the_cost_metric_is_an_error_naming_node_round_and_metric():
    s = EEGradStrategy(total_budget=50.0, cost_metric="energy")
    with pytest.raises(ClientUpdateError, match=r"node \d+ at server round 1 has no 'energy'"):
        _run(s)


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_a_negative_or_non_finite_cost_is_an_error_naming_the_node(value):
    s = EEGradStrategy(total_budget=50.0, cost_metric="c")
    app = _quickstart_app(cost=lambda pid: {"c": value if pid == 3 else 1.0})
    with pytest.raises(ClientUpdateError, match=r"node \d+ at server round \d+ reports a cost"):
        _run(s, app)


def test_total_budget_errors_are_refused_before_any_round():
    with pytest.raises(InvalidParameterError, match="'total_budget'.*at least one round of n = 1"):
        EEGradStrategy(total_budget=2.0, c_min=1.5, aggregation=lambda n: 1.0 + 0 * n)
    with pytest.raises(InvalidParameterError, match="'total_budget'.*None when budget is given"):
        EEGradStrategy(10.0, 1.0, total_budget=100.0)
    with pytest.raises(InvalidParameterError, match="'budget'.*total_budget="):
        EEGradStrategy()
    with pytest.raises(InvalidParameterError, match="'c_min'"):
        EEGradStrategy(10.0)
    with pytest.raises(InvalidParameterError, match="'steps'"):
        EEGradStrategy(total_budget=100.0, steps="t-rounds", T=4)
    with pytest.raises(InvalidParameterError, match="'round_cost'"):
        EEGradStrategy(total_budget=100.0, round_cost="mean")
    with pytest.raises(InvalidParameterError, match="'cost_scale'"):
        EEGradStrategy(total_budget=100.0, cost_scale=0.0)


def test_a_resumed_run_keeps_the_budget_spent(tmp_path):
    """Stopped in round 5 (rounds 1-4 kept) and resumed with new objects and the same
    num_rounds, the run ends where the uninterrupted one does: the same rounds, costs, budget
    left and model."""
    def make(ck, on_round=None):
        return EEGradStrategy(total_budget=80.0, aggregation=lambda n: 1.0 + 0 * np.asarray(n),
                              cost_metric="num-examples", cost_scale=0.01, checkpoint=ck,
                              csv_path=ck.with_suffix(".csv"), on_round=on_round)  # fmt: skip

    def cut_at_5(report):  # a kill in round 5: rounds 1-4 kept (the same num_rounds)
        if report.server_round == 5:
            raise KeyboardInterrupt

    whole = make(tmp_path / "whole.npz")
    res_whole = _run(whole)
    with pytest.raises(KeyboardInterrupt):
        _run(make(tmp_path / "cut.npz", on_round=cut_at_5))
    resumed = make(tmp_path / "cut.npz")
    res = _run(resumed)
    assert resumed.records == whole.records
    np.testing.assert_array_equal(res.arrays["w"].numpy(), res_whole.arrays["w"].numpy())
    with open(tmp_path / "cut.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["budget_left"]) for r in rows] == [r["budget_left"] for r in whole.records]
    other = EEGradStrategy(total_budget=90.0, aggregation=lambda n: 1.0 + 0 * np.asarray(n),
                           cost_metric="num-examples", cost_scale=0.01,
                           checkpoint=tmp_path / "cut.npz")  # fmt: skip
    with pytest.raises(CheckpointError, match="total_budget: 80.0 in the checkpoint, 90.0 here"):
        _run(other)


def test_it_composes_with_an_inner_strategy():
    s = EEGradStrategy(total_budget=40.0, cost_metric="num-examples", cost_scale=0.01,
                       strategy=FedAvg(fraction_evaluate=0.0))  # fmt: skip
    _run(s)
    assert s.records[-1]["budget_left"] >= 0.0
    assert len(s.records) > 3


def test_the_first_round_of_reported_costs_asks_your_strategys_n_not_one_client():
    """Before any client has reported its cost there is no worst case to price a round by: a
    round asks at most what your strategy's own first round would (FedAvg's fraction_train of
    the nodes, here 3 of 10), not one client; with a strategy that does not sample as FedAvg
    does (none given), the fewest clients. After the first round the costliest seen bounds the next."""
    def first(strategy):
        s = EEGradStrategy(total_budget=500.0, selector=FixedArm(3), strategy=strategy,
                           cost_metric="num-examples", cost_scale=0.01)  # fmt: skip
        _run(s, rounds=2)
        return [r["arm"] for r in s.records]

    assert first(FedAvg(fraction_train=0.3, fraction_evaluate=0.0)) == [3, 3]
    assert first(FedAvg(fraction_train=0.1, fraction_evaluate=0.0)) == [2, 3]  # min_train 2
    assert first(None) == [1, 3]  # eegrad's own step: no schedule of yours to go by
