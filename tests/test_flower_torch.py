"""eegrad.flower.budgeted_torch_train: PyTorch clients with local epochs under a budget share."""

import logging

import numpy as np
import pytest

pytest.importorskip("flwr")
torch = pytest.importorskip("torch")

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from eegrad import FixedArm, InvalidParameterError, NonFiniteGradientError
from eegrad.flower import DeviceCost, EEGradStrategy, LocalGrid, budgeted_torch_train

K = 6
TARGET = torch.tensor([[1.0, -2.0, 0.5]])


@pytest.fixture(autouse=True)
def _quiet_flower():
    logging.getLogger("flwr").setLevel(logging.ERROR)


def _model(dtype=torch.float32):
    return lambda: torch.nn.Linear(3, 1, bias=False).to(dtype)


def _data(dtype=torch.float32, bad_node=None):
    def data(context, config):
        pid = int(context.node_config["partition-id"])
        g = torch.Generator().manual_seed(pid)
        X = torch.randn(50 + 10 * pid, 3, generator=g, dtype=dtype)
        y = X @ TARGET.T.to(dtype) + 0.1 * torch.randn(X.shape[0], 1, generator=g, dtype=dtype)
        if pid == bad_node:
            y[:] = float("nan")
        return X, y

    return data


def _app(dtype=torch.float32, epochs=2, bad_node=None, batch_size=None):
    app = ClientApp()
    app.train()(budgeted_torch_train(_model(dtype), torch.nn.functional.mse_loss,
                                     _data(dtype, bad_node), DeviceCost(1.0, 4.0), epochs=epochs,
                                     lr=0.2, batch_size=batch_size))  # fmt: skip
    return app


def _initial(dtype=torch.float32):
    torch.manual_seed(0)
    return ArrayRecord(_model(dtype)().state_dict())


def _call(train, share=10.0, pid=0, rnd=1):
    LocalGrid(ClientApp(), 1)  # sets the process's task identity, which a Message needs
    msg = Message(RecordDict({"arrays": _initial(),
                              "config": ConfigRecord({"budget-share": share,
                                                      "server-round": rnd})}),
                  dst_node_id=7, message_type="train")  # fmt: skip
    ctx = Context(run_id=1, node_id=7, node_config={"partition-id": pid}, state=RecordDict(),
                  run_config={})  # fmt: skip
    return train(msg, ctx)


def test_the_share_buys_the_data_of_e_epochs():
    """DeviceCost(1, 4): a share of 10 buys ⌊(10 − 1)·4⌋ = 36 sample-gradients, so E = 2 epochs
    over m = 18 samples (one full-batch step each), cost 1 + 36/4 = 10."""
    train = budgeted_torch_train(_model(), torch.nn.functional.mse_loss, _data(),
                                 DeviceCost(1.0, 4.0), epochs=2, lr=0.2)  # fmt: skip
    reply = _call(train)
    metrics = reply.content["metrics"]
    assert metrics["num-examples"] == 18
    assert metrics["sample-gradients"] == 36
    assert metrics["local-steps"] == 2  # one full-batch step an epoch
    assert metrics["cost"] == pytest.approx(10.0)
    w = reply.content["arrays"]["weight"].numpy()
    assert w.dtype == np.float32
    again = _call(train)  # the same (node, round): the same samples and model
    np.testing.assert_array_equal(again.content["arrays"]["weight"].numpy(), w)
    other = _call(train, rnd=2)
    assert not np.array_equal(other.content["arrays"]["weight"].numpy(), w)


def test_mini_batches_report_their_optimizer_steps():
    # The same 18 samples in batches of 5: ⌈18/5⌉ = 4 optimizer steps an epoch, 8 in all,
    # reported as local-steps (the default rule's prior of how an update grows with the share).
    train = budgeted_torch_train(_model(), torch.nn.functional.mse_loss, _data(),
                                 DeviceCost(1.0, 4.0), epochs=2, lr=0.2, batch_size=5)  # fmt: skip
    metrics = _call(train).content["metrics"]
    assert metrics["num-examples"] == 18
    assert metrics["local-steps"] == 8


def test_the_weight_goes_under_the_strategys_key():
    # weighted_by_key names the metric of the reply's weight (m), as the strategy's own does.
    train = budgeted_torch_train(_model(), torch.nn.functional.mse_loss, _data(),
                                 DeviceCost(1.0, 4.0), epochs=2, lr=0.2,
                                 weighted_by_key="samples")  # fmt: skip
    metrics = _call(train).content["metrics"]
    assert metrics["samples"] == 18
    assert "num-examples" not in metrics
    with pytest.raises(InvalidParameterError, match="'weighted_by_key'"):
        budgeted_torch_train(_model(), torch.nn.functional.mse_loss, _data(),
                             DeviceCost(1.0, 4.0), weighted_by_key=3)  # fmt: skip


def test_a_share_that_buys_less_than_one_sample_per_epoch_is_an_error():
    train = budgeted_torch_train(_model(), torch.nn.functional.mse_loss, _data(),
                                 DeviceCost(1.0, 4.0), epochs=8)  # fmt: skip
    with pytest.raises(InvalidParameterError, match=r"buys 4 sample-gradients.*E = 8"):
        _call(train, share=2.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("batch_size", [None, 8])
def test_a_torch_federation_trains_and_keeps_the_models_dtype(dtype, batch_size):
    # a departure (its evidence the train_loss the clients report), so that the rule chooses
    strategy = EEGradStrategy(60.0, 2.0, aggregation=lambda n: 0.5 * (n - 1.0), rng=0,
                              departure=0.5)  # fmt: skip
    res = strategy.start(grid=LocalGrid(_app(dtype, batch_size=batch_size), K, seed=1),
                         initial_arrays=_initial(dtype), num_rounds=12)  # fmt: skip
    assert all(np.isfinite(m["train_loss"]) for m in res.train_metrics_clientapp.values())
    w = res.arrays["weight"].numpy()
    assert w.dtype == (np.float32 if dtype == torch.float32 else np.float64)
    # the clients' least squares share one target: the model approaches it
    start = np.abs(_initial(dtype)["weight"].numpy() - TARGET.numpy()).max()
    assert np.abs(w - TARGET.numpy()).max() < 0.5 * start
    assert len({r["arm"] for r in strategy.records}) > 1


def test_a_client_whose_training_diverges_is_named_and_dropped():
    strategy = EEGradStrategy(60.0, 2.0, selector=FixedArm(K), rng=0)
    strategy.start(grid=LocalGrid(_app(bad_node=2), K, seed=1), initial_arrays=_initial(),
                   num_rounds=2)  # fmt: skip
    grid = LocalGrid(_app(bad_node=2), K, seed=1)
    failed = strategy.records[0]["failed_nodes"].split()
    assert [grid._partition[int(f)] for f in failed] == [2]
    assert strategy.records[0]["clients_replied"] == K - 1
    train = budgeted_torch_train(_model(), torch.nn.functional.mse_loss, _data(bad_node=0),
                                 DeviceCost(1.0, 4.0))  # fmt: skip
    with pytest.raises(NonFiniteGradientError, match=r"node 7 at server round 3 .*NaN or Inf"):
        _call(train, rnd=3)


def test_fedprox_mu_adds_the_proximal_term_to_the_loss():
    """Two epochs, one full-batch step each, of the loss mean(Xw) with X = 1 (gradient g = 1
    per coordinate) from w_t: w_1 = w_t − ηg, w_2 = w_1 − η(g + μ(w_1 − w_t)) = w_t − 2ηg + η²μg.
    """
    lr, mu = 0.1, 0.5

    def data(context, config):
        return torch.ones(20, 3, dtype=torch.float64), torch.zeros(20, 1, dtype=torch.float64)

    train = budgeted_torch_train(_model(torch.float64), lambda out, y: out.mean(), data,
                                 DeviceCost(0.0, 4.0), epochs=2, lr=lr)  # fmt: skip
    LocalGrid(ClientApp(), 1)  # the process's task identity
    torch.manual_seed(0)
    initial = ArrayRecord(_model(torch.float64)().state_dict())
    w0 = initial["weight"].numpy().copy()
    ctx = Context(run_id=1, node_id=7, node_config={"partition-id": 0}, state=RecordDict(),
                  run_config={})  # fmt: skip
    msg = Message(RecordDict({"arrays": initial, "config": ConfigRecord(
        {"budget-share": 10.0, "server-round": 1, "proximal-mu": mu})}), dst_node_id=7,
        message_type="train")  # fmt: skip
    out = train(msg, ctx).content["arrays"]["weight"].numpy()
    np.testing.assert_allclose(out, w0 - 2 * lr + lr * lr * mu, rtol=1e-12)
