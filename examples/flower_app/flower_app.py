"""A Flower app whose server learns how many clients to ask each round, under a budget.

A standalone Flower app (``pyproject.toml`` beside this file holds its run config): softmax
regression on scikit-learn's 8x8 digits, split among the nodes by label (each node holds a few
digits: non-iid). Each round has a budget B; the server's aggregation costs D(n); the n clients
asked share the rest, and each computes one gradient (FedSGD) on the largest batch its share buys
on its device (``budget-mode = "virtual"``: a fixed overhead and a speed per node, deterministic)
or for as long as its share lasts in seconds (``"wall-clock"``: the real device is the cost).
:class:`eegrad.flower.EEGradStrategy` chooses n each round from the spread of the updates it
receives and steps every round; swap it for Flower's ``FedAvg`` to compare.

In Flower's local simulation, after the README's install line (Flower starts its local SuperLink;
the first command sets the simulation's size, once)::

    flwr federation simulation-config @none/default local --num-supernodes 10
    flwr run examples/flower_app --stream

Against a deployment (a SuperLink and SuperNodes: the federated guide's section *Deploy*)::

    flwr run examples/flower_app my-superlink --stream

Everything a user changes is in three places: ``gradient`` (the model), ``device`` (the budget
model of a node) and the strategy's arguments in ``main``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from eegrad.costs import LinearAggregation
from eegrad.flower import DeviceCost, EEGradStrategy, WallClock, budgeted_train

CLASSES = 10
REG = 1e-3


# -- data and model --------------------------------------------------------------------------------
@lru_cache(maxsize=4)
def load(partition: int | None = None, num_partitions: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The digits (pixels in [0, 1]): all training data, or one node's label-sorted slice; or,
    with ``partition=-1``, the held-out test set."""
    from sklearn.datasets import load_digits

    data = load_digits()
    X, y = data.data / 16.0, data.target.astype(int)
    order = np.random.default_rng(0).permutation(y.size)
    test, train = order[: y.size // 5], order[y.size // 5 :]
    if partition == -1:
        return X[test], y[test]
    if partition is None:
        return X[train], y[train]
    by_label = train[np.argsort(y[train], kind="stable")]  # label skew: a few digits per node
    mine = np.array_split(by_label, num_partitions)[partition]
    return X[mine], y[mine]


def loss_and_gradient(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of softmax regression + (λ/2)‖w‖², and its gradient (w flat)."""
    p = X.shape[1]
    W = w.reshape(p + 1, CLASSES)
    Z = X @ W[:p] + W[p]
    Z -= Z.max(axis=1, keepdims=True)
    P = np.exp(Z)
    P /= P.sum(axis=1, keepdims=True)
    m = y.size
    loss = -np.mean(np.log(P[np.arange(m), y] + 1e-300)) + 0.5 * REG * float(w @ w)
    P[np.arange(m), y] -= 1.0
    G = np.vstack([X.T @ P, P.sum(axis=0)]) / m
    return float(loss), G.reshape(-1) + REG * w


# -- the client ------------------------------------------------------------------------------------
def gradient(arrays: list[np.ndarray], batch_size: int, context: Context,
             config: ConfigRecord) -> list[np.ndarray]:  # fmt: skip
    """The gradient on a fresh mini-batch of ``batch_size`` of this node's samples."""
    X, y = load(int(context.node_config["partition-id"]),
                int(context.node_config["num-partitions"]))  # fmt: skip
    rng = np.random.default_rng([int(context.run_config["seed"]), context.node_id % 2**32,
                                 int(config["server-round"])])  # fmt: skip
    take = rng.choice(y.size, min(batch_size, y.size), replace=False)
    return [loss_and_gradient(arrays[0], X[take], y[take])[1]]


def device(context: Context, config: ConfigRecord) -> DeviceCost | WallClock:
    """This node's budget model: a virtual device (overhead in [1, 3], 1–4 samples per unit)
    or the real one, timed."""
    pid = int(context.node_config["partition-id"])
    size = load(pid, int(context.node_config["num-partitions"]))[1].size
    if context.run_config["budget-mode"] == "wall-clock":
        return WallClock(float(context.run_config["seconds-per-unit"]), chunk=8, max_samples=size)
    rng = np.random.default_rng([int(context.run_config["seed"]), pid])
    return DeviceCost(overhead=float(rng.uniform(1, 3)), speed=float(rng.uniform(1, 4)),
                      max_samples=size)  # fmt: skip


def _train(msg: Any, context: Context) -> Any:
    lr = float(context.run_config["client-lr"])
    return budgeted_train(gradient, device, lr=lr)(msg, context)


client = ClientApp()
client.train()(_train)


# -- the server ------------------------------------------------------------------------------------
server = ServerApp()


@server.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    X, y = load()
    X_test, y_test = load(-1)
    dim = (X.shape[1] + 1) * CLASSES

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        w = arrays["w"].numpy()
        loss, _ = loss_and_gradient(w, X, y)
        W = w.reshape(X.shape[1] + 1, CLASSES)
        accuracy = np.mean(np.argmax(X_test @ W[:-1] + W[-1], axis=1) == y_test)
        return MetricRecord({"train-loss": loss, "test-accuracy": float(accuracy)})

    strategy = EEGradStrategy(
        budget=float(cfg["budget"]),
        c_min=float(cfg["c-min"]),
        aggregation=LinearAggregation(b=float(cfg["aggregation-per-client"])),
        rng=int(cfg["seed"]),
        min_available_nodes=int(cfg["min-nodes"]),
        csv_path=str(cfg["csv-path"]) or None,
    )
    strategy.start(grid=grid, initial_arrays=ArrayRecord({"w": Array(np.zeros(dim))}),
                   num_rounds=int(cfg["num-server-rounds"]), evaluate_fn=evaluate)  # fmt: skip
