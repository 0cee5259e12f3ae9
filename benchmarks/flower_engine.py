"""A bench setting on Flower's own simulation engine (``flwr.simulation.run_simulation``, its
Ray backend) beside the in-process grid the bench runs on, and beside Flower's FedAvg on the
same engine.

For each seed, eegrad's default (the bench's strategy for the setting, its tuned or given
learning rate) and Flower's ``FedAvg`` at the guessed n (your FedAvg) run R rounds on the
engine, with K simulated SuperNodes; eegrad's default also runs on the bench's ``LocalGrid``.
The node ids differ between the two grids, so the clients sampled differ: the final losses are
compared in distribution (their mean difference over the seeds and its 95 % interval,
Welch's). The server's side is measured on the engine over rounds 2 to R (the first imports and
compiles what the rule runs): the server process's CPU seconds a round (the clients train in
Ray's worker processes) and the peak of its Python allocations (``tracemalloc``) above what it
held after round 1, against FedAvg's. The run's budget is what your FedAvg spends in the R
rounds given::

    python benchmarks/flower_engine.py --setting chem97-softmax-1000 --seeds 5 --rounds 8 \\
        --lr 0.3 --out results/flower_engine.json
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np


def run_federation(setting: str, seed: int, rounds: int) -> Any:
    """The setting's federation for ``seed`` run for ``rounds`` rounds: its total budget what
    your FedAvg spends in those rounds (the setting's budget is R rounds' spend), so that the
    default and your FedAvg spend alike."""
    from dataclasses import replace

    from eegrad.bench.runner import federation

    fed = federation(setting, seed)
    if fed.setting.mode == "round":  # B a round: the same whatever the rounds
        return replace(fed, rounds=rounds)
    return replace(fed, budget=fed.budget * rounds / fed.rounds, rounds=rounds)


def on_engine(setting: str, method: str, seed: int, rounds: int, lr: float) -> dict[str, Any]:
    """One run through ``run_simulation``: the final loss and accuracy, and over rounds 2 to R
    (after the first, which imports and compiles what the rule runs) the server process's CPU
    seconds a round and the peak of its traced allocations above what it held after round 1
    (bytes)."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, Context
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg
    from flwr.simulation import run_simulation

    from eegrad.bench.methods import guess_n
    from eegrad.bench.runner import _client_app, _strategy

    fed = run_federation(setting, seed, rounds)
    out: dict[str, Any] = {}
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        if method == "fedavg":
            import random

            random.seed(seed * 1_000_003 + 1)
            strategy = FedAvg(fraction_train=guess_n(fed.K) / fed.K, fraction_evaluate=0.0,
                              min_available_nodes=fed.K)  # fmt: skip
        else:
            strategy = _strategy(fed, method, seed)
        w0 = ArrayRecord({"w": Array(fed.model.initial(seed))})
        marks: dict[int, tuple[float, int]] = {}

        def mark(server_round: int, arrays: ArrayRecord) -> None:
            """At the end of round 1 (the rule's kernels compiled, its modules imported):
            the CPU time and the traced allocations the later rounds are measured from."""
            if server_round == 1:
                marks[1] = (time.process_time(), tracemalloc.get_traced_memory()[0])
                tracemalloc.reset_peak()

        tracemalloc.start()
        res = strategy.start(grid=grid, initial_arrays=w0, num_rounds=rounds,
                             train_config=ConfigRecord({"lr": float(lr)}),
                             evaluate_fn=mark)  # fmt: skip
        cpu, held = marks[1]
        out["cpu_per_round"] = (time.process_time() - cpu) / (rounds - 1)
        out["peak_bytes"] = tracemalloc.get_traced_memory()[1] - held
        out["clients_a_round"] = (guess_n(fed.K) if method == "fedavg" else  # rounds 2..R
                                  float(np.mean([r["clients_asked"]
                                                 for r in strategy.records[1:]])))  # fmt: skip
        tracemalloc.stop()
        out["loss"], out["accuracy"] = fed.evaluate(res.arrays["w"].numpy())

    run_simulation(server_app=app, client_app=_client_app(fed), num_supernodes=fed.K,
                   backend_config={"client_resources": {"num_cpus": 1}})  # fmt: skip
    return out


def on_local_grid(setting: str, seed: int, rounds: int, lr: float) -> dict[str, Any]:
    """The same default run on the bench's in-process grid."""
    from flwr.app import Array, ArrayRecord, ConfigRecord

    from eegrad.bench.runner import _client_app, _strategy
    from eegrad.flower import LocalGrid

    fed = run_federation(setting, seed, rounds)
    strategy = _strategy(fed, "default", seed)
    res = strategy.start(grid=LocalGrid(_client_app(fed), fed.K),
                         initial_arrays=ArrayRecord({"w": Array(fed.model.initial(seed))}),
                         num_rounds=rounds, train_config=ConfigRecord({"lr": float(lr)}))  # fmt: skip
    loss, acc = fed.evaluate(res.arrays["w"].numpy())
    return {"loss": loss, "accuracy": acc}


def _welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """Mean of a − b and the half-width of its 95 % interval (Welch)."""
    from scipy import stats

    a, b = np.asarray(a), np.asarray(b)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return float(a.mean() - b.mean()), float(stats.t.ppf(0.975, df) * math.sqrt(va + vb))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setting", default="chem97-softmax-1000")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--rounds", type=int, default=8, help="R, at least 2")
    p.add_argument("--lr", type=float, default=0.3)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    logging.getLogger("flwr").setLevel(logging.ERROR)
    runs: dict[str, list[dict[str, Any]]] = {"engine": [], "fedavg": [], "local": []}
    for seed in range(a.seeds):
        runs["engine"].append(on_engine(a.setting, "default", seed, a.rounds, a.lr))
        runs["fedavg"].append(on_engine(a.setting, "fedavg", seed, a.rounds, a.lr))
        runs["local"].append(on_local_grid(a.setting, seed, a.rounds, a.lr))
        print(f"seed {seed}: " + "; ".join(f"{k} loss {v[-1]['loss']:.4f}"
                                           for k, v in runs.items()), flush=True)  # fmt: skip
    d, h = _welch([r["loss"] for r in runs["engine"]], [r["loss"] for r in runs["local"]])
    print(f"\n{a.setting}, {a.rounds} rounds, {a.seeds} seeds, client lr {a.lr:g}\n")
    print("| run | final loss (mean) | accuracy (mean) | clients a round (2..R) | server CPU s a "
          "round (2..R) | server CPU ms a client | peak server allocations above round 1's (MB) |")
    print("|---|---|---|---|---|---|---|")
    for key, label in (("engine", "default, Flower's engine"),
                       ("local", "default, the bench's LocalGrid"),
                       ("fedavg", "Flower's FedAvg (your n), Flower's engine")):  # fmt: skip
        rs = runs[key]
        if "cpu_per_round" in rs[0]:
            n = np.mean([r["clients_a_round"] for r in rs])
            cpu = np.mean([r["cpu_per_round"] for r in rs])
            server = (f"{n:.1f} | {cpu:.3f} | {1e3 * cpu / n:.1f} | "
                      f"{np.mean([r['peak_bytes'] for r in rs]) / 2**20:.1f}")
        else:
            server = "— | — | — | —"
        print(f"| {label} | {np.mean([r['loss'] for r in rs]):.4f} | "
              f"{np.mean([r['accuracy'] for r in rs]):.4f} | {server} |")
    print(f"\nengine − LocalGrid, final loss: {d:+.4f} ± {h:.4f} (95 %, Welch): "
          f"{'equal in distribution at this size' if abs(d) <= h else 'different'}")
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"setting": a.setting, "rounds": a.rounds, "lr": a.lr,
                                     "runs": runs, "difference": [d, h]}, indent=1))


if __name__ == "__main__":
    main()
