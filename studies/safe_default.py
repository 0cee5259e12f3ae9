"""The default against your FedAvg at your FedAvg's rate, on the bench's development settings
and seeds apart from the bench's own (the rule's development loop; never the held-out groups).

    python studies/safe_default.py --tuning results/bench/tuning.json [--seeds 1002..1009]
        [--settings NAME ...] [--jobs 2]

Each setting runs your FedAvg and the default (``EEGradStrategy``'s rule when given none) at
the rate ``tuning.json`` holds for your FedAvg, on the same seeds, and prints the ratio of
their mean final training losses with its 95 % bootstrap interval over the seeds, the worst
round's ratio, and the geometric mean over the settings (:func:`eegrad.bench.report.
ratio_interval`). A setting of a held-out group is refused: they judge a frozen rule.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def _run(name: str, method: str, seed: int, lr: float) -> tuple[float, float, list[int]]:
    from eegrad.bench.runner import run_one

    rows, arms = run_one(name, method, seed, lr)
    worst = max(r["train_loss"] for r in rows if r["round"] > 0)
    return rows[-1]["train_loss"], worst, [a["n"] for a in arms]


def main() -> None:
    from joblib import Parallel, delayed

    from eegrad.bench.report import ratio_interval
    from eegrad.bench.settings import SETTINGS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tuning", required=True)
    p.add_argument("--seeds", nargs="+", type=int, default=list(range(1002, 1010)))
    p.add_argument("--settings", nargs="+")
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    with open(args.tuning) as fh:
        rates = json.load(fh)["your_rate"]
    names = args.settings or [n for n, s in SETTINGS.items() if s.split == "development"]
    for n in names:
        if SETTINGS[n].split != "development":
            sys.exit(f"{n} is a held-out setting: the development loop runs none")
    todo = [(n, m, s) for n in names for m in ("guess", "default") for s in args.seeds]
    out = Parallel(n_jobs=args.jobs)(delayed(_run)(n, m, s, rates[n]) for n, m, s in todo)
    res = {k: v for k, v in zip(todo, out, strict=True)}
    pairs = []
    for n in names:
        f = {m: np.array([res[(n, m, s)][0] for s in args.seeds]) for m in ("guess", "default")}
        w = {m: np.array([res[(n, m, s)][1] for s in args.seeds]) for m in ("guess", "default")}
        r, lo, hi = ratio_interval([(f["default"], f["guess"])])
        wr = ratio_interval([(w["default"], w["guess"])])[0]
        pairs.append((f["default"], f["guess"]))
        print(f"{n:28s} {r:.3f} ({lo:.3f}-{hi:.3f})  worst {wr:.2f}  n {res[(n, 'default', args.seeds[0])][2][::6]}")
    r, lo, hi = ratio_interval(pairs)
    print(f"{'geometric mean':28s} {r:.3f} ({lo:.3f}-{hi:.3f})")


if __name__ == "__main__":
    main()
