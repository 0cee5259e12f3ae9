"""The strategy's runs in every mode, written so that two versions of the code can be compared.

A change of structure must leave every run as it was: this script runs the default rule and
``FixedArm`` on short runs of every scorecard setting (per-round and total budget, NumPy and
PyTorch, central DP, wall clock), plus the modes the card does not run (secure sums, an inner
FedAdam, FedMedian, T rounds per step), on fixed seeds, and writes each run's records, the n of
every round, its evaluations and its final model to one JSON file::

    python benchmarks/equal_runs.py --out before.json         # on the code before a change
    python benchmarks/equal_runs.py --out after.json          # on the code after it
    python benchmarks/equal_runs.py --compare before.json after.json

``--compare`` prints every run that differs beyond float tolerance (relative 1e-12) and exits
non-zero where one does. Columns that one side has and the other lacks are listed, not failed:
a change may add a record column on purpose.

``--record-harness`` writes the fingerprint of the bench's harness for its version into
``tests/data/bench_harness.json`` (:mod:`eegrad.bench.fingerprint`): after a change of the
harness whose runs compared equal, or with :data:`eegrad.bench.runner.HARNESS` bumped.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

SEEDS = (0, 1)
ROUNDS, EVAL_EVERY = 8, 4


def _card_runs() -> dict[str, Any]:
    from eegrad import FixedArm
    from eegrad.examples import scorecard
    from eegrad.examples.scorecard_settings import SETTINGS

    out = {}
    for setting in SETTINGS:
        for seed in SEEDS:
            for name, candidate in (("default", None), ("fixed-3", {"selector": FixedArm(3)})):
                rows, arms = scorecard.run_one(setting, name, seed, rounds=ROUNDS,
                                               eval_every=EVAL_EVERY, candidate=candidate,
                                               quick=True)  # fmt: skip
                out[f"{setting}/{name}/seed{seed}"] = {
                    "evaluations": [[r["round"], r["cost"], r["train_loss"], r["test_accuracy"]]
                                    for r in rows],
                    "n": [a["n"] for a in arms]}  # fmt: skip
    return out


def _modes() -> dict[str, dict[str, Any]]:
    """The modes the card does not run: EEGradStrategy's keyword arguments."""
    from flwr.serverapp.strategy import FedAdam, FedMedian

    from eegrad import EEGrad, FixedArm

    base = {"budget": 40.0, "c_min": 1.5, "aggregation": lambda n: 0.5 * (n - 1.0)}
    return {
        "secure-sums/default": {**base, "secure_sums": True},
        "secure-sums/fixed-3": {**base, "secure_sums": True, "selector": FixedArm(3)},
        "fedadam/default": {**base, "strategy": FedAdam(eta=0.1, fraction_evaluate=0.0)},
        "fedmedian/default": {**base, "strategy": FedMedian(fraction_evaluate=0.0)},
        "t-rounds/default": {**base, "steps": "t-rounds", "T": 16},
        "t-rounds/eegrad": {**base, "steps": "t-rounds", "T": 16,
                            "selector": EEGrad(beta=4.0, P=1.0)},
        "damped/default": {**base, "damp_exploration": True},
        "total-sum/default": {"total_budget": 300.0, "cost_metric": "cost"},
        "total-slowest/fixed-3": {"total_budget": 300.0, "round_cost": "slowest",
                                  "cost_metric": "cost", "selector": FixedArm(3)},
    }


def _mode_runs() -> dict[str, Any]:
    from flwr.app import Array, ArrayRecord
    from flwr.clientapp import ClientApp

    from eegrad.flower import DeviceCost, EEGradStrategy, LocalGrid, budgeted_train
    from eegrad.flower.client import with_spread_sums

    K, D = 8, 4
    mu = np.random.default_rng(1).standard_normal((K, D))

    def gradient(arrays, b, context, config):
        pid = int(context.node_config["partition-id"])
        rng = np.random.default_rng([pid, int(config["server-round"])])
        return [arrays[0] - mu[pid] + rng.standard_normal(D) / np.sqrt(b)]

    def app(sums: bool) -> ClientApp:
        train = budgeted_train(gradient, DeviceCost(overhead=1.0, speed=2.0), lr=0.5)
        out = ClientApp()
        out.train()(with_spread_sums(train) if sums else train)
        return out

    out = {}
    for name, kwargs in _modes().items():
        for seed in SEEDS:
            s = EEGradStrategy(rng=seed, **kwargs)
            res = s.start(grid=LocalGrid(app(kwargs.get("secure_sums", False)), K, seed=2),
                          initial_arrays=ArrayRecord({"w": Array(np.zeros(D))}),
                          num_rounds=3 * ROUNDS)  # fmt: skip
            w = res.arrays["w"].numpy().tolist() if "w" in res.arrays else None  # none: lost
            out[f"{name}/seed{seed}"] = {"records": s.records, "w": w}
    return out


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12,
                                                                   abs_tol=1e-300)  # fmt: skip
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def compare(before: dict[str, Any], after: dict[str, Any]) -> int:
    """Print the runs that differ; the number of them."""
    differ = 0
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            print(f"{key}: only {'after' if a is None else 'before'}")
            differ += 1
            continue
        for field in sorted(set(a) | set(b)):
            x, y = a.get(field), b.get(field)
            if field == "records" and x is not None and y is not None:
                added = sorted(set(y[0]) - set(x[0])) if x and y else []
                removed = sorted(set(x[0]) - set(y[0])) if x and y else []
                if added or removed:
                    print(f"{key}: record columns added {added}, removed {removed}")
                common = [{k: v for k, v in r.items() if k in x[0] and k in y[0]} for r in x]
                y = [{k: v for k, v in r.items() if k in x[0] and k in y[0]} for r in y]
                x = common
            if not _close(_plain(x), _plain(y)):
                print(f"{key}: {field} differs")
                differ += 1
    print(f"{len(set(before) | set(after))} runs compared, {differ} differ")
    return differ


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return [[k, _plain(x[k])] for k in sorted(x)]
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    p.add_argument("--record-harness", action="store_true",
                   help="write the bench harness's fingerprint into tests/data/bench_harness.json")
    args = p.parse_args()
    if args.record_harness:
        from eegrad.bench.fingerprint import recorded_harness

        path = Path(__file__).resolve().parents[1] / "tests" / "data" / "bench_harness.json"
        path.write_text(json.dumps(recorded_harness(), indent=1) + "\n")
        print(f"wrote {path}")
        return
    if args.compare:
        before, after = (json.loads(f.read_text()) for f in args.compare)
        sys.exit(1 if compare(before, after) else 0)
    if args.out is None:
        p.error("give --out FILE or --compare BEFORE AFTER")
    import flwr.supercore  # noqa: F401 - Flower's logger set up, then quieted

    logging.getLogger("flwr").setLevel(logging.ERROR)
    runs = {**_mode_runs(), **_card_runs()}
    args.out.write_text(json.dumps(runs, default=float))
    print(f"{len(runs)} runs written to {args.out}")


if __name__ == "__main__":
    main()
