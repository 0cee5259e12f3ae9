"""EEGradStrategy under Flower's SecAgg+ workflow, end to end in process (LocalGrid)."""

import csv
import logging

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
from flwr.client.mod import secaggplus_mod
from flwr.clientapp import ClientApp
from flwr.common import FitIns, ndarrays_to_parameters
from flwr.compat.common import recorddict_compat as compat

from eegrad import FixedArm, InvalidParameterError, ProgressThompson
from eegrad.flower import (
    ClientUpdateError,
    DeviceCost,
    EEGradStrategy,
    LocalGrid,
    budgeted_train,
    secaggplus_train,
    start_secaggplus,
    with_spread_sums,
)
from eegrad.flower.secagg import CLIP_KEY, MAX_WEIGHT_KEY, NORM2_BOUND_KEY

K, D, LR = 8, 4, 0.5
MU = np.random.default_rng(1).standard_normal((K, D))
SECAGG = {"num_shares": 1.0, "reconstruction_threshold": 0.6, "norm2_bound": 50.0,
          "max_weight": 100.0, "clipping_range": 8.0}  # fmt: skip


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _gradient(arrays, b, context, config):
    pid = int(context.node_config["partition-id"])
    rng = np.random.default_rng([pid, int(config["server-round"])])
    return [arrays[0] - MU[pid] + rng.standard_normal(D) / np.sqrt(b)]


def _train():
    return budgeted_train(_gradient, lambda ctx, cfg: DeviceCost(
        1.0, 2.0 + int(ctx.node_config["partition-id"]) % 3), lr=LR)  # fmt: skip


def _secagg_app():
    app = ClientApp(mods=[secaggplus_mod])
    app.train()(secaggplus_train(_train()))
    return app


def _own_training_app():
    """Clients that train their own way (two steps on a batch of their own), as a total budget
    has them: their reply's num-examples and cost (samples × 0.01) in its metrics."""
    def train(msg, context):
        pid = int(context.node_config["partition-id"])
        w = msg.content["arrays"][next(iter(msg.content["arrays"].keys()))].numpy()
        b = 10 + 5 * pid
        for _ in range(2):
            w = w - LR * _gradient([w], b, context, msg.content["config"])[0]
        return Message(RecordDict({"arrays": ArrayRecord({"0": Array(w)}), "metrics": MetricRecord(
            {"num-examples": b, "cost": 0.01 * b})}), reply_to=msg)  # fmt: skip

    app = ClientApp(mods=[secaggplus_mod])
    app.train()(secaggplus_train(train))
    return app


def _sums_app():
    app = ClientApp()
    app.train()(with_spread_sums(_train()))
    return app


_ARGS = {"budget": 40.0, "c_min": 1.5, "aggregation": lambda n: 0.5 * (n - 1.0), "rng": 3}


def _strategy(**kw):
    return EEGradStrategy(**(_ARGS | {"secure_sums": True} | kw))


class _AtLeastTwo(EEGradStrategy):
    """Runs started as Flower's start does, with SecAgg+'s floor of two clients a round."""

    def begin_run(self, *args, **kw):
        return super().begin_run(*args, **(kw | {"min_clients": 2}))


def _model():
    return ArrayRecord({"w": Array(np.zeros(D))})


def test_secaggplus_makes_the_choices_of_the_plain_sums_mode():
    """The same federation, once with the replies summed in plaintext (secure_sums=True) and
    once under SecAgg+: the same arms every round and the same model to within the
    quantization's error (a few of its SDs, √v_q per coordinate and round, summed over the
    rounds)."""
    rounds = 10
    np.random.seed(0)  # noqa: NPY002 - Flower's stochastic rounding draws from NumPy's global stream
    # a rule whose n varies (the default keeps your n where the clients' loss cannot be read)
    plain = _AtLeastTwo(**(_ARGS | {"secure_sums": True,  # SecAgg+'s floor on both sides
                                    "selector": ProgressThompson(noise_order=2)}))
    ref = plain.start(grid=LocalGrid(_sums_app(), K, seed=2), initial_arrays=_model(),
                      num_rounds=rounds)  # fmt: skip
    ours = _strategy(selector=ProgressThompson(noise_order=2))
    res = start_secaggplus(ours, LocalGrid(_secagg_app(), K, seed=2), _model(), rounds, **SECAGG)
    assert [r["arm"] for r in ours.records] == [r["arm"] for r in plain.records]
    assert len({r["arm"] for r in ours.records}) > 1
    assert all(r["secure_aggregation"] == "completed" for r in ours.records)
    assert [r["clients_replied"] for r in ours.records] == [r["arm"] for r in ours.records]
    # v_q = n δ²/6 (ω_max/W)², δ = 2c/2²²: at most ~1e-5 per coordinate and round here
    np.testing.assert_allclose(res.arrays["w"].numpy(), ref.arrays["w"].numpy(), atol=1e-4)
    assert not np.allclose(res.arrays["w"].numpy(), 0.0)


def test_the_spread_from_secaggplus_is_unbiased_after_the_quantization_correction():
    """One round's sums under SecAgg+ against the plaintext sums of the same replies: the
    weighted spread agrees to within its quantization noise once the bias W d v_q is added
    back (and the correction is what the notes state)."""
    from eegrad.flower.secagg import SecAggFold

    keys, model = ["w"], [np.zeros(3)]
    means = [np.array([0.5, -0.2, 0.1]), np.array([8.0 * 0.3 / 50.0])]
    fold = SecAggFold(1, keys, model, means=means, weights=[10.0, 20.0, 30.0],
                      node_costs={1: 1.0, 2: 1.0, 3: 1.0},
                      clip=8.0, norm2_bound=50.0, quantization_range=2**22, max_weight=40.0,
                      arrayrecord_key="arrays", weighted_by_key="num-examples")  # fmt: skip
    sums = fold.sums()
    W = 60.0
    delta = 16.0 / 2**22
    v_q = 3 * delta**2 / 6 * (40.0 / W) ** 2
    assert fold.quantization_variance() == pytest.approx(v_q)
    assert sums.weighted_squares == pytest.approx(W * 0.3 + W * 3 * v_q)
    assert sums.n == 3
    assert sums.total_weight == W
    assert sums.total_weight2 == 1400.0
    assert sums.inverse_weight_sum == pytest.approx(1 / 10 + 1 / 20 + 1 / 30)
    np.testing.assert_allclose(sums.weighted_sum[0], W * means[0])


def _drop_one_node_at_round_2():
    """A LocalGrid ``fail``: the first node asked for its masked vector at server round 2 sends
    none (it dropped out after the keys were shared); every other message is answered."""
    dropped = []

    def fail(pid, msg):
        cfg = msg.content.config_records.get("secaggplus_configs")
        if cfg is not None and cfg.get("stage") == "collect_masked_vectors" and \
                int(msg.content.config_records["fitins.config"]["server-round"]) == 2 \
                and not dropped:  # fmt: skip
            dropped.append(pid)
            return True
        return False

    return fail


def test_a_halted_round_is_lost_and_named_not_the_run(tmp_path):
    """A node that drops out after the keys are shared, with a threshold that needs every
    share: the workflow cannot unmask and halts. That round is recorded as halted, with every
    asked node failed, no step and no replies; the next rounds run."""
    app = _secagg_app()
    fail = _drop_one_node_at_round_2()

    s = _strategy(selector=FixedArm(3), csv_path=tmp_path / "rounds.csv")
    res = start_secaggplus(s, LocalGrid(app, K, seed=2, fail=fail), _model(), 4,
                           **(SECAGG | {"num_shares": 1.0, "reconstruction_threshold": 1.0}))
    outcome = [r["secure_aggregation"] for r in s.records]
    assert outcome == ["completed", "halted", "completed", "completed"]
    halted = s.records[1]
    assert halted["clients_replied"] == 0
    assert halted["step"] == ""
    assert len(halted["failed_nodes"].split()) == 3
    assert [r["server_round"] for r in s.records] == [1, 2, 3, 4]
    with open(tmp_path / "rounds.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["secure_aggregation"] for r in rows] == outcome
    assert np.all(np.isfinite(res.arrays["w"].numpy()))


def _fit_message(grid, bound=50.0):
    cfg = {"server-round": 1, "budget-share": 10.0, CLIP_KEY: 8.0, NORM2_BOUND_KEY: bound,
           MAX_WEIGHT_KEY: 100.0}  # fmt: skip
    content = compat.fitins_to_recorddict(FitIns(ndarrays_to_parameters([np.zeros(D)]), cfg),
                                          keep_input=True)  # fmt: skip
    return Message(content, dst_node_id=grid.node_ids[0], message_type="train")


@pytest.mark.parametrize(("scale", "bound", "match"), [
    (100.0, 1e9, r"coordinate of .* beyond the SecAgg\+ clipping range ±8"),
    (1.0, 1e-3, "squared norm .* beyond norm2_bound = 0.001"),
])  # fmt: skip
def test_a_reply_beyond_the_public_bounds_is_an_error_naming_the_node(scale, bound, match):
    grid = LocalGrid(ClientApp(), 1, seed=0)
    train = secaggplus_train(budgeted_train(
        lambda arrays, b, ctx, cfg: [np.full(D, -scale)], DeviceCost(0.0, 1.0), lr=1.0))  # fmt: skip
    node = grid.node_ids[0]
    with pytest.raises(InvalidParameterError, match=f"node {node} at server round 1"):
        train(_fit_message(grid, bound=bound), grid.contexts[node])
    with pytest.raises(InvalidParameterError, match=match):
        train(_fit_message(grid, bound=bound), grid.contexts[node])


def test_start_secaggplus_needs_the_sums_mode():
    with pytest.raises(InvalidParameterError, match="secure_sums=True"):
        start_secaggplus(_strategy(secure_sums=False), LocalGrid(_secagg_app(), K), _model(), 1,
                         **SECAGG)  # fmt: skip


def test_a_client_without_the_bounds_fails_clearly():
    grid = LocalGrid(ClientApp(), 1, seed=0)
    train = secaggplus_train(_train())
    content = compat.fitins_to_recorddict(FitIns(ndarrays_to_parameters([np.zeros(D)]),
                                                 {"server-round": 1}), keep_input=True)  # fmt: skip
    msg = Message(content, dst_node_id=grid.node_ids[0], message_type="train")
    with pytest.raises(InvalidParameterError, match="start_secaggplus"):
        train(msg, grid.contexts[grid.node_ids[0]])


def test_a_total_budget_run_under_secaggplus_ends_when_the_budget_is_spent():
    """A total budget under SecAgg+: the run ends, as start's does, before the round it cannot
    afford (strategy.stopped says so), with the rounds it ran and never more spent."""
    s = _strategy(budget=None, c_min=None, total_budget=30.0,
                  aggregation=lambda n: 1.0 + 0 * np.asarray(n))  # fmt: skip
    res = start_secaggplus(s, LocalGrid(_own_training_app(), K, seed=2), _model(), 1000,
                           **SECAGG)  # fmt: skip
    assert "budget left" in s.stopped
    assert s.records[-1]["cost"] <= 60.0
    assert all(r["secure_aggregation"] == "completed" for r in s.records)
    assert sorted(res.train_metrics_clientapp) == [r["server_round"] for r in s.records]


def test_under_secaggplus_a_reply_without_the_cost_metric_is_an_error_naming_it():
    """With a total budget the clients' costs are read from their (plaintext) metrics under
    SecAgg+ too: one the clients do not report is an error naming the node, the round and the
    metric, not a silent NaN."""
    s = _strategy(budget=None, c_min=None, total_budget=60.0, cost_metric="energy")
    with pytest.raises(ClientUpdateError, match=r"node \d+ at server round 1 has no 'energy'"):
        start_secaggplus(s, LocalGrid(_own_training_app(), K, seed=2), _model(), 5, **SECAGG)


def test_under_secaggplus_a_stragglers_wait_is_charged_as_on_the_plain_path():
    """round_cost="slowest" under SecAgg+: a node that sends no masked vector kept the round
    waiting for the workflow's timeout, and the round is charged that wait, cost_scale × the
    timeout, as on the plain path (it was charged as if nobody waited)."""
    def train(msg, context):
        pid = int(context.node_config["partition-id"])
        w = msg.content["arrays"][next(iter(msg.content["arrays"].keys()))].numpy()
        return Message(RecordDict({"arrays": ArrayRecord({"0": Array(w - 0.1 * (pid + 1))}),
                                   "metrics": MetricRecord({"num-examples": 10,
                                                            "seconds": 0.01})}),
                       reply_to=msg)  # fmt: skip

    app = ClientApp(mods=[secaggplus_mod])
    app.train()(secaggplus_train(train))
    fail = _drop_one_node_at_round_2()

    s = _strategy(budget=None, c_min=None, total_budget=100.0, round_cost="slowest",
                  cost_metric="seconds", aggregation=lambda n: 0.05 + 0 * np.asarray(n),
                  selector=FixedArm(K))  # fmt: skip
    start_secaggplus(s, LocalGrid(app, K, seed=2, fail=fail), _model(), 3, timeout=0.5,
                     **SECAGG)  # fmt: skip
    assert [r["secure_aggregation"] for r in s.records] == ["completed"] * 3
    waited = s.records[1]
    assert len(waited["failed_nodes"].split()) == 1
    assert waited["budget_used"] == pytest.approx(0.05 + 0.5)
    assert s.records[0]["budget_used"] == pytest.approx(0.05 + 0.01)
