"""EEGradStrategy(strategy=...): a user's Flower strategy inside, against Flower running it alone."""

import logging

import numpy as np
import pytest

pytest.importorskip("flwr")  # the 'flower' extra (installed by the README's test command)

from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import strategy as fs

from eegrad import FixedArm, InvalidParameterError, InvalidParameterTypeError, ProgressThompson
from eegrad.checkpoint import CheckpointError
from eegrad.flower import (
    CentralDP,
    DeviceCost,
    EEGradStrategy,
    LocalGrid,
    UnsupportedStrategyError,
    budgeted_train,
    pulling,
    with_spread_sums,
)
from eegrad.flower.inner import LINEAR, REPLIES, inner_kind

K, D, LR = 8, 4, 0.5
MU = np.random.default_rng(1).standard_normal((K, D))
BUDGET, C_MIN = 40.0, 1.5


def _aggregation(n):
    return 0.5 * (np.asarray(n, float) - 1.0)


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _gradient(arrays, b, context, config):
    """½‖w − μ_i‖² plus noise 1/√b seeded by (node, round): the same update for the same node,
    round and model, whichever server asks."""
    pid = int(context.node_config["partition-id"])
    rng = np.random.default_rng([pid, int(config["server-round"])])
    return [arrays[0] - MU[pid] + rng.standard_normal(D) / np.sqrt(b)]


def _device(ctx, cfg):
    return DeviceCost(1.0, 2.0 + int(ctx.node_config["partition-id"]) % 3)


def _app(local_steps=2, sums=False, seen=None):
    app = ClientApp()
    train = budgeted_train(_gradient, _device, lr=LR, local_steps=local_steps)
    if sums:
        train = with_spread_sums(train)
    if seen is not None:
        inner_train = train

        def train(msg, context):  # records what each client is sent
            seen.append((context.node_id, dict(msg.content["config"])))
            return inner_train(msg, context)

    app.train()(train)

    @app.evaluate()
    def evaluate(msg, context):
        w = msg.content["arrays"]["w"].numpy()
        pid = int(context.node_config["partition-id"])
        loss = 0.5 * float(np.sum((w - MU[pid]) ** 2))
        return Message(RecordDict({"metrics": MetricRecord({"loss": loss, "num-examples": 1})}),
                       reply_to=msg)  # fmt: skip

    return app


def _model():
    return ArrayRecord({"w": Array(np.zeros(D))})


def _eegrad(inner, n=K, **kw):
    args = {"budget": BUDGET, "c_min": C_MIN, "aggregation": _aggregation, "rng": 3,
            "selector": FixedArm(n), "strategy": inner}  # fmt: skip
    return EEGradStrategy(**(args | kw))


def _share(n):
    return float((BUDGET - _aggregation(n)) / n)


# Each of Flower's supported strategies, as a user would configure it (a factory: a strategy
# holds run state, so each server gets its own).
SUPPORTED = {
    "FedAvg": lambda: fs.FedAvg(fraction_evaluate=0.0),
    "FedAvgM": lambda: fs.FedAvgM(fraction_evaluate=0.0, server_learning_rate=0.8,
                                  server_momentum=0.7),
    "FedProx": lambda: fs.FedProx(fraction_evaluate=0.0, proximal_mu=0.3),
    "FedAdam": lambda: fs.FedAdam(fraction_evaluate=0.0, eta=0.05, beta_1=0.9, beta_2=0.99),
    "FedYogi": lambda: fs.FedYogi(fraction_evaluate=0.0, eta=0.05, beta_1=0.9, beta_2=0.99),
    "FedAdagrad": lambda: fs.FedAdagrad(fraction_evaluate=0.0, eta=0.05),
    "FedMedian": lambda: fs.FedMedian(fraction_evaluate=0.0),
    "FedTrimmedAvg": lambda: fs.FedTrimmedAvg(fraction_evaluate=0.0, beta=0.25),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SUPPORTED))
def test_each_supported_strategy_inside_ends_as_flower_running_it_alone(name):
    """With n = K every round, eegrad asks the nodes Flower's strategy would ask alone: the
    models agree to rounding (the linear ones are given the round's mean as one reply, whose
    weighted mean is the replies' mean; the robust ones every reply)."""
    rounds = 6
    alone = SUPPORTED[name]().start(
        grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(), num_rounds=rounds,
        train_config=ConfigRecord({"budget-share": _share(K)}))  # fmt: skip
    inner = SUPPORTED[name]()
    ours = _eegrad(inner)
    res = ours.start(grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(),
                     num_rounds=rounds)  # fmt: skip
    w_alone, w_ours = alone.arrays["w"].numpy(), res.arrays["w"].numpy()
    assert not np.allclose(w_alone, 0.0)
    np.testing.assert_allclose(w_ours, w_alone, rtol=1e-9, atol=1e-12)
    assert [r["arm"] for r in ours.records] == [K] * rounds
    assert inner_kind(inner) == (REPLIES if name in ("FedMedian", "FedTrimmedAvg") else LINEAR)
    # the inner strategy's own train metrics (the clients' weighted means) pass through
    assert "seconds" in res.train_metrics_clientapp[rounds]


def test_the_inner_strategy_asks_exactly_the_n_nodes_eegrad_sampled():
    """Flower's fraction_train rounds down (22 nodes, 15/22 gives 14): the inner strategy sees
    only the n nodes eegrad picked and sends to each; with FedAvg inside, the run is the built-in
    step's (FedAvg's aggregate, server_lr = 1) to rounding."""
    nodes, n, rounds = 22, 15, 4
    seen = []
    inner = fs.FedAvg(fraction_train=15 / 22, min_train_nodes=2, min_available_nodes=20,
                      fraction_evaluate=0.0)  # fmt: skip
    ours = _eegrad(inner, n=n)
    res = ours.start(grid=LocalGrid(_app(seen=seen), nodes, seed=4), initial_arrays=_model(),
                     num_rounds=rounds)  # fmt: skip
    built_in = _eegrad(None, n=n)
    ref = built_in.start(grid=LocalGrid(_app(), nodes, seed=4), initial_arrays=_model(),
                         num_rounds=rounds)  # fmt: skip
    np.testing.assert_allclose(res.arrays["w"].numpy(), ref.arrays["w"].numpy(), rtol=1e-12)
    assert len(seen) == n * rounds
    for r in range(rounds):
        asked = sorted(node for node, _ in seen[r * n:(r + 1) * n])
        assert len(set(asked)) == n
    # the user's sampling settings are theirs again after each round
    assert (inner.fraction_train, inner.min_train_nodes, inner.min_available_nodes) == \
        (15 / 22, 2, 20)  # fmt: skip
    cfg = seen[0][1]
    assert cfg["budget-share"] == pytest.approx(_share(n))
    assert cfg["server-round"] == 1


def test_fedprox_mu_reaches_the_budgeted_clients_and_is_applied():
    seen = []
    _eegrad(fs.FedProx(fraction_evaluate=0.0, proximal_mu=0.3)).start(
        grid=LocalGrid(_app(seen=seen), K, seed=2), initial_arrays=_model(), num_rounds=1)
    assert all(cfg["proximal-mu"] == 0.3 for _, cfg in seen)


def test_budgeted_train_applies_the_proximal_term_in_closed_form():
    """Two local steps of a constant gradient g from w_t: w_1 = w_t − ηg, w_2 = w_1 − η(g +
    μ(w_1 − w_t)) = w_t − 2ηg + η²μg."""
    g, lr, mu = np.array([1.0, -2.0]), 0.1, 0.5
    train = budgeted_train(lambda arrays, b, ctx, cfg: [g.copy()], DeviceCost(0.0, 1.0),
                           lr=lr, local_steps=2)  # fmt: skip
    grid = LocalGrid(ClientApp(), 1, seed=0)  # only for its message identity
    msg = Message(RecordDict({"arrays": ArrayRecord({"w": Array(np.zeros(2))}),
                              "config": ConfigRecord({"budget-share": 4.0, "server-round": 1,
                                                      "proximal-mu": mu})}),
                  dst_node_id=grid.node_ids[0], message_type="train")  # fmt: skip
    out = train(msg, grid.contexts[grid.node_ids[0]])
    np.testing.assert_allclose(out.content["arrays"]["w"].numpy(),
                               -2 * lr * g + lr * lr * mu * g, rtol=1e-14)  # fmt: skip
    msg.content["config"]["proximal-mu"] = -1.0
    with pytest.raises(InvalidParameterError, match="proximal-mu = -1.0"):
        train(msg, grid.contexts[grid.node_ids[0]])


def test_a_linear_inner_strategy_takes_the_private_release():
    """Under central DP, FedAvg inside is given the released mean as one reply (damped by
    default): the same models as the built-in step at the same seed."""
    dp = CentralDP(1.0, clipping_norm=5.0, delta=1e-5)
    kw = {"privacy": dp, "selector": None}
    ours = _eegrad(fs.FedAvg(fraction_evaluate=0.0), **kw)
    res = ours.start(grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(), num_rounds=6)
    built_in = _eegrad(None, **kw)
    ref = built_in.start(grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(),
                         num_rounds=6)  # fmt: skip
    np.testing.assert_allclose(res.arrays["w"].numpy(), ref.arrays["w"].numpy(), rtol=1e-12)
    assert [r["arm"] for r in ours.records] == [r["arm"] for r in built_in.records]
    assert min(m["step_scale"] for m in res.train_metrics_clientapp.values()) < 1.0  # damped
    # no client metric passes a private release unnoised
    assert "seconds" not in res.train_metrics_clientapp[6]


def test_a_linear_inner_strategy_takes_secure_sums():
    kw = {"secure_sums": True}
    ours = _eegrad(fs.FedAdam(fraction_evaluate=0.0, eta=0.05), **kw)
    res = ours.start(grid=LocalGrid(_app(sums=True), K, seed=2), initial_arrays=_model(),
                     num_rounds=5)  # fmt: skip
    alone = fs.FedAdam(fraction_evaluate=0.0, eta=0.05).start(
        grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(), num_rounds=5,
        train_config=ConfigRecord({"budget-share": _share(K)}))  # fmt: skip
    np.testing.assert_allclose(res.arrays["w"].numpy(), alone.arrays["w"].numpy(), rtol=1e-9)


def test_evaluation_is_the_inner_strategys():
    inner = fs.FedAvg(fraction_evaluate=1.0, min_evaluate_nodes=2)
    res = _eegrad(inner).start(grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(),
                               num_rounds=3)  # fmt: skip
    assert sorted(res.evaluate_metrics_clientapp) == [1, 2, 3]
    assert all("loss" in m for m in res.evaluate_metrics_clientapp.values())


def test_start_twice_begins_the_inner_strategy_afresh():
    inner = fs.FedAdam(fraction_evaluate=0.0, eta=0.05)
    ours = _eegrad(inner)
    first = ours.start(grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(), num_rounds=4)
    w1 = first.arrays["w"].numpy().copy()
    second = ours.start(grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(), num_rounds=4)
    np.testing.assert_array_equal(second.arrays["w"].numpy(), w1)


@pytest.mark.parametrize("stop", [2, 5])
def test_a_resumed_run_with_fedadam_ends_as_the_uninterrupted_one(tmp_path, stop):
    """FedAdam's moments go into the checkpoint: stopped after round ``stop`` and resumed with
    new objects, the run ends with the uninterrupted one's model and records, bit for bit."""
    rounds = 8

    def run(ck, num_rounds):
        s = _eegrad(fs.FedAdam(fraction_train=0.5, fraction_evaluate=0.0, eta=0.05,
                               beta_1=0.9, beta_2=0.99), checkpoint=ck,
                    selector=ProgressThompson(noise_order=2))  # a rule whose n varies  # fmt: skip
        res = s.start(grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(),
                      num_rounds=num_rounds)  # fmt: skip
        return s, res

    whole, res_whole = run(tmp_path / "whole.npz", rounds)
    run(tmp_path / "cut.npz", stop)
    resumed, res_resumed = run(tmp_path / "cut.npz", rounds)
    np.testing.assert_array_equal(res_resumed.arrays["w"].numpy(), res_whole.arrays["w"].numpy())
    assert resumed.records == whole.records
    assert len({r["arm"] for r in whole.records}) > 1  # the rule chose, not a fixed n


def test_a_checkpoint_of_another_inner_strategy_or_hyperparameter_is_refused(tmp_path):
    ck = tmp_path / "run.npz"
    _eegrad(fs.FedAdam(fraction_evaluate=0.0, eta=0.05), checkpoint=ck).start(
        grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(), num_rounds=2)
    with pytest.raises(CheckpointError, match=r"strategy\.eta: 0\.05 in the checkpoint, 0\.1 here"):
        _eegrad(fs.FedAdam(fraction_evaluate=0.0, eta=0.1), checkpoint=ck).start(
            grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(), num_rounds=3)
    with pytest.raises(CheckpointError, match="strategy: 'FedAdam' in the checkpoint, 'FedYogi'"):
        _eegrad(fs.FedYogi(fraction_evaluate=0.0, eta=0.05), checkpoint=ck).start(
            grid=LocalGrid(_app(), K, seed=2), initial_arrays=_model(), num_rounds=3)


@pytest.mark.parametrize(("make", "why"), [
    (lambda: fs.QFedAvg(client_learning_rate=0.1), "losses raised to q"),
    (lambda: fs.Krum(), "single reply closest"),
    (lambda: fs.MultiKrum(), "num_nodes_to_select"),
    (lambda: fs.Bulyan(), "num_malicious_nodes"),
    (lambda: fs.FedXgbBagging(), "trees"),
    (lambda: fs.FedXgbCyclic(), "trees"),
])  # fmt: skip
def test_strategies_that_are_not_a_mean_of_the_updates_are_refused_by_name(make, why):
    inner = make()
    with pytest.raises(UnsupportedStrategyError, match=f"cannot be a {type(inner).__name__}.*{why}"):
        _eegrad(inner)


def test_fixed_n_dp_wrappers_anywhere_in_the_chain_are_refused():
    wrapped = fs.DifferentialPrivacyServerSideFixedClipping(
        fs.FedAvg(), noise_multiplier=1.0, clipping_norm=1.0, num_sampled_clients=5)  # fmt: skip
    with pytest.raises(UnsupportedStrategyError, match="DifferentialPrivacyServerSideFixedClipping"):
        _eegrad(wrapped)


def test_what_an_inner_strategy_cannot_take_is_refused_by_name():
    with pytest.raises(InvalidParameterTypeError, match="message-API strategy"):
        _eegrad(object())
    with pytest.raises(UnsupportedStrategyError, match="FedMedian with privacy"):
        _eegrad(fs.FedMedian(), privacy=CentralDP(1.0, 1.0, 1e-5))
    with pytest.raises(UnsupportedStrategyError, match="FedTrimmedAvg with secure_sums"):
        _eegrad(fs.FedTrimmedAvg(), secure_sums=True)
    with pytest.raises(InvalidParameterError, match="'damp_exploration'.*FedMedian"):
        _eegrad(fs.FedMedian(), damp_exploration=True)
    with pytest.raises(InvalidParameterError, match="'server_lr'.*eta"):
        _eegrad(fs.FedAdam(), server_lr=0.5)
    with pytest.raises(InvalidParameterError, match="'steps'"):
        _eegrad(fs.FedAvg(), steps="t-rounds", T=4)
    with pytest.raises(InvalidParameterError, match="'fraction_evaluate'.*its fraction_evaluate"):
        _eegrad(fs.FedAvg(), fraction_evaluate=0.5)
    with pytest.raises(InvalidParameterError, match="'weighted_by_key'.*'num-examples'"):
        _eegrad(fs.FedAvg(), weighted_by_key="samples")


def test_the_keys_are_the_inner_strategys():
    s = _eegrad(fs.FedAvg(weighted_by_key="samples", arrayrecord_key="model"))
    assert (s.weighted_by_key, s.arrayrecord_key, s.configrecord_key) == \
        ("samples", "model", "config")  # fmt: skip


def _alive_replies_app():
    """An app whose every reply is tracked: each call records how many earlier replies are
    still alive (after a garbage collection) when it runs."""
    import gc
    import weakref

    alive, seen = [], []
    app = ClientApp()
    train = budgeted_train(_gradient, _device, lr=LR)

    @app.train()
    def tracked(msg, context):
        gc.collect()
        seen.append(sum(ref() is not None for ref in alive))
        reply = train(msg, context)
        alive.append(weakref.ref(reply.content["arrays"]))
        return reply

    return app, seen


@pytest.mark.parametrize("inner", [None, "FedAdam", "FedAvg"])
def test_the_server_holds_one_reply_at_a_time(inner, monkeypatch):
    """Replies pulled one id at a time (LocalGrid(deliver="on-pull"), as a SuperLink holds them)
    are folded and dropped: when a client runs, no earlier reply of the round is alive; Flower's
    FedAvg alone holds every earlier one (n − 1 at the last client)."""
    monkeypatch.setattr(pulling, "REPLIES_AT_ONCE", 1)
    n = K
    app, seen = _alive_replies_app()
    if inner == "FedAvg":
        fs.FedAvg(fraction_evaluate=0.0).start(
            grid=LocalGrid(app, K, seed=2, deliver="on-pull"), initial_arrays=_model(),
            num_rounds=1, train_config=ConfigRecord({"budget-share": _share(K)}))  # fmt: skip
        assert max(seen) == n - 1
        return
    strategy = None if inner is None else SUPPORTED[inner]()
    _eegrad(strategy).start(grid=LocalGrid(app, K, seed=2, deliver="on-pull"),
                            initial_arrays=_model(), num_rounds=3)  # fmt: skip
    assert len(seen) == 3 * n
    assert max(seen) == 0


class _CountingGrid(LocalGrid):
    """A LocalGrid that counts its pull_messages calls and the ids each asks for."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.pulls = []

    def pull_messages(self, message_ids):
        ids = list(message_ids)
        self.pulls.append(len(ids))
        return super().pull_messages(ids)


def test_a_poll_asks_for_a_few_ids_a_call_and_the_server_holds_no_more_replies(monkeypatch):
    # A round of K clients is pulled in ⌈K / at_once⌉ calls of at most at_once ids (not one call
    # an id: K round trips to a SuperLink each poll), and no more than at_once replies are alive
    # at once (pulled, not yet folded), whatever n is.
    at_once = 3
    monkeypatch.setattr(pulling, "REPLIES_AT_ONCE", at_once)
    app, seen = _alive_replies_app()
    grid = _CountingGrid(app, K, seed=2, deliver="on-pull")
    _eegrad(None).start(grid=grid, initial_arrays=_model(), num_rounds=2)
    assert grid.pulls == [3, 3, 2] * 2  # K = 8 replies a round
    assert len(seen) == 2 * K
    assert 0 < max(seen) <= at_once - 1
