r"""The client side for PyTorch models: local epochs of SGD under the share of the budget sent.

:func:`budgeted_torch_train` is :func:`~eegrad.flower.budgeted_train` for a PyTorch
``nn.Module`` trained as Flower users train it for FedAvg — E local epochs of mini-batch SGD —
with the round's budget deciding how much data a client can afford:

* :class:`~eegrad.flower.DeviceCost` (virtual cost): the share buys
  :math:`b = \lfloor(\text{share} - o)\,s\rfloor` sample-gradients; the client draws
  :math:`m = \min(\lfloor b/E \rfloor, \text{its data})` of its samples and runs E epochs over them
  (cost :math:`o + E m / s`), one step per epoch on all m by default (``batch_size=None``), or
  mini-batches. A larger share means more data per epoch — a more precise update.
* :class:`~eegrad.flower.WallClock` (real time): epochs over shuffled mini-batches of the client's
  data until the time share is spent or E epochs are done (at least one mini-batch).

The reply is what FedAvg expects — the model's ``state_dict`` as an ``ArrayRecord`` (its
tensors' dtypes kept; they are trained on ``torch_device``) and ``num-examples`` (m, the distinct
samples used: the weight of the update) — plus ``cost``, ``seconds``, ``sample-gradients``,
``local-steps`` (the optimizer steps taken) and ``train_loss`` (the mean loss of the last
epoch's steps, as Flower's quickstarts report it: the evidence the default's departures need).
A loss or a parameter that becomes NaN or Inf is an error that names the node and the round
(Flower returns it to the server as that node's error reply; the server drops the node for the
round and records it).

PyTorch is imported when a train function is made, never by ``import eegrad.flower``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict

from .._validation import (
    InvalidParameterError,
    NonFiniteGradientError,
    check_callable,
    check_integer,
    check_real,
)
from .client import (
    LOCAL_STEPS_KEY,
    DeviceCost,
    WallClock,
    check_metric_key,
    proximal_mu,
    received_share,
)

__all__ = ["budgeted_torch_train"]

Data = Callable[[Context, ConfigRecord], tuple[Any, Any]]


def budgeted_torch_train(
    model: Callable[[], Any],
    loss: Callable[[Any, Any], Any],
    data: Data,
    device: DeviceCost | WallClock | Callable[[Context, ConfigRecord], DeviceCost | WallClock],
    *,
    epochs: int = 1,
    lr: float = 0.05,
    batch_size: int | None = None,
    optimizer: Callable[[Any], Any] | None = None,
    torch_device: str = "cpu",
    seed: int = 0,
    weighted_by_key: str = "num-examples",
    arrayrecord_key: str = "arrays",
    configrecord_key: str = "config",
) -> Callable[[Message, Context], Message]:
    r"""A Flower train function for a PyTorch model: E local epochs under the budget share.

    Parameters
    ----------
    model : callable
        ``model() -> torch.nn.Module``, the architecture (its weights are replaced by the
        server's ``state_dict`` each round).
    loss : callable
        ``loss(outputs, targets) -> scalar tensor``, e.g. ``torch.nn.functional.cross_entropy``.
        With FedProx as the server's inner strategy (``EEGradStrategy(strategy=FedProx(...))``),
        the config's ``proximal-mu`` μ adds :math:`(\mu/2)\|w - w_t\|^2` to it, :math:`w_t` the
        model received.
    data : callable
        ``data(context, config) -> (inputs, targets)``: the client's partition as tensors
        (e.g. by ``context.node_config["partition-id"]``).
    device : DeviceCost, WallClock, or callable
        The budget model, or ``(context, config) -> model`` for heterogeneous devices.
    epochs : int
        E, local epochs, >= 1.
    lr : float
        Step size of the default optimizer (plain SGD), > 0.
    batch_size : int, optional
        Mini-batch size of the local steps, >= 1. None (default): one step per epoch on the
        whole subset the share buys, so that a client takes E steps whatever n is and a larger
        share buys a more precise step (the paper's fidelity); with a fixed mini-batch size the
        number of local steps grows with the share, and so does the update, which the rules'
        variance model does not see (the federated guide has both measured).
    optimizer : callable, optional
        ``optimizer(parameters) -> torch.optim.Optimizer`` instead of SGD(lr).
    torch_device : str
        Where the client trains (``"cpu"``, ``"cuda"``, ...); the reply's tensors keep their
        dtypes.
    seed : int
        Seed of the clients' sampling: each (node, round) draws its own stream from it.
    weighted_by_key : str
        The metric the reply carries its weight (m, the distinct samples used) under: the
        strategy's own ``weighted_by_key`` (default ``"num-examples"``, FedAvg's).

    Returns
    -------
    callable
        ``train(message, context) -> Message``, to register with ``@app.train()``.
    """
    owner = "budgeted_torch_train"
    check_callable(model, "model", owner)
    check_callable(loss, "loss", owner)
    check_callable(data, "data", owner)
    epochs = check_integer(epochs, "epochs", owner, ge=1)
    lr = check_real(lr, "lr", owner, gt=0)
    if batch_size is not None:
        batch_size = check_integer(batch_size, "batch_size", owner, ge=1)
    seed = check_integer(seed, "seed", owner, ge=0)
    check_metric_key(weighted_by_key, "weighted_by_key", owner)
    if not isinstance(device, DeviceCost | WallClock):
        check_callable(device, "device", owner)
    import torch

    def train(msg: Message, context: Context) -> Message:
        start = time.perf_counter()
        config = msg.content[configrecord_key]
        share = received_share(config)
        server_round = int(config.get("server-round", 0))
        where = f"node {context.node_id} at server round {server_round}"
        budget = device if isinstance(device, DeviceCost | WallClock) else device(context, config)
        net = model()
        net.load_state_dict(msg.content[arrayrecord_key].to_torch_state_dict())
        net.to(torch_device)
        net.train()
        opt = torch.optim.SGD(net.parameters(), lr=lr) if optimizer is None else \
            optimizer(net.parameters())  # fmt: skip
        X, y = data(context, config)
        pid = int(context.node_config.get("partition-id", 0))
        state = np.random.SeedSequence([seed, pid, server_round,
                                        int(config.get("method-id", 0))]).generate_state(1)  # fmt: skip
        gen = torch.Generator().manual_seed(int(state[0]))
        mu = proximal_mu(config, where)
        anchor = [p.detach().clone() for p in net.parameters()] if mu else []

        last_epoch: list[float] = []  # the losses of the last epoch's steps
        at_epoch = [-1]

        def step(idx: Any, epoch: int) -> None:
            nonlocal taken
            opt.zero_grad()
            value = loss(net(X[idx].to(torch_device)), y[idx].to(torch_device))
            if epoch != at_epoch[0]:
                last_epoch.clear()
                at_epoch[0] = epoch
            last_epoch.append(float(value.detach()))
            if mu:  # FedProx: (μ/2)‖w − w_t‖² keeps the client near the round's model
                value = value + 0.5 * mu * sum(torch.sum((p - a) ** 2)
                                               for p, a in zip(net.parameters(), anchor,
                                                               strict=True))  # fmt: skip
            if not bool(torch.isfinite(value)):
                raise NonFiniteGradientError(
                    f"The local training of {where} produced a loss of {float(value)} (epoch "
                    f"{epoch + 1}): NaN or Inf."
                )
            value.backward()
            opt.step()
            taken += 1

        grads, taken = 0, 0  # sample-gradients; optimizer steps
        if isinstance(budget, DeviceCost):
            total = budget.samples(share)
            m = min(total // epochs, len(X))
            if m < 1:
                raise InvalidParameterError(
                    f"The budget share {share:g} of {where} buys {total} sample-gradients, less "
                    f"than one sample for each of E = {epochs} epochs (overhead "
                    f"{budget.overhead:g}, speed {budget.speed:g})."
                )
            subset = torch.randperm(len(X), generator=gen)[:m]
            size = m if batch_size is None else batch_size
            for epoch in range(epochs):
                order = subset[torch.randperm(m, generator=gen)]
                for i in range(0, m, size):
                    step(order[i : i + size], epoch)
            grads = epochs * m
            cost = budget.cost(grads)
        else:
            seconds, m, done = share * budget.seconds_per_unit, 0, False
            size = len(X) if batch_size is None else batch_size
            for epoch in range(epochs):
                order = torch.randperm(len(X), generator=gen)
                for i in range(0, len(X), size):
                    idx = order[i : i + size]
                    step(idx, epoch)
                    grads += len(idx)
                    m = max(m, min(grads, len(X)))
                    if time.perf_counter() - start >= seconds:
                        done = True
                        break
                if done:
                    break
            cost = (time.perf_counter() - start) / budget.seconds_per_unit
        params = net.state_dict()
        bad = [k for k, t in params.items() if t.is_floating_point()
               and not bool(torch.isfinite(t).all())]  # fmt: skip
        if bad:
            raise NonFiniteGradientError(
                f"The local training of {where} left NaN or Inf in {bad[:3]}."
            )
        out = ArrayRecord(params)  # the tensors' dtypes kept (Flower moves them to the CPU)
        metrics = MetricRecord({weighted_by_key: int(m), "cost": float(cost),
                                "sample-gradients": int(grads), LOCAL_STEPS_KEY: taken,
                                "seconds": time.perf_counter() - start})  # fmt: skip
        if last_epoch:
            metrics["train_loss"] = float(np.mean(last_epoch))
        return Message(RecordDict({arrayrecord_key: out, "metrics": metrics}), reply_to=msg)

    return train
