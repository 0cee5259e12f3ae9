"""The label-skewed app of ``studies/label_skew_app`` in this process: FedAvg against eegrad's
choose_clients on the same federation, seeds and rate.

    python studies/label_skew_local.py --seeds 5 [--lr 0.05] [--rounds 15] [--fraction 0.3]

Each run is the app's own server and client (:mod:`label_skew.server_app`), its grid Flower's
messages delivered in this process (:class:`eegrad.flower.LocalGrid`); it prints, per strategy,
the final test loss and accuracy and the worst round's test loss (mean over seeds, with each
seed's), and eegrad's n of every round. ``flwr run studies/label_skew_app`` runs the same app
under Flower's simulation engine.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np
import tomllib

APP = Path(__file__).resolve().parent / "label_skew_app"
sys.path.insert(0, str(APP))


def config(**overrides) -> dict:
    with open(APP / "pyproject.toml", "rb") as fh:
        base = tomllib.load(fh)["tool"]["flwr"]["app"]["config"]
    return {**base, **overrides}


def run_one(strategy: str, seed: int, options: dict | None = None,
            **overrides) -> tuple[list[dict], list[int]]:
    from label_skew.client_app import app as client_app
    from label_skew.server_app import run

    from eegrad.flower import LocalGrid

    cfg = config(strategy=strategy, seed=seed, **overrides)
    grid = LocalGrid(client_app, 20, seed=seed, run_config=cfg)
    rows, s = run(grid, cfg, **(options or {}))
    arms = [r["arm"] for r in s.records] if hasattr(s, "records") else []
    return rows, arms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--lr", type=float)
    p.add_argument("--rounds", type=int)
    p.add_argument("--fraction", type=float)
    p.add_argument("--strategies", nargs="+", default=["fedavg", "eegrad"])
    p.add_argument("--selector", help="module:factory of a study's rule for eegrad")
    args = p.parse_args()
    import flwr.supercore  # noqa: F401 - Flower's logger set up, then quieted

    logging.getLogger("flwr").setLevel(logging.ERROR)
    over = {k: v for k, v in (("lr", args.lr), ("num-server-rounds", args.rounds),
                              ("fraction-train", args.fraction)) if v is not None}
    for strategy in args.strategies:
        final, acc, worst = [], [], []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            options = None
            if args.selector and strategy == "eegrad":
                import importlib

                mod, name = args.selector.split(":")
                options = {"selector": getattr(importlib.import_module(mod), name)()}
            rows, arms = run_one(strategy, seed, options, **over)
            final.append(rows[-1]["loss"])
            acc.append(rows[-1]["accuracy"])
            worst.append(max(r["loss"] for r in rows if r["round"] > 0))
            if arms:
                print(f"  {strategy} seed {seed}: n = {arms}")
        print(f"{strategy}: final loss {np.mean(final):.3f} {np.round(final, 2).tolist()}, "
              f"accuracy {np.mean(acc):.3f}, worst round's loss {np.mean(worst):.3f} "
              f"{np.round(worst, 2).tolist()}", flush=True)


if __name__ == "__main__":
    main()
