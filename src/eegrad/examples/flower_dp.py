r"""Central DP in Flower: EE-Grad's strategy against DP-FedAvg at every fixed n, at equal ε.

The setting of ``eegrad example flower --quick`` — softmax regression (λ = 1e-3) on
scikit-learn's 8×8 digits (d = 650), FedSGD (client step 0.5), devices with overhead
o_i ~ U(1, 3) and speed s_i ~ 2·LogNormal(0, 0.5), B = 100 per round, D(n) = 0.5 (n − 1) — with
the population of a private federation: K = 200 clients (Dirichlet 0.3 over labels, ≈ 7 digits
each), so that a round samples n/K of them. (On MNIST-5k, d = 7,850: at ε = 8 over 100 rounds
the noise's norm, :math:`zC\sqrt d/n`, is 7–40× that of a clipped update at every n, and no
method learns.) Every method releases, each round, the mean of the n clipped updates
(clipping norm C) plus Gaussian noise of SD zC/n, and every method spends, by the end, the same
ε (``epsilon``, at δ = 1e-5; RDP with sampling without replacement, Flower's accountant):

* ``dp-fedavg-<n>`` — Flower's ``FedAvg`` with equal weights inside Flower's own
  ``DifferentialPrivacyServerSideFixedClipping(num_sampled_clients=n)``: n clients every round,
  its noise multiplier :math:`z_n` set (by bisection, :func:`eegrad.flower.calibrate_noise`)
  so that R rounds of n spend exactly ε;
* ``default`` — :class:`eegrad.flower.EEGradStrategy` as shipped, with
  ``privacy=CentralDP("auto", C, δ, max_epsilon=ε, rounds=R)``: every n costs the same privacy
  per round (the same :math:`z_n` as ``dp-fedavg-<n>``), and n is chosen every round by
  :class:`eegrad.SpreadThompson`, told the release's noise :math:`d(z_nC/n)^2` exactly. A run
  that mixes client counts can spend ε a little faster than one n; it stops before the round
  that would take ε past the limit, so its cost is at most the others'.

Each run writes one row per round to ``flower_dp.csv``: ``method,seed,step,cost,objective_gap,
clients,noise_std,epsilon``. The summary compares the default with every fixed n by the final
objective gap (the mean over the last 10% of the rounds each run made, then over seeds).
"""

from __future__ import annotations

import logging
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_integer, check_real, fail
from ..arms import feasible_arms, per_client_spend
from ..results import environment, write_json, write_table
from .flower import final_gaps
from .flower_setting import (
    AGGREGATION,
    BUDGET,
    CLIENT_LR,
    _load,
    _method_id,
    _split,
    softmax_loss_grad,
)

__all__ = ["COLUMNS", "dp_fedavg", "equal_weight", "main", "run", "summarise"]

COLUMNS = ("method", "seed", "step", "cost", "objective_gap", "clients", "noise_std", "epsilon")
K_CLIENTS = 200
DATASET = "digits"
SPLIT = "dirichlet-0.3"
DELTA = 1e-5
CLIP = 1.0


@lru_cache(maxsize=4)
def federation(seed: int) -> dict[str, Any]:
    """The data, the K clients' partitions and devices of one seed, and F* (cached)."""
    from scipy.optimize import minimize

    X, y = _load(DATASET)
    rng = np.random.default_rng([seed, 7])
    test = np.zeros(y.size, bool)
    test[rng.choice(y.size, y.size // 5, replace=False)] = True
    Xtr, ytr = X[~test], y[~test]
    clients = _split(ytr, SPLIT, rng, K=K_CLIENTS)
    overhead = rng.uniform(1.0, 3.0, K_CLIENTS)
    speed = 2.0 * rng.lognormal(0.0, 0.5, K_CLIENTS)
    res = minimize(softmax_loss_grad, np.zeros((X.shape[1] + 1) * 10), args=(Xtr, ytr),
                   jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "gtol": 1e-10, "ftol": 1e-15})  # fmt: skip
    c_min = float(np.max(overhead + 1.0 / speed))
    N = min(feasible_arms(c_min, AGGREGATION, BUDGET)[0], K_CLIENTS)
    return {"X": Xtr, "y": ytr, "clients": clients, "overhead": overhead, "speed": speed,
            "f_star": float(res.fun), "c_min": c_min, "N": N}  # fmt: skip


def client_app() -> Any:
    """The ClientApp: FedSGD on the client's partition under its share, replying an equal
    weight (``num-updates`` = 1) for DP-FedAvg."""
    from flwr.clientapp import ClientApp

    from ..flower import DeviceCost, budgeted_train

    def gradient(arrays, batch_size, context, config):
        fed = federation(int(config["data-seed"]))
        pid = int(context.node_config["partition-id"])
        idx = fed["clients"][pid]
        rnd = np.random.default_rng([int(config["data-seed"]), pid, int(config["server-round"]),
                                     int(config.get("method-id", 0))])  # fmt: skip
        take = idx if batch_size >= idx.size else rnd.choice(idx, batch_size, replace=False)
        return [softmax_loss_grad(arrays[0], fed["X"][take], fed["y"][take])[1]]

    def device(context, config):
        fed = federation(int(config["data-seed"]))
        i = int(context.node_config["partition-id"])
        return DeviceCost(float(fed["overhead"][i]), float(fed["speed"][i]),
                          max_samples=int(fed["clients"][i].size))  # fmt: skip

    app = ClientApp()
    app.train()(equal_weight(budgeted_train(gradient, device, lr=CLIENT_LR)))
    return app


def equal_weight(train: Any) -> Any:
    """A train function whose replies also carry ``num-updates`` = 1, the equal weight
    DP-FedAvg averages with (:func:`dp_fedavg`)."""

    def reply(msg: Any, context: Any) -> Any:
        out = train(msg, context)
        out.content["metrics"]["num-updates"] = 1
        return out

    return reply


def dp_fedavg(n: int, population: int, rounds: int, epsilon: float, delta: float = DELTA,
              clip: float = CLIP) -> tuple[Any, float]:  # fmt: skip
    """DP-FedAvg at a fixed n: Flower's ``FedAvg`` with equal weights (``num-updates``) in
    Flower's ``DifferentialPrivacyServerSideFixedClipping``, its noise multiplier z calibrated
    so that ``rounds`` rounds of n of ``population`` spend ``epsilon`` at ``delta`` (as
    ``CentralDP("auto")``, to 0.1 %); returns (the strategy, z)."""
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg

    from ..flower.privacy import calibrate_noise

    # updates clipped to C alone: replacing one client moves the sum by up to 2C
    z = calibrate_noise(n, rounds, epsilon, delta, population, sensitivity=2.0)
    inner = FedAvg(fraction_train=n / population, min_train_nodes=n,
                   min_available_nodes=population, fraction_evaluate=0.0,
                   weighted_by_key="num-updates")  # fmt: skip
    return DifferentialPrivacyServerSideFixedClipping(inner, z, clip, n), z


def run_one(method: str, seed: int, rounds: int, target: float) -> list[dict[str, Any]]:
    """One private federation on an in-process grid; its rows."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord

    from ..flower import CentralDP, EEGradStrategy, LocalGrid
    from ..flower.privacy import epsilon_spent

    fed = federation(seed)
    rows: list[dict[str, Any]] = []
    state: dict[str, Any] = {}

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        if server_round == 0:
            return MetricRecord({})
        f, _ = softmax_loss_grad(arrays["w"].numpy(), fed["X"], fed["y"])
        rec = state["records"]()
        rows.append({"method": method, "seed": seed, "step": server_round,
                     "cost": server_round * BUDGET, "objective_gap": f - fed["f_star"], **rec})
        return MetricRecord({"objective-gap": f - fed["f_star"]})

    config = {"data-seed": seed, "method-id": _method_id(method)}
    if method.startswith("dp-fedavg-"):
        n = int(method.rsplit("-", 1)[1])
        import random

        random.seed(seed * 1_000_003 + n)  # FedAvg samples with Python's random module
        np.random.seed([seed, n])  # noqa: NPY002 - Flower's DP noise draws from NumPy's global stream
        strategy, z = dp_fedavg(n, K_CLIENTS, rounds, target)
        config["budget-share"] = float(per_client_spend(BUDGET, AGGREGATION, n))

        def fixed_records() -> dict[str, Any]:
            rnd = len(rows) + 1  # ε every 10th round and at the last (an accountant's query
            # costs about 0.1 s): R rounds of z_n spend the target by construction
            eps = epsilon_spent(z, n, rnd, DELTA, K_CLIENTS, sensitivity=2.0) if rnd % 10 == 0 or rnd == rounds else ""
            return {"clients": n, "noise_std": z * CLIP / n, "epsilon": eps}

        state["records"] = fixed_records
    elif method == "default":
        dp = CentralDP("auto", CLIP, DELTA, max_epsilon=target, rounds=rounds)
        strategy = EEGradStrategy(BUDGET, fed["c_min"], aggregation=AGGREGATION, privacy=dp,
                                  rng=np.random.SeedSequence([seed, _method_id(method)]),
                                  min_available_nodes=K_CLIENTS)  # fmt: skip

        def default_records() -> dict[str, Any]:
            r = strategy.records[-1]
            return {"clients": r["arm"], "noise_std": r["noise_std"], "epsilon": r["epsilon"]}

        state["records"] = default_records
    else:
        raise fail("method", "eegrad.examples.flower_dp", "'default' or 'dp-fedavg-<n>'", method)
    initial = ArrayRecord({"w": Array(np.zeros((fed["X"].shape[1] + 1) * 10))})
    strategy.start(grid=LocalGrid(client_app(), K_CLIENTS), initial_arrays=initial,
                   num_rounds=rounds, train_config=ConfigRecord(config),
                   evaluate_fn=evaluate)  # fmt: skip
    return rows


def _job(method: str, seed: int, rounds: int, target: float,
         progress: bool) -> list[dict[str, Any]]:  # fmt: skip
    import flwr.app  # noqa: F401 - Flower sets its logger's level when first imported

    logging.getLogger("flwr").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    rows = run_one(method, seed, rounds, target)
    if progress:
        last = rows[-1]
        print(f"  seed {seed} {method}: {len(rows)} rounds, final gap "
              f"{last['objective_gap']:.4g}, ε {last['epsilon']:.3g} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
    return rows


def run(seeds: list[int], *, rounds: int, target: float, jobs: int = 1, progress: bool = False,
        fixed: list[int] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Every method and seed, the fixed n up to the least N of the seeds; rows of
    :data:`COLUMNS`. Each federation is seeded by its own (seed, method), so the rows are the
    same whatever ``jobs`` (joblib's loky processes)."""
    import joblib

    # The fixed n that every seed's federation affords (N depends on its devices): each is
    # then compared over all the seeds.
    N = min(federation(s)["N"] for s in seeds)
    ns = [n for n in (fixed or range(1, N + 1)) if n <= N]
    todo = [(m, s) for s in seeds for m in ["default", *[f"dp-fedavg-{n}" for n in ns]]]
    parts = joblib.Parallel(n_jobs=jobs, backend="loky")(
        joblib.delayed(_job)(m, s, rounds, target, progress) for m, s in todo)
    return [r for part in parts for r in part]


def summarise(rows: list[dict[str, Any]], last: float = 0.1) -> dict[str, Any]:
    """The default's final gap (mean of the last ``last`` of each run's rounds, then over
    seeds) against the best and the median fixed n."""
    gaps = final_gaps(rows, last)
    fed = {m: v for m, v in gaps.items() if m.startswith("dp-fedavg-")}
    order = sorted(fed, key=lambda m: fed[m][0])
    median = float(np.median([fed[m][0] for m in order]))
    default = gaps["default"][0]
    rounds_run = [sum(1 for r in rows if r["method"] == "default" and r["seed"] == s)
                  for s in sorted({r["seed"] for r in rows})]
    return {"final_gap": gaps, "best_fixed": order[0], "median_fixed_gap": median,
            "default_over_best": default / fed[order[0]][0],
            "default_below_median": default <= median,
            "default_rounds": [min(rounds_run), max(rounds_run)]}  # fmt: skip


def main(out: str | Path = "results/flower_dp", *, seeds: int = 10, rounds: int = 100,
         target: float = 8.0, jobs: int = -1, fixed: list[int] | None = None,
         progress: bool = True) -> dict[str, Any]:  # fmt: skip
    """Run the comparison; write ``flower_dp.csv`` and ``metadata.json``; print the table."""
    owner = "eegrad.examples.flower_dp.main"
    seeds = check_integer(seeds, "seeds", owner, ge=1)
    rounds = check_integer(rounds, "rounds", owner, ge=1)
    target = check_real(target, "target", owner, gt=0)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = run(list(range(seeds)), rounds=rounds, target=target, jobs=jobs, progress=progress,
               fixed=fixed)  # fmt: skip
    write_table(out / "flower_dp.csv", rows, COLUMNS)
    summary = summarise(rows)
    import flwr

    write_json(out / "metadata.json", {
        "example": "flower-dp", "seeds": seeds, "rounds": rounds, "epsilon": target,
        "delta": DELTA, "clipping_norm": CLIP, "clients": K_CLIENTS, "budget": BUDGET,
        "dataset": DATASET, "split": SPLIT, "summary": summary,
        "versions": {**environment(), "flwr": flwr.__version__},
        "wall_time_s": time.perf_counter() - t0})  # fmt: skip
    if progress:
        print(f"\nfinal objective gap at ε = {target:g} (δ = {DELTA:g}), mean of the last 10% "
              "of each run's rounds, ± SE over seeds:")  # fmt: skip
        for m, (g, se, k) in sorted(summary["final_gap"].items(), key=lambda kv: kv[1][0]):
            print(f"  {m:>14}: {g:.4f} ± {se:.4f}  ({k} seeds)")
        print(f"  best fixed n: {summary['best_fixed']}; median fixed-n gap "
              f"{summary['median_fixed_gap']:.4f}; default / best = "
              f"{summary['default_over_best']:.3f}; the default ran "
              f"{summary['default_rounds'][0]}–{summary['default_rounds'][1]} rounds")  # fmt: skip
    return summary
