"""eegrad.flower: the strategy against GradientEstimator and a plain loop, budgets, failures."""

import csv
import importlib.metadata
import json
import logging
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

from flwr.app import Array, ArrayRecord, ConfigRecord
from flwr.clientapp import ClientApp

from eegrad import (
    BudgetThompson,
    FixedArm,
    GradientEstimator,
    InvalidParameterError,
    NonFiniteGradientError,
    ProgressThompson,
    SpreadThompson,
)
from eegrad._random import as_generator
from eegrad.flower import (
    CentralDP,
    ClientUpdateError,
    DeviceCost,
    EEGradStrategy,
    LocalGrid,
    WallClock,
    budgeted_train,
)
from eegrad.flower.strategy import default_rule
from eegrad.parts import PullAccumulator
from eegrad.selectors.progress_model import ProgressModel

K, D, LR = 8, 4, 0.5
MU = np.random.default_rng(1).standard_normal((K, D))


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _app(noise=True, bad=None, batch_size=None, reports_loss=False):
    """Clients with means MU; gradient of ½‖w − μ_i‖² plus noise 1/√b (seeded by round);
    ``batch_size``: mini-batch steps, as many as the share buys batches; ``reports_loss``: the
    reply carries a ``train_loss`` that falls as training goes (1/round)."""

    def gradient(arrays, b, context, config):
        pid = int(context.node_config["partition-id"])
        if bad is not None:
            out = bad(pid, arrays)
            if out is not None:
                return out
        rng = np.random.default_rng([pid, int(config["server-round"])])
        eps = rng.standard_normal(D) / np.sqrt(b) if noise else 0.0
        return [arrays[0] - MU[pid] + eps]

    train = budgeted_train(gradient, lambda ctx, cfg: DeviceCost(1.0, 2.0 + int(
        ctx.node_config["partition-id"]) % 3), lr=LR, batch_size=batch_size)  # fmt: skip

    def train_reporting_loss(msg, context):
        reply = train(msg, context)
        if reports_loss and reply.has_content():
            rnd = int(msg.content["config"]["server-round"])
            reply.content["metrics"]["train_loss"] = 1.0 / rnd
        return reply

    app = ClientApp()
    app.train()(train_reporting_loss)
    return app


def _strategy(**kw):
    args = {"budget": 40.0, "c_min": 1.5, "aggregation": lambda n: 0.5 * (n - 1.0), "rng": 3}
    return EEGradStrategy(**(args | kw))


def _start(strategy, grid, rounds):
    return strategy.start(grid=grid, initial_arrays=ArrayRecord({"w": Array(np.zeros(D))}),
                          num_rounds=rounds)  # fmt: skip


def test_choices_equal_gradient_estimators_on_the_same_stream(monkeypatch):
    # the default's rule unanchored (departure=1: any n; it reads no clients' loss here, and
    # would keep its n), so that its choices vary
    spend = _strategy().spend(N_ARMS := K)

    def rule():
        return ProgressThompson(population=K, spend=spend, noise_order=2, discount=0.9)

    strategy = _strategy(selector=rule())
    grid = LocalGrid(_app(), K, seed=2)
    told = _told_updates(monkeypatch)  # the server folds each reply w_i: keep u_i = w − w_i
    _start(strategy, grid, 25)
    arms = [r["arm"] for r in strategy.records]
    # Replay: the same rule, the same stream (the strategy's first child), the same updates
    # and local steps (the clients report one, FedSGD), told as a stack (the streamed sums
    # equal the stack's to rounding).
    assert isinstance(strategy.selector, ProgressThompson)
    replay = GradientEstimator(rule(), N_ARMS, T=1, dim=D,
                               rng=as_generator(3).spawn(2)[0])  # fmt: skip
    for t, (n, (_, parts, weights)) in enumerate(zip(arms, told, strict=True)):
        replay.tell_rounds_left(25 - t)  # the strategy tells its rule the rounds left
        assert replay.ask() == n
        assert len(parts) == n
        replay.tell_local_steps(1.0)
        replay.tell_parts(np.array(parts), np.array(weights))
        replay.result()
        replay.next_iterate()
    assert len(set(arms)) > 1


def _told_rounds_left(monkeypatch):
    """The rounds left every ProgressThompson takes from the outlook of its asks, in order (a
    spy on _look_ahead: a rule that does not weigh them keeps none)."""
    told = []
    look = ProgressThompson._look_ahead

    def spy(self, outlook, owner):
        look(self, outlook, owner)
        if self._rounds_left is not None:
            told.append(self._rounds_left)

    monkeypatch.setattr(ProgressThompson, "_look_ahead", spy)
    return told


def test_the_rule_is_told_the_rounds_left_of_its_run(monkeypatch):
    # Before each ask, the default rule is told the rounds left of the num_rounds the run was
    # started with, this one included; a rule that does not weigh them is told nothing.
    told = _told_rounds_left(monkeypatch)
    _start(_strategy(), LocalGrid(_app(), K, seed=2), 6)
    assert told == [6, 5, 4, 3, 2, 1]


def test_a_rule_whose_outlook_the_budget_cannot_supply_is_refused():
    # BudgetThompson weighs every n's cost and the budget left; under B a round the clients
    # report no costs, so it would run on another objective: refused, naming what it reads.
    with pytest.raises(InvalidParameterError, match=r"'selector' parameter of EEGradStrategy "
                                                    r"must be a rule whose outlook B a round "
                                                    r"supplies \(it tells rounds_left\); this "
                                                    r"one reads 'budget_left', 'costs'"):  # fmt: skip
        _strategy(selector=BudgetThompson(population=K))
    # ProgressThompson reads the rounds left where there are some: a total budget's run goes on
    # without them (each round's noise charged in full)
    EEGradStrategy(total_budget=100.0, cost_metric="cost", selector=ProgressThompson())
    # a rule that reads the budget left or the rounds left, whichever is told (goes_without),
    # runs under either budget
    from eegrad.bench.methods import BudgetSchedule

    for budget in ({"budget": 40.0, "c_min": 1.5}, {"total_budget": 100.0, "cost_metric": "c"}):
        EEGradStrategy(**budget, selector=BudgetSchedule([1, 2, 3, 4]))


def test_fedsgd_with_fixed_n_equals_a_plain_numpy_loop():
    n, rounds = 3, 6
    grid = LocalGrid(_app(noise=False), K, seed=5)
    strategy = _strategy(selector=FixedArm(n))
    res = _start(strategy, grid, rounds)
    # The plain loop: the same node sampling stream, each client's batch from its device model,
    # FedAvg's weights (samples), w ← w − Σ p_i · lr ∇f_i(w).
    sampler = as_generator(3).spawn(2)[1]
    nodes = sorted(grid.node_ids)
    share = (40.0 - 0.5 * (n - 1)) / n
    w = np.zeros(D)
    for _ in range(rounds):
        pick = sorted(sampler.choice(K, n, replace=False))
        pids = [grid._partition[nodes[i]] for i in pick]
        b = np.array([DeviceCost(1.0, 2.0 + p % 3).samples(share) for p in pids], float)
        u = np.array([LR * (w - MU[p]) for p in pids])
        w = w - (b / b.sum()) @ u
    np.testing.assert_allclose(res.arrays["w"].numpy(), w, rtol=1e-12)
    rec = strategy.records[-1]
    assert rec["arm"] == n
    assert rec["clients_replied"] == n
    assert rec["cost"] == 40.0 * rounds
    assert rec["budget_used"] <= 40.0


def test_t_rounds_steps_every_T_rounds(tmp_path):
    strategy = _strategy(selector=FixedArm(2), steps="t-rounds", T=3, csv_path=tmp_path / "r.csv")
    _start(strategy, LocalGrid(_app(), K), 7)
    steps = [r["step"] for r in strategy.records]
    assert steps == ["", "", 1, "", "", 2, ""]
    with open(tmp_path / "r.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 7
    assert rows[2]["step"] == "1"
    assert float(rows[-1]["cost"]) == 7 * 40.0
    # Appended a line a round, the file is what writing all the records at once gives.
    from eegrad.flower.strategy import RECORD_COLUMNS
    from eegrad.results import write_table

    write_table(tmp_path / "whole.csv", strategy.records, RECORD_COLUMNS)
    assert (tmp_path / "r.csv").read_bytes() == (tmp_path / "whole.csv").read_bytes()


def test_failed_clients_are_dropped_and_recorded():
    def flaky(pid, arrays):
        if pid in (0, 1, 2, 3):
            raise RuntimeError("device lost")

    grid = LocalGrid(_app(bad=flaky), K, seed=1, fail=lambda pid, msg: pid == 4)  # 4 times out
    strategy = _strategy(selector=FixedArm(K))
    _start(strategy, grid, 2)
    rec = strategy.records[0]
    failed = {grid._partition[int(f)] for f in rec["failed_nodes"].split()}
    assert failed == {0, 1, 2, 3, 4}
    assert rec["clients_replied"] == K - 5
    assert rec["step"] == 1


def test_a_round_where_every_client_fails_is_lost_not_averaged():
    grid = LocalGrid(_app(), K, fail=lambda pid, msg: int(msg.content["config"]["server-round"])
                     == 2)  # fmt: skip
    strategy = _strategy(selector=FixedArm(2))
    _start(strategy, grid, 3)
    rec = strategy.records[1]
    assert rec["clients_replied"] == 0
    assert rec["step"] == ""
    assert [r["step"] for r in strategy.records] == [1, "", 2]


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        (lambda pid, a: [a[0] * np.nan] if pid == 2 else None, NonFiniteGradientError,
         r"node \d+ at server round 1 contains NaN"),
    ],
)
def test_bad_updates_raise_naming_node_and_round(bad, error, match):
    grid = LocalGrid(_app(bad=bad), K)
    with pytest.raises(error, match=match):
        _start(_strategy(selector=FixedArm(K)), grid, 1)


def test_update_of_the_wrong_shape_raises_naming_node_and_round():
    from flwr.app import Message, MetricRecord, RecordDict

    app = ClientApp()

    @app.train()
    def train(msg, context):
        rec = {"arrays": ArrayRecord({"w": Array(np.zeros(D + 1))}),
               "metrics": MetricRecord({"num-examples": 3})}  # fmt: skip
        return Message(RecordDict(rec), reply_to=msg)

    with pytest.raises(ClientUpdateError,
                       match=r"node \d+ at server round 1 has array 'w' of shape \(5,\)"):  # fmt: skip
        _start(_strategy(selector=FixedArm(2)), LocalGrid(app, K), 1)


def test_update_of_another_dtype_raises_naming_node_and_round():
    from flwr.app import Message, MetricRecord, RecordDict

    app = ClientApp()

    @app.train()
    def train(msg, context):
        rec = {"arrays": ArrayRecord({"w": Array(np.zeros(D, dtype=np.float32))}),
               "metrics": MetricRecord({"num-examples": 3})}  # fmt: skip
        return Message(RecordDict(rec), reply_to=msg)

    with pytest.raises(ClientUpdateError,
                       match=r"node \d+ at server round 1 has array 'w' of dtype float32, "
                             r"expected float64"):  # fmt: skip
        _start(_strategy(selector=FixedArm(2)), LocalGrid(app, K), 1)


@pytest.mark.parametrize("selector", [FixedArm(3), None])
def test_a_float32_model_is_aggregated_in_float32(selector):
    """The model's arrays keep their dtype through the clients and the server's one pass; the
    step equals the float64 computation to float32 rounding (1e-6 of the model's scale)."""
    told = []
    original = PullAccumulator.add

    def record(self, part, weight, **kw):
        arrays = list(part)
        told.append((self._ref[0].astype(np.float64) - arrays[0].astype(np.float64), weight))
        return original(self, arrays, weight, **kw)

    strategy = _strategy(selector=selector)
    start = ArrayRecord({"w": Array(np.linspace(-1, 1, D).astype(np.float32))})
    import unittest.mock

    with unittest.mock.patch.object(PullAccumulator, "add", record):
        res = strategy.start(grid=LocalGrid(_app(), K, seed=4), initial_arrays=start, num_rounds=1)
    w = res.arrays["w"].numpy()
    assert w.dtype == np.float32
    u = np.array([t[0] for t in told])
    p = np.array([t[1] for t in told])
    expected = np.linspace(-1, 1, D).astype(np.float32) - (p / p.sum()) @ u
    np.testing.assert_allclose(w, expected, rtol=0, atol=1e-6)


def test_clients_that_spend_a_share_and_report_no_local_steps_are_said_once(caplog):
    """Under B a round the default rule reads the clients' local steps; where the replies lack
    them, the log says once what it assumes (FedSGD's model); replies that report them (as
    budgeted_train's do) are not remarked on."""
    import logging

    from flwr.app import Message, MetricRecord, RecordDict

    said = {}
    for reports in (True, False):
        app = ClientApp()
        base = budgeted_train(lambda arrays, b, context, config: [arrays[0] - 1.0],
                              DeviceCost(1.0, 2.0), lr=LR)  # fmt: skip

        def train(msg, context, base=base, reports=reports):
            reply = base(msg, context)
            if reports:
                return reply
            metrics = dict(reply.content["metrics"])
            metrics.pop("local-steps")
            rec = {"arrays": reply.content["arrays"], "metrics": MetricRecord(metrics)}
            return Message(RecordDict(rec), reply_to=msg)

        app.train()(train)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="flwr"):
            _start(_strategy(), LocalGrid(app, K, seed=1), 4)
        said[reports] = caplog.text.count("do not all report 'local-steps'")
    assert said == {True: 0, False: 1}


def test_an_array_is_viewed_in_place_as_numpy_loads_it_whatever_its_header():
    """The server's view of a reply's array equals ``Array.numpy()`` for headers of both
    ``.npy`` versions, Fortran order, several dtypes and shapes sharing one header length (the
    parsed headers are cached by their bytes); the view shares the message's bytes."""
    import io

    from flwr.common.constant import SType

    from eegrad.flower.model_arrays import array_view

    rng = np.random.default_rng(0)
    cases = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 3)),
             np.asfortranarray(rng.standard_normal((3, 5))), np.arange(7, dtype=np.int64),
             np.array(2.5), rng.standard_normal((2, 3)).astype(">f4")]  # fmt: skip
    for x in cases:
        a = Array(x)
        view = array_view(a)
        np.testing.assert_array_equal(view, a.numpy())
        assert view.dtype == a.numpy().dtype
        assert view.shape == x.shape
        assert np.shares_memory(view, np.frombuffer(a.data, dtype=np.uint8))
    # a version-2 header (4-byte length), written by hand as NumPy writes one past 65535 bytes
    x = rng.standard_normal(5)
    buf = io.BytesIO()
    np.lib.format.write_array_header_2_0(buf, np.lib.format.header_data_from_array_1_0(x))
    buf.write(x.tobytes())
    v2 = Array(dtype="float64", shape=(5,), stype=SType.NUMPY, data=buf.getvalue())
    np.testing.assert_array_equal(array_view(v2), x)


def test_an_array_is_serialised_byte_for_byte_as_flower_serialises_it():
    """array_of(x) holds the bytes Array(x) holds (np.save's), its dtype and shape, for
    numbers and bools of every kind and byte order, 0-d, empty and Fortran-ordered arrays (the
    last through Array itself), and reads back as x."""
    from eegrad.flower.model_arrays import array_of, array_view

    rng = np.random.default_rng(1)
    cases = [rng.standard_normal((3, 4)).astype(np.float32), np.arange(5), np.array(2.5),
             np.zeros((0, 3)), rng.standard_normal(7).astype(">f4"), np.array([True, False]),
             rng.standard_normal((2, 2)).astype(np.complex64), np.arange(6, dtype=np.uint16),
             np.asfortranarray(rng.standard_normal((3, 2))), np.arange(10.0)[::2]]  # fmt: skip
    for x in cases:
        ours, flowers = array_of(x), Array(x)
        assert ours.data == flowers.data
        assert (ours.dtype, ours.shape, ours.stype) == (flowers.dtype, flowers.shape,
                                                        flowers.stype)  # fmt: skip
        np.testing.assert_array_equal(array_view(ours), x)


def test_a_fixed_per_round_server_cost_is_spent_every_round():
    """D(1) > 0 (broadcasting the model, say): N = max{n : B > n c_min + D(n)}, each client is
    sent (B − D(n))/n, and the records' budget_used counts D(n) whatever n is."""
    from eegrad.costs import LinearAggregation

    agg = LinearAggregation(b=0.5, fixed=10.0)
    sent = []

    def gradient(arrays, b, context, config):
        sent.append((int(config["eegrad-n"]), float(config["budget-share"])))
        return [arrays[0] * 0.0]

    app = ClientApp()
    app.train()(budgeted_train(gradient, DeviceCost(0.0, 1.0)))
    strategy = _strategy(aggregation=agg, selector=FixedArm(3))
    _start(strategy, LocalGrid(app, K), 2)
    # 40 > 1.5 n + 10 + 0.5 (n − 1) = 2 n + 9.5 holds to n = 15, capped at the K = 8 nodes
    assert strategy.max_arms == 15
    assert strategy.N == K
    assert sent == [(3, (40.0 - 11.0) / 3)] * 6
    rec = strategy.records[0]
    # D(3) = 11 and the three clients' costs, o + b/s with b = ⌊29/3⌋ = 9 samples each
    assert rec["budget_used"] == pytest.approx(11.0 + 3 * 9.0)
    with pytest.raises(InvalidParameterError, match=r"'budget'.*c_min \+ D\(1\) = 11.5"):
        _strategy(aggregation=agg, budget=11.0)


def test_a_thousand_nodes_and_up_to_a_hundred_clients_a_round():
    """K = 1000 nodes on the in-process grid, N = 100 arms: with no strategy of yours to anchor
    on, the default rule's first rounds are the arms' middle (50 clients), then within a factor
    2 of it it settles where the client-sampling model puts the best n. Clients:
    u_i = w − μ_i + 3ε/√b, μ_i ~ N(0, I₄), devices o = 5, s = 1, D(n) = 0.5 (n − 1), B = 650,
    so v_n = S²(1/n − 1/K) + τ²/(n b_n), τ² = 36, b_n = ⌊(B − D(n))/n − o⌋: n* = 52. The
    chosen arms' mean v over the last 30 of 60 rounds is within 10% of v* (measured: 0.3%;
    a rule stuck one arm-step of 10 clients away would exceed 2%)."""
    k, d = 1000, 4
    mu = np.random.default_rng(1).standard_normal((k, d))

    def gradient(arrays, b, context, config):
        pid = int(context.node_config["partition-id"])
        rng = np.random.default_rng([pid, int(config["server-round"])])
        return [arrays[0] - mu[pid] + 3.0 * rng.standard_normal(d) / np.sqrt(b)]

    app = ClientApp()
    app.train()(budgeted_train(gradient, DeviceCost(5.0, 1.0), lr=1.0))
    strategy = EEGradStrategy(650.0, 6.0, aggregation=lambda n: 0.5 * (n - 1.0), rng=0)
    strategy.start(grid=LocalGrid(app, k, seed=0),
                   initial_arrays=ArrayRecord({"w": Array(np.zeros(d))}), num_rounds=60)  # fmt: skip
    arms = np.array([r["arm"] for r in strategy.records])
    assert strategy.N == 100
    assert arms[:3].tolist() == [50, 50, 50]
    assert 25 <= arms.min()
    assert arms.max() <= 100
    n = np.arange(1, 101)
    b = np.floor((650.0 - 0.5 * (n - 1)) / n - 5.0 + 1e-9)
    v = np.var(mu, axis=0, ddof=1).sum() * (1 / n - 1 / k) + 36.0 / (n * b)
    assert int(n[np.argmin(v)]) == 52
    assert (v[arms[-30:] - 1] / v.min()).mean() < 1.1


def test_budget_errors_are_those_of_arms_from_costs():
    with pytest.raises(InvalidParameterError, match="'budget' parameter of EEGradStrategy"):
        _strategy(budget=1.0)
    with pytest.raises(InvalidParameterError, match="'steps'"):
        _strategy(steps="sometimes")
    with pytest.raises(InvalidParameterError, match="'T'.*steps='t-rounds'"):
        _strategy(steps="t-rounds")


def test_node_ids_are_unsigned_64_bit():
    grid = LocalGrid(_app(), 4, seed=0)
    assert all(2**63 <= i < 2**64 for i in grid.get_node_ids())


def test_wall_clock_client_spends_its_time_share():
    def gradient(arrays, b, context, config):
        return [np.ones_like(arrays[0]) * b]

    app = ClientApp()
    app.train()(budgeted_train(gradient, WallClock(seconds_per_unit=0.002, chunk=4), lr=1.0))
    grid = LocalGrid(app, 2)
    strategy = _strategy(budget=20.0, c_min=1.0, selector=FixedArm(1))
    res = _start(strategy, grid, 1)
    # Each chunk's gradient is 4·1, so the averaged gradient is 4 whatever the samples.
    np.testing.assert_allclose(res.arrays["w"].numpy(), -4.0)
    assert strategy.records[0]["budget_used"] >= 20.0 - 1e-9  # share 20 units = 0.04 s, spent


def test_client_without_share_fails_clearly():
    from flwr.app import Message, MessageType, RecordDict

    grid = LocalGrid(_app(), 2)
    content = RecordDict({"arrays": ArrayRecord({"w": Array(np.zeros(D))}),
                          "config": ConfigRecord({"server-round": 1})})  # fmt: skip
    msg = Message(content, grid.node_ids[0], MessageType.TRAIN)
    (reply,) = grid.send_and_receive([msg])
    assert reply.has_error()
    assert "no 'budget-share'" in reply.error.reason


def test_import_eegrad_does_not_import_flower():
    code = "import sys, eegrad; assert 'flwr' not in sys.modules, 'flwr imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_flower_example_quick(tmp_path, monkeypatch):
    from flwr.serverapp.strategy import FedAvg

    from eegrad.cli import main as cli

    calls = []
    original = FedAvg.aggregate_train

    def counted(self, server_round, replies):
        calls.append(server_round)
        return original(self, server_round, replies)

    monkeypatch.setattr(FedAvg, "aggregate_train", counted)
    assert cli(["example", "flower", "--quick", "--out", str(tmp_path), "--seeds", "1",
                "--rounds", "6"]) == 0  # fmt: skip
    with open(tmp_path / "flower.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["method", "seed", "step", "cost", "objective_gap", "test_accuracy",
                             "split"]  # fmt: skip
    methods = {r["method"] for r in rows}
    assert {"default", "t-rounds", "eegrad", "fedavg-1", "fedavg-20"} <= methods
    assert len(calls) == 5 * 6  # the fedavg-<n> rows come from Flower's FedAvg class
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert meta["versions"]["flwr"] == importlib.metadata.version("flwr")
    assert (tmp_path / "flower.png").stat().st_size > 0


def test_flower_example_runs_a_rule_of_ones_own_on_the_defaults_streams():
    # run(..., selector=...) builds the default method's rule from (K, the arms' spends): the
    # default's own rule built so gives the default's rows to the last digit (the same
    # streams), and another rule other rows.
    from eegrad import FixedArm
    from eegrad.examples import flower
    from eegrad.examples.flower_setting import K_CLIENTS, share
    from eegrad.flower.strategy import default_rule

    seen = []

    def own_default(population, spend):
        seen.append((population, spend))
        return default_rule(population, spend)

    kw = {"dataset": "digits", "split": "dirichlet-0.3", "rounds": 6}
    plain = flower.run(["default"], [0], **kw)
    built = flower.run(["default"], [0], **kw, selector=own_default)
    fixed = flower.run(["default"], [0], **kw, selector=lambda population, spend: FixedArm(3))
    assert len(seen) == 1
    population, spend = seen[0]
    assert population == K_CLIENTS
    np.testing.assert_array_equal(spend, share(np.arange(1, spend.size + 1)))
    assert built == plain
    assert [r["objective_gap"] for r in fixed] != [r["objective_gap"] for r in plain]


def _told_updates(monkeypatch):
    """Capture, per round, the updates u_i = w − w_i and weights the server folds."""
    told = []
    original = PullAccumulator.add

    def record(self, part, weight, **kw):
        arrays = list(part)
        if not told or told[-1][0] is not self:
            told.append((self, [], []))
        told[-1][1].append(self._ref[0] - arrays[0])
        told[-1][2].append(weight)
        return original(self, arrays, weight, **kw)

    monkeypatch.setattr(PullAccumulator, "add", record)
    return told


def test_exploration_steps_are_damped_to_the_best_arms_noise(monkeypatch):
    """damp_exploration: round t steps by ρ_t = √(v̂*/v̂_{n_t}), v̂ the rule's fitted variances
    after the round is told; replayed on the same updates and stream, the strategy's ρ_t and
    its final model w_0 − Σ_t ρ_t ū_t agree to rounding, ρ_t = 1 on the rounds whose arm is the
    fitted best, and some rounds (the warm-up's small n) are damped."""
    told = _told_updates(monkeypatch)
    probe = _strategy()
    spend = probe.spend(min(probe.max_arms, K))
    strategy = _strategy(damp_exploration=True,
                         selector=SpreadThompson(population=K, spend=spend, noise_order=2))
    res = _start(strategy, LocalGrid(_app(), K, seed=2), 25)
    replay = GradientEstimator(SpreadThompson(population=K, spend=strategy.spend(strategy.N),
                                              noise_order=2),
                               strategy.N, T=1, dim=D, rng=as_generator(3).spawn(2)[0])  # fmt: skip
    w = np.zeros(D)
    rhos = []
    for r, (_, parts, weights) in enumerate(told, start=1):
        n = replay.ask()
        replay.tell_parts(np.array(parts), np.array(weights))
        v = replay.selector.predicted()[0]
        rho = min(1.0, float(np.sqrt(v.min() / v[n - 1])))
        assert strategy.state.metrics[r]["step_scale"] == pytest.approx(rho, rel=1e-12)
        if v[n - 1] == v.min():
            assert rho == 1.0
        w = w - rho * replay.result()
        replay.next_iterate()
        rhos.append(rho)
    np.testing.assert_allclose(res.arrays["w"].numpy(), w, rtol=1e-10, atol=1e-12)
    assert min(rhos) < 0.9
    assert max(rhos) == 1.0


def test_by_default_every_round_steps_by_the_server_lr(monkeypatch):
    # The default is undamped (the scorecard measured damping's cost in every setting).
    told = _told_updates(monkeypatch)
    strategy = _strategy(server_lr=0.5)
    res = _start(strategy, LocalGrid(_app(), K, seed=2), 8)
    assert all(m["step_scale"] == 1.0 for m in strategy.state.metrics.values())
    w = np.zeros(D)
    for _, parts, weights in told:
        p = np.array(weights) / np.sum(weights)
        w = w - 0.5 * p @ np.array(parts)
    np.testing.assert_allclose(res.arrays["w"].numpy(), w, rtol=1e-10, atol=1e-12)


def test_a_rule_that_learns_the_signal_is_told_each_rounds_mean_norm(monkeypatch):
    # ProgressThompson (it reads "signal") is told ‖ū‖² of every round's weighted mean update
    # in the round's record, beside the round's spread, and its inner product with the last
    # round's, by the driver the strategy holds.
    told = _told_updates(monkeypatch)
    signals = []
    original = ProgressThompson.tell_round

    def record(self, evidence):
        assert evidence.pair_sums is not None  # the spread in the same record
        signals.append((int(evidence.arms[0]), float(evidence.mean_norm2[0]),
                        evidence.persistence))  # fmt: skip
        return original(self, evidence)

    monkeypatch.setattr(ProgressThompson, "tell_round", record)
    strategy = _strategy(selector=ProgressThompson(population=K, noise_order=2))
    _start(strategy, LocalGrid(_app(), K, seed=2), 6)
    assert len(signals) == len(told) == 6
    last = None
    for (arm, norm2, persistence), (_, parts, weights), row in zip(signals, told,
                                                                   strategy.records,
                                                                   strict=True):  # fmt: skip
        mean = np.average(np.array(parts), axis=0, weights=weights)
        assert arm == row["arm"] - 1
        assert norm2 == pytest.approx(float(mean @ mean), rel=1e-10)
        # ...and the persistence ū_t·ū_{t−1}, from the second round on.
        if last is None:
            assert persistence is None
        else:
            assert float(persistence[0]) == pytest.approx(float(mean @ last), rel=1e-10)
        last = mean


def _steps_app(steps_of=None, batch_size=2):
    """_app's clients with budgeted_train's mini-batches of ``batch_size`` (a larger share buys
    more local steps), or replies whose local-steps metric is ``steps_of(pid)`` (None: none)."""
    from flwr.app import Message, MetricRecord, RecordDict

    if steps_of is None:
        def gradient(arrays, b, context, config):
            return [arrays[0] - MU[int(context.node_config["partition-id"])]]

        app = ClientApp()
        app.train()(budgeted_train(gradient, lambda ctx, cfg: DeviceCost(1.0, 2.0 + int(
            ctx.node_config["partition-id"]) % 3), lr=LR, batch_size=batch_size))  # fmt: skip
        return app
    app = ClientApp()

    @app.train()
    def train(msg, context):
        metrics = {"num-examples": 3, "cost": 1.0}  # a per-round client reports its spend
        steps = steps_of(int(context.node_config["partition-id"]))
        if steps is not None:
            metrics["local-steps"] = steps
        rec = {"arrays": ArrayRecord({"w": Array(np.ones(D))}), "metrics": MetricRecord(metrics)}
        return Message(RecordDict(rec), reply_to=msg)

    return app


class _Told(list):
    rounds: list


def _spy_local_steps(monkeypatch):
    told = _Told()
    original = ProgressModel.note_local_steps  # what tell_round does with a record's steps
    original_add = ProgressModel.add  # a round's spread, after its steps
    added = []

    def count(self, *args):
        added.append(self)
        return original_add(self, *args)

    def record(self, arms, steps, owner):
        told.append((int(arms[0]), float(steps[0])))
        # the round told: the rounds this model has taken, plus one
        rounds.append(sum(model is self for model in added) + 1)
        return original(self, arms, steps, owner)

    rounds = []
    told.rounds = rounds

    monkeypatch.setattr(ProgressModel, "note_local_steps", record)
    monkeypatch.setattr(ProgressModel, "add", count)
    return told


def test_the_clients_reported_local_steps_reach_the_rule(monkeypatch):
    # Clients in mini-batches of 2 report ⌈b_i/2⌉ local steps, b_i = ⌊(share − 1)·speed_i⌋ on
    # their device; the rule is told the round's mean, for the arm that ran, every round.
    told = _spy_local_steps(monkeypatch)
    strategy = _strategy(selector=ProgressThompson(population=K, noise_order=2))
    _start(strategy, LocalGrid(_steps_app(), K, seed=2), 6)
    assert len(told) == 6
    for (arm, steps), row in zip(told, strategy.records, strict=True):
        n = row["arm"]
        assert arm == n - 1
        share = (40.0 - 0.5 * (n - 1)) / n
        each = [np.ceil(DeviceCost(1.0, speed).samples(share) / 2) for speed in (2.0, 3.0, 4.0)]
        assert min(each) <= steps <= max(each)
    # FedSGD clients take one step whatever their share: the prior stays flat.
    assert strategy.state.rule.selector.model.steps_prior()[0, 1] > 0
    told.clear()
    flat = _strategy(selector=ProgressThompson(population=K, noise_order=2))
    _start(flat, LocalGrid(_app(), K, seed=2), 6)
    assert [s for _, s in told] == [1.0] * 6
    np.testing.assert_array_equal(flat.state.rule.selector.model.steps_prior(), 0.0)


def test_local_steps_of_every_reply_or_none_are_told(monkeypatch):
    # A round where one reply lacks local-steps tells the rule none (its prior is kept): the
    # documented fallback for clients that do not report them.
    told = _spy_local_steps(monkeypatch)
    strategy = _strategy(selector=ProgressThompson(population=K, noise_order=2))
    _start(strategy, LocalGrid(_steps_app(lambda pid: None if pid == 0 else 3), K), 4)
    all_asked = [r["server_round"] for r in strategy.records if r["arm"] == K]
    assert 1 in all_asked  # the warm-up's first round asks every node, node 0's among them
    assert not set(all_asked) & set(told.rounds)
    assert told
    assert all(steps == 3.0 for _, steps in told)


@pytest.mark.parametrize("bad", [float("nan"), 0, -2.0, float("inf")])
def test_a_bad_local_steps_report_raises_naming_node_and_round(bad):
    app = _steps_app(lambda pid: bad if pid == 1 else 2)
    with pytest.raises(ClientUpdateError, match=r"node \d+ at server round 1 reports "
                                                r"local-steps = .*finite and > 0"):  # fmt: skip
        _start(_strategy(selector=FixedArm(K)), LocalGrid(app, K), 1)


def test_the_default_rule_and_damping_follow_the_privacy_mode():
    # Without privacy: ProgressThompson, undamped; with a private release: SpreadThompson told
    # the release's noise, damped; an explicit damp_exploration is kept either way.
    plain = _strategy()
    _start(plain, LocalGrid(_app(), K, seed=2), 2)
    assert isinstance(plain.selector, ProgressThompson)
    assert plain.damp_exploration is False
    private = _strategy(privacy=CentralDP(2.0, 1.0, 1e-5))
    assert private.damp_exploration is True
    _start(private, LocalGrid(_app(), K, seed=2), 2)
    assert type(private.selector) is SpreadThompson
    assert private.selector.release_noise is not None
    assert _strategy(privacy=CentralDP(2.0, 1.0, 1e-5), damp_exploration=False).damp_exploration \
        is False  # fmt: skip
    rule = default_rule(K, np.ones(5), release_noise=np.ones(5))
    assert type(rule) is SpreadThompson
    assert rule.noise_order == 2


def test_a_progress_rule_damps_by_its_own_step_scale(monkeypatch):
    # With damp_exploration=True, ProgressThompson's step_scale (the scale of most expected
    # decrease, after the round is told) is each round's step_scale.
    scales = []
    original = ProgressThompson.step_scale

    def record(self, arms):
        out = original(self, arms)
        scales.append(float(out[0]))
        return out

    monkeypatch.setattr(ProgressThompson, "step_scale", record)
    strategy = _strategy(damp_exploration=True)
    _start(strategy, LocalGrid(_app(), K, seed=2), 12)
    assert [m["step_scale"] for m in strategy.state.metrics.values()] == scales
    assert all(0.0 <= r <= 1.0 for r in scales)


def test_fixed_arm_is_never_damped():
    strategy = _strategy(selector=FixedArm(3))
    _start(strategy, LocalGrid(_app(), K, seed=2), 4)
    assert [m["step_scale"] for m in strategy.state.metrics.values()] == [1.0] * 4


def test_damp_exploration_must_be_a_bool():
    from eegrad import InvalidParameterTypeError

    with pytest.raises(InvalidParameterTypeError, match="'damp_exploration' parameter of "
                       "EEGradStrategy must be a bool or None. Got 'yes'"):  # fmt: skip
        _strategy(damp_exploration="yes")


def test_turning_on_evaluation_changes_no_training():
    # Evaluation samples its nodes from its own stream: the same run with and without
    # fraction_evaluate trains the same clients (equal records and final models).
    runs = []
    for fraction in (0.0, 0.5):
        strategy = _strategy(fraction_evaluate=fraction)
        res = _start(strategy, LocalGrid(_app(), K, seed=2), 8)
        runs.append((strategy.records, res.arrays["w"].numpy()))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_clients_asked_records_the_nodes_actually_asked(monkeypatch):
    # Nodes that leave after the first round: the rule is asked for at most the nodes
    # connected, so the round's arm is the clients it asked.
    grid = LocalGrid(_app(), K, seed=2)
    strategy = _strategy(selector=FixedArm(6))
    ids = list(grid.node_ids)
    calls = {"n": 0}

    def nodes():
        calls["n"] += 1
        return ids if calls["n"] <= 1 else ids[:4]

    monkeypatch.setattr(grid, "get_node_ids", nodes)
    _start(strategy, grid, 3)
    assert [r["clients_asked"] for r in strategy.records] == [6, 4, 4]
    assert [r["arm"] for r in strategy.records] == [6, 4, 4]


def test_budgeted_clients_weight_their_replies_under_the_strategys_key():
    # A strategy weighting by another metric ("samples") and clients told the same key: the
    # replies carry their weight there and the run goes as with the default key (equal
    # records and models); an empty key is refused.
    def app(**kw):
        def gradient(arrays, b, context, config):
            pid = int(context.node_config["partition-id"])
            rng = np.random.default_rng([pid, int(config["server-round"])])
            return [arrays[0] - MU[pid] + rng.standard_normal(D) / np.sqrt(b)]

        a = ClientApp()
        a.train()(budgeted_train(gradient, DeviceCost(1.0, 2.0), lr=LR, **kw))
        return a

    runs = []
    for key in ("num-examples", "samples"):
        strategy = _strategy(weighted_by_key=key)
        res = _start(strategy, LocalGrid(app(weighted_by_key=key), K, seed=2), 5)
        runs.append((strategy.records, res.arrays["w"].numpy()))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    with pytest.raises(InvalidParameterError, match="'weighted_by_key'"):
        budgeted_train(lambda *a: None, DeviceCost(1.0, 2.0), weighted_by_key="")


def test_start_twice_is_two_fresh_runs(tmp_path):
    # A second start() on the same strategy is a new run from the state the constructor made:
    # the records, the CSV (rewritten, not appended to) and the model equal the first run's.
    strategy = _strategy(csv_path=tmp_path / "run.csv")
    first = _start(strategy, LocalGrid(_app(), K, seed=2), 6)
    records, text = list(strategy.records), (tmp_path / "run.csv").read_text()
    second = _start(strategy, LocalGrid(_app(), K, seed=2), 6)
    assert strategy.records == records
    assert len(strategy.records) == 6
    assert (tmp_path / "run.csv").read_text() == text
    np.testing.assert_array_equal(first.arrays["w"].numpy(), second.arrays["w"].numpy())


def test_the_round_mean_is_copied_for_the_rule_only_where_it_keeps_statistics(monkeypatch):
    # A rule that keeps no arm statistics (FixedArm, FedAvg's n) is told each round without an
    # O(d) float64 copy of its mean; one that keeps them (EEGrad, T rounds a step) gets the mean.
    from eegrad import EEGrad
    from eegrad.selectors.base import Selector

    told = []
    original = Selector.tell_round

    def spy(self, evidence):
        told.append((type(self).__name__, evidence.statistic))
        return original(self, evidence)

    monkeypatch.setattr(Selector, "tell_round", spy)
    _start(_strategy(selector=FixedArm(3)), LocalGrid(_app(), K, seed=2), 3)
    assert told == [("FixedArm", "summary")] * 3
    told.clear()
    _start(_strategy(selector=EEGrad(beta=4.0, P=1.0), steps="t-rounds", T=2 * K),
           LocalGrid(_app(), K, seed=2), 4)  # fmt: skip
    assert told == [("EEGrad", "mean")] * 4
