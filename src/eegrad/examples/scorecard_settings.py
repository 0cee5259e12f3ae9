r"""The federations of the scorecard (:mod:`eegrad.examples.scorecard`): one per setting.

Every setting is a Flower federation on scikit-learn's 8×8 handwritten digits (1,797 images,
one fifth held out for testing), split *non-iid* among K clients by a Dirichlet(0.3) law over
each label, with heterogeneous virtual devices (:class:`eegrad.flower.DeviceCost`: overhead
:math:`o_i`, speed :math:`s_i` samples per budget unit) and a per-round budget B = 100 shared by
the n clients asked as the paper's Section 2 has it: each gets :math:`(B - D(n))/n`. Each
setting changes one thing a Flower user's federation can differ in:

===================  =========================================================================
``fedsgd``           (a) softmax regression, K = 20, one local gradient step (FedSGD)
``local-steps``      (b) the same with 5 local steps on the samples the share buys
``overheads``        (c) K = 50 clients with heavy overheads o ~ U(4, 8) and D(n) = 1.5 (n − 1):
                     spending on more clients wastes budget, so the best n is inside the range
``cnn-e1``           (d) a PyTorch CNN, E = 1 full-batch local epoch on the subset the share buys
``cnn-e3``           (e) the same with E = 3 epochs
``mlp-minibatch``    (f) a PyTorch MLP, E = 2 epochs of mini-batches of 16, SGD with momentum 0.9
                     (as Flower's PyTorch quickstart trains): a larger share buys more local steps
``dp``               (g) central DP at ε = 8 (δ = 1e-5) among K = 200 clients: the default with
                     ``CentralDP("auto")`` against DP-FedAvg (Flower's own
                     ``DifferentialPrivacyServerSideFixedClipping``) at every fixed n, each at
                     the same ε by the end
``minibatch-drift``  (h) softmax regression, K = 20, mini-batches of 8 (a larger share buys
                     more local steps), 160 rounds: few clients win early, more as the noise
                     comes to dominate, so the best n changes during the run
===================  =========================================================================

Four more settings run the total-budget mode (``EEGradStrategy(total_budget=...)``): the
clients train as Flower's quickstarts do — E epochs over all of their own data, sent no share —
and a round of n costs what its clients report plus D(n); every method runs until the same
total budget is spent, FedAvg at a fixed n as Flower's own ``FedAvg`` inside
``EEGradStrategy(total_budget=..., selector=FixedArm(n))``:

===================  =========================================================================
``quickstart``       (i) a PyTorch CNN, one epoch over each client's data in mini-batches of 32,
                     SGD with momentum 0.9 (Flower's PyTorch quickstart); a client costs its
                     samples × 0.01 (``num-examples``), D(n) = 1 + 0.05 (n − 1)
``fixed-cost``       (j) softmax regression, two full-batch local epochs, the same client cost
                     and a fixed cost a round, D(n) = 4 + 0.05 (n − 1): rounds of few clients waste
                     it, so the best n is inside the range
``wall-clock``       (k) the same model with wall-clock cost: a round lasts as long as its
                     slowest client (samples / speed, a fifth of the clients 6× slower:
                     stragglers) plus 1 s of the server's
``long-budget``      (l) (j) with five times its budget: training reaches its noise floor, and
                     the best fixed n grows
===================  =========================================================================

A setting builds, for one seed, a :class:`Federation`: the ClientApp, the initial model, the
evaluation (the training loss on the pooled training data and the test accuracy), and the two
kinds of strategy — Flower's own ``FedAvg`` at a fixed n (with the share in its
``train_config``), and :class:`eegrad.flower.EEGradStrategy` as shipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from .._validation import fail
from ..arms import feasible_arms, per_client_spend
from ..costs import LinearAggregation
from .flower_dp import dp_fedavg, equal_weight
from .flower_setting import (
    _load,
    _method_id,
    _split,
    held_out,
    softmax_accuracy,
    softmax_loss_grad,
)

__all__ = ["SETTINGS", "Federation", "Setting", "check_settings", "federation"]

BUDGET = 100.0
DIRICHLET = "dirichlet-0.3"
DP_EPSILON = 8.0
DP_DELTA = 1e-5
DP_CLIP = 1.0


@dataclass(frozen=True)
class Setting:
    """One row of the scorecard: a name, what it tests, and how long it runs.

    ``rounds`` and ``quick_rounds``: server rounds of a run (all methods spend B a round, so
    equal rounds are equal total cost); ``eval_every``: rounds between evaluations (and the
    last round); ``kind``: the federation builder's key; ``options``: its keyword arguments.
    """

    name: str
    letter: str
    summary: str
    kind: str
    rounds: int
    quick_rounds: int
    eval_every: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    #: The run's total budget (the total-budget mode; ``rounds`` is then only a cap), or None.
    total_budget: float | None = None
    quick_total_budget: float | None = None

    def budget_for(self, quick: bool) -> float | None:
        """The total budget of a run (None: a per-round budget)."""
        return self.quick_total_budget if quick else self.total_budget

    @property
    def private(self) -> bool:
        """Whether the setting runs under central DP (its ``dp`` option)."""
        return bool(self.options.get("dp", False))


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("fedsgd", "a", "softmax, 20 clients, FedSGD", "softmax", 60, 20),
    Setting("local-steps", "b", "softmax, 20 clients, 5 local steps", "softmax", 60, 20,
            options={"local_steps": 5}),
    Setting("overheads", "c", "softmax, 50 clients, heavy overheads", "softmax", 60, 20,
            options={"K": 50, "overhead": (4.0, 8.0), "agg_per_client": 1.5}),
    Setting("cnn-e1", "d", "PyTorch CNN, E = 1 full-batch epoch", "torch", 40, 12,
            eval_every=4, options={"net": "cnn", "epochs": 1, "lr": 0.3}),
    Setting("cnn-e3", "e", "PyTorch CNN, E = 3 full-batch epochs", "torch", 40, 12,
            eval_every=4, options={"net": "cnn", "epochs": 3, "lr": 0.3}),
    Setting("mlp-minibatch", "f", "PyTorch MLP, E = 2 epochs of batches of 16, momentum 0.9",
            "torch", 40, 12, eval_every=4,
            options={"net": "mlp", "epochs": 2, "lr": 0.02, "batch_size": 16,
                     "momentum": 0.9}),
    Setting("dp", "g", "central DP, eps = 8, 200 clients", "softmax", 100, 30,
            options={"K": 200, "dp": True}),
    Setting("minibatch-drift", "h", "softmax, 20 clients, mini-batches of 8, a long run",
            "softmax", 160, 40, eval_every=2, options={"batch_size": 8, "lr": 0.3}),
    Setting("quickstart", "i", "PyTorch CNN, clients' own epoch in batches of 32, total budget",
            "torch-total", 5000, 5000, total_budget=150.0, quick_total_budget=40.0,
            options={"D0": 1.0}),
    Setting("fixed-cost", "j", "softmax, clients' own 2 epochs, D(1) = 4, total budget",
            "softmax-total", 5000, 5000, total_budget=400.0, quick_total_budget=100.0,
            options={"D0": 4.0}),
    Setting("wall-clock", "k", "softmax, wall clock: the slowest client, stragglers",
            "softmax-total", 5000, 5000, total_budget=600.0, quick_total_budget=150.0,
            options={"D0": 1.0, "wall_clock": True}),
    Setting("long-budget", "l", "softmax, clients' own 2 epochs, D(1) = 4, 5x (j)'s budget",
            "softmax-total", 5000, 5000, total_budget=2000.0, quick_total_budget=200.0,
            options={"D0": 4.0}),
)}  # fmt: skip


def check_settings(names: Any) -> list[str]:
    """The setting names, each checked against :data:`SETTINGS` (an unknown one is refused,
    listing the known ones)."""
    if isinstance(names, str):
        names = [names]
    out = []
    for name in names:
        if name not in SETTINGS:
            raise fail("settings", "eegrad.examples.scorecard",
                       f"names of known settings: {', '.join(SETTINGS)}", name)  # fmt: skip
        out.append(name)
    if not out:
        raise fail("settings", "eegrad.examples.scorecard", "at least one setting", names)
    return out


# -- the data ------------------------------------------------------------------------------------------
@lru_cache(maxsize=16)
def _digits(seed: int, K: int) -> dict[str, Any]:
    """8×8 digits: a fifth held out for testing, the rest split among K clients (Dirichlet 0.3)."""
    X, y = _load("digits")
    rng = np.random.default_rng([seed, 7])
    test = held_out(y.size, rng)
    clients = _split(y[~test], DIRICHLET, rng, K=K)
    return {"X": X[~test], "y": y[~test], "X_test": X[test], "y_test": y[test],
            "clients": clients}  # fmt: skip


def _sizes(clients: Any) -> tuple[int, ...]:
    """The clients' numbers of training samples (index arrays or tensors)."""
    return tuple(len(c) for c in clients)


# -- one seed's federation -----------------------------------------------------------------------------
@dataclass
class Federation:
    """What a run of one setting and seed needs.

    ``client_app()`` builds the ClientApp every node runs; ``initial()`` the model's
    ``ArrayRecord``; ``evaluate(arrays)`` gives (training loss on the pooled training data,
    test accuracy); ``fixed(n, method_id)`` Flower's strategy at a fixed n and its train
    config; ``default(rng)`` the :class:`~eegrad.flower.EEGradStrategy` as shipped;
    ``data_sizes`` each client's number of training samples, by partition id.
    """

    K: int
    N: int
    c_min: float
    aggregation: LinearAggregation
    client_app: Callable[[], Any]
    initial: Callable[[], Any]
    evaluate: Callable[[Any], tuple[float, float]]
    private: bool = False
    #: The total-budget mode: the run's budget and how a client's cost is read.
    total_budget: float | None = None
    total: dict[str, Any] = field(default_factory=dict)
    data_sizes: tuple[int, ...] = ()

    def share(self, n: int) -> float:
        """Each client's share (B − D(n))/n."""
        return float(per_client_spend(BUDGET, self.aggregation, n))

    def fixed(self, n: int, rounds: int) -> tuple[Any, dict[str, Any]]:
        """Flower's own FedAvg with n clients a round (DP-FedAvg at ε = 8 when private), and the
        config that carries the share to its clients."""
        from flwr.serverapp.strategy import FedAvg

        if n > self.N:
            raise fail("n", "Federation.fixed", f"<= N = {self.N}", n)
        if self.total_budget is not None:  # Flower's FedAvg at n, until the budget is spent
            from .. import FixedArm
            from ..flower import EEGradStrategy

            return EEGradStrategy(total_budget=self.total_budget, aggregation=self.aggregation,
                                  selector=FixedArm(n), strategy=FedAvg(fraction_evaluate=0.0),
                                  min_available_nodes=self.K, **self.total), {}  # fmt: skip
        config = {"budget-share": self.share(n)}
        if not self.private:
            return FedAvg(fraction_train=n / self.K, min_train_nodes=n,
                          min_available_nodes=self.K, fraction_evaluate=0.0), config  # fmt: skip
        strategy, _ = dp_fedavg(n, self.K, rounds, DP_EPSILON, DP_DELTA, DP_CLIP)
        return strategy, config

    def default(self, rng: Any, rounds: int, **kwargs: Any) -> Any:
        """:class:`~eegrad.flower.EEGradStrategy` as shipped (with ``CentralDP("auto")`` at
        ε = 8 when private); ``kwargs`` override its defaults (candidate rules)."""
        from ..flower import CentralDP, EEGradStrategy

        if self.total_budget is not None:
            return EEGradStrategy(total_budget=self.total_budget, aggregation=self.aggregation,
                                  rng=rng, min_available_nodes=self.K, **{**self.total, **kwargs})  # fmt: skip
        if self.private:
            kwargs.setdefault("privacy", CentralDP("auto", DP_CLIP, DP_DELTA,
                                                   max_epsilon=DP_EPSILON, rounds=rounds))  # fmt: skip
        return EEGradStrategy(BUDGET, self.c_min, aggregation=self.aggregation, rng=rng,
                              min_available_nodes=self.K, **kwargs)  # fmt: skip


def _devices(rng: np.random.Generator, K: int, overhead: tuple[float, float],
             speed: float) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    return rng.uniform(*overhead, K), speed * rng.lognormal(0.0, 0.5, K)


class _Batches:
    """Each client's batches: the k-th gradient call of a client in a round of a method draws
    from its own stream (seed, client, round, method, k), whatever ran before."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._calls: dict[tuple[int, int, int], int] = {}

    def draw(self, pid: int, config: Any, idx: np.ndarray, size: int) -> np.ndarray:
        key = (pid, int(config["server-round"]), int(config.get("method-id", 0)))
        if key[1:] != next(iter(self._calls), key)[1:]:
            self._calls.clear()  # a new round: the last one's counts are not needed
        k = self._calls.get(key, 0)
        self._calls[key] = k + 1
        if size >= idx.size:
            return idx
        return np.random.default_rng([self.seed, *key, k]).choice(idx, size, replace=False)


def _softmax(seed: int, *, K: int = 20, overhead: tuple[float, float] = (1.0, 3.0),
             speed: float = 2.0, agg_per_client: float = 0.5, local_steps: int = 1,
             lr: float = 0.5, batch_size: int | None = None, rounds: int = 60,
             dp: bool = False) -> Federation:  # fmt: skip
    """Softmax regression (λ = 1e-3) with FedSGD, local steps or mini-batches of
    ``batch_size`` (:func:`~eegrad.flower.budgeted_train`); ``dp``: equal weights (``num-updates`` = 1) for DP-FedAvg and the central-DP default."""
    from flwr.app import Array, ArrayRecord
    from flwr.clientapp import ClientApp

    from ..flower import DeviceCost, budgeted_train

    data = _digits(seed, K)
    rng = np.random.default_rng([seed, 11, K])
    o, s = _devices(rng, K, overhead, speed)
    agg = LinearAggregation(b=agg_per_client)
    c_min = float(np.max(o + 1.0 / s))
    N = min(feasible_arms(c_min, agg, BUDGET)[0], K)
    X, y, clients = data["X"], data["y"], data["clients"]
    batches = _Batches(seed)
    dim = (X.shape[1] + 1) * 10

    def gradient(arrays, size, context, config):
        pid = int(context.node_config["partition-id"])
        take = batches.draw(pid, config, clients[pid], size)
        return [softmax_loss_grad(arrays[0], X[take], y[take])[1]]

    def device(context, config):
        pid = int(context.node_config["partition-id"])
        return DeviceCost(float(o[pid]), float(s[pid]), max_samples=int(clients[pid].size))

    def client_app() -> Any:
        train = budgeted_train(gradient, device, lr=lr, local_steps=local_steps,
                               batch_size=batch_size)  # fmt: skip
        app = ClientApp()
        app.train()(equal_weight(train) if dp else train)
        return app

    def evaluate(arrays: Any) -> tuple[float, float]:
        w = arrays["w"].numpy()
        loss, _ = softmax_loss_grad(w, X, y)
        return float(loss), softmax_accuracy(w, data["X_test"], data["y_test"])

    return Federation(K, N, c_min, agg, client_app, lambda: ArrayRecord({"w": Array(np.zeros(dim))}),
                      evaluate, private=dp, data_sizes=_sizes(clients))  # fmt: skip


def _network(net: str) -> Any:
    from torch import nn

    if net == "cnn":  # 6·(9 + 1) + (54 + 1)·10 = 610 parameters
        return nn.Sequential(nn.Conv2d(1, 6, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(54, 10))  # fmt: skip
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def _torch_evaluate(net: str, X: Any, y: Any, X_test: Any,
                    y_test: Any) -> Callable[[Any], tuple[float, float]]:  # fmt: skip
    """(training loss on the pooled training data, test accuracy) of a model's arrays."""
    import torch
    import torch.nn.functional as F

    def evaluate(arrays: Any) -> tuple[float, float]:
        model = _network(net)
        model.load_state_dict(arrays.to_torch_state_dict())
        model.eval()
        with torch.no_grad():
            loss = float(F.cross_entropy(model(X), y))
            acc = float((model(X_test).argmax(dim=1) == y_test).float().mean())
        return loss, acc

    return evaluate


def _torch(seed: int, *, net: str, epochs: int, lr: float, batch_size: int | None = None,
           momentum: float = 0.0, K: int = 20, rounds: int = 60) -> Federation:  # fmt: skip
    """A PyTorch model trained by :func:`~eegrad.flower.budgeted_torch_train` (E local epochs
    on the subset the share buys; devices o ~ U(1, 3), s ~ 4·LogNormal(0, 0.5))."""
    import torch
    import torch.nn.functional as F
    from flwr.app import ArrayRecord
    from flwr.clientapp import ClientApp

    from ..flower import DeviceCost, budgeted_torch_train

    data = _digits(seed, K)
    rng = np.random.default_rng([seed, 11, K])
    o, s = _devices(rng, K, (1.0, 3.0), 4.0)
    agg = LinearAggregation(b=0.5)
    c_min = float(np.max(o + epochs / s))  # one sample for each of E epochs
    N = min(feasible_arms(c_min, agg, BUDGET)[0], K)
    X = torch.as_tensor(data["X"].reshape(-1, 1, 8, 8), dtype=torch.float32)
    y = torch.as_tensor(data["y"], dtype=torch.int64)
    X_test = torch.as_tensor(data["X_test"].reshape(-1, 1, 8, 8), dtype=torch.float32)
    y_test = torch.as_tensor(data["y_test"], dtype=torch.int64)
    clients = [torch.as_tensor(c, dtype=torch.int64) for c in data["clients"]]

    def local(context: Any, config: Any) -> tuple[Any, Any]:
        idx = clients[int(context.node_config["partition-id"])]
        return X[idx], y[idx]

    def device(context: Any, config: Any) -> DeviceCost:
        pid = int(context.node_config["partition-id"])
        return DeviceCost(float(o[pid]), float(s[pid]))

    def optimizer(params: Any) -> Any:
        return torch.optim.SGD(params, lr=lr, momentum=momentum)

    def client_app() -> Any:
        app = ClientApp()
        app.train()(budgeted_torch_train(lambda: _network(net), F.cross_entropy, local, device,
                                         epochs=epochs, batch_size=batch_size,
                                         optimizer=optimizer, seed=seed))  # fmt: skip
        return app

    def initial() -> Any:
        torch.manual_seed(seed)
        return ArrayRecord(_network(net).state_dict())

    return Federation(K, N, c_min, agg, client_app, initial,
                      _torch_evaluate(net, X, y, X_test, y_test), data_sizes=_sizes(clients))


PER_SAMPLE = 0.01  # the total-budget settings: a client's cost per sample it trained on


def _quickstart_epoch(seed: int, pid: int, config: Any) -> np.random.Generator:
    """A client's shuffle in a round of a method (its own stream, whatever ran before)."""
    return np.random.default_rng([seed, pid, int(config["server-round"]),
                                  int(config.get("method-id", 0)), 13])  # fmt: skip


def _softmax_total(seed: int, *, D0: float, K: int = 20, epochs: int = 2, lr: float = 0.5,
                   wall_clock: bool = False, total_budget: float,
                   rounds: int = 0) -> Federation:  # fmt: skip
    """Softmax regression whose clients train as a quickstart does: ``epochs`` full-batch
    epochs over all their own data, no share; a client costs its samples × :data:`PER_SAMPLE`
    (``num-examples``), or with ``wall_clock`` its seconds (samples × epochs / speed, a fifth of
    the clients 6× slower), and a round D(n) = D0 + 0.05 (n − 1) more."""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    data = _digits(seed, K)
    rng = np.random.default_rng([seed, 17, K])
    speed = 40.0 * rng.lognormal(0.0, 0.3, K)
    speed[rng.choice(K, K // 5, replace=False)] /= 6.0  # stragglers
    X, y, clients = data["X"], data["y"], data["clients"]
    dim = (X.shape[1] + 1) * 10

    def client_app() -> Any:
        app = ClientApp()

        @app.train()
        def train(msg: Any, context: Any) -> Any:  # a client that trains its own way
            pid = int(context.node_config["partition-id"])
            w = msg.content["arrays"]["w"].numpy().copy()
            idx = clients[pid]
            for _ in range(epochs):
                loss, g = softmax_loss_grad(w, X[idx], y[idx])
                w -= lr * g
            metrics = {"train_loss": float(loss), "num-examples": int(idx.size),
                       "seconds": float(idx.size * epochs / speed[pid])}  # fmt: skip
            return Message(RecordDict({"arrays": ArrayRecord({"w": Array(w)}),
                                       "metrics": MetricRecord(metrics)}), reply_to=msg)  # fmt: skip

        return app

    def evaluate(arrays: Any) -> tuple[float, float]:
        w = arrays["w"].numpy()
        loss, _ = softmax_loss_grad(w, X, y)
        return float(loss), softmax_accuracy(w, data["X_test"], data["y_test"])

    total = ({"cost_metric": "seconds", "round_cost": "slowest"} if wall_clock else
             {"cost_metric": "num-examples", "cost_scale": PER_SAMPLE})  # fmt: skip
    return Federation(K, K, 0.0, LinearAggregation(b=0.05, fixed=D0), client_app,
                      lambda: ArrayRecord({"w": Array(np.zeros(dim))}), evaluate,
                      total_budget=total_budget, total=total,
                      data_sizes=_sizes(data["clients"]))  # fmt: skip


def _torch_total(seed: int, *, D0: float, K: int = 20, lr: float = 0.05,
                 total_budget: float, rounds: int = 0) -> Federation:  # fmt: skip
    """Flower's PyTorch quickstart's client: one epoch over all its data in mini-batches of
    32, SGD with momentum 0.9, no share; a client costs its samples × :data:`PER_SAMPLE`, a
    round D(n) = D0 + 0.05 (n − 1) more."""
    import torch
    import torch.nn.functional as F
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    data = _digits(seed, K)
    X = torch.as_tensor(data["X"].reshape(-1, 1, 8, 8), dtype=torch.float32)
    y = torch.as_tensor(data["y"], dtype=torch.int64)
    X_test = torch.as_tensor(data["X_test"].reshape(-1, 1, 8, 8), dtype=torch.float32)
    y_test = torch.as_tensor(data["y_test"], dtype=torch.int64)
    clients = data["clients"]

    def client_app() -> Any:
        app = ClientApp()

        @app.train()
        def train(msg: Any, context: Any) -> Any:  # the quickstart's train, unchanged
            pid = int(context.node_config["partition-id"])
            config = msg.content["config"]
            net = _network("cnn")
            net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
            opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
            idx = clients[pid][_quickstart_epoch(seed, pid, config).permutation(clients[pid].size)]
            total = 0.0
            for i in range(0, idx.size, 32):
                batch = torch.as_tensor(idx[i:i + 32])
                opt.zero_grad()
                loss = F.cross_entropy(net(X[batch]), y[batch])
                loss.backward()
                opt.step()
                total += loss.item() * batch.numel()
            metrics = {"train_loss": total / idx.size, "num-examples": int(idx.size)}
            return Message(RecordDict({"arrays": ArrayRecord(net.state_dict()),
                                       "metrics": MetricRecord(metrics)}), reply_to=msg)  # fmt: skip

        return app

    def initial() -> Any:
        torch.manual_seed(seed)
        return ArrayRecord(_network("cnn").state_dict())

    return Federation(K, K, 0.0, LinearAggregation(b=0.05, fixed=D0), client_app, initial,
                      _torch_evaluate("cnn", X, y, X_test, y_test), total_budget=total_budget,
                      total={"cost_metric": "num-examples", "cost_scale": PER_SAMPLE},
                      data_sizes=_sizes(data["clients"]))  # fmt: skip


_BUILDERS = {"softmax": _softmax, "torch": _torch, "softmax-total": _softmax_total,
             "torch-total": _torch_total}  # fmt: skip


def federation(name: str, seed: int, rounds: int, quick: bool = False) -> Federation:
    """The federation of setting ``name`` for ``seed`` (runs of ``rounds`` rounds; a
    total-budget setting's budget is its quick one with ``quick``)."""
    setting = SETTINGS[check_settings(name)[0]]
    extra = {} if setting.total_budget is None else {"total_budget": setting.budget_for(quick)}
    return _BUILDERS[setting.kind](seed, rounds=rounds, **setting.options, **extra)


def method_id(setting: str, method: str) -> int:
    """A stable integer per (setting, method), for the clients' and the server's streams."""
    return _method_id(f"{setting}/{method}")
