"""The default against your FedAvg at your FedAvg's rate, on the bench's development settings
and seeds apart from the bench's own (the rule's development loop; never the held-out groups).

    python studies/safe_default.py --tuning results/bench/tuning.json [--departures 0 0.5]
        [--seeds 1002..1009] [--settings NAME ...] [--jobs 2]

Each setting runs your FedAvg and the default (``EEGradStrategy``'s rule when given none, or
with ``--departures`` its rule of the setting's mode, :class:`~eegrad.AnchoredPlan` or
:class:`~eegrad.AnchoredProgress`, at each ``departure``) at the rate ``tuning.json`` holds for
your FedAvg, on the same seeds, and prints the ratio of their mean final training losses with
its 95 % bootstrap interval over the seeds (:func:`eegrad.bench.report.ratio_interval`), the
worst round's ratio, every fifth round's n of the first seed, and the geometric mean over the
settings. A setting of a held-out group is refused: they judge a frozen rule.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def _run(name: str, method: str, seed: int, lr: float,
         departure: float | None) -> tuple[float, float, list[int]]:  # fmt: skip
    from eegrad.bench.runner import run_one
    from eegrad.bench.settings import SETTINGS
    from eegrad.selectors import AnchoredPlan, AnchoredProgress

    rule_class = None
    if departure is not None and method == "default":
        base = AnchoredProgress if SETTINGS[name].mode == "round" else AnchoredPlan

        class AtDeparture(base):
            def __init__(self, *args, **kw):
                kw["departure"] = departure
                super().__init__(*args, **kw)

        rule_class = AtDeparture
    rows, arms = run_one(name, method, seed, lr, rule_class=rule_class)
    worst = max(r["train_loss"] for r in rows if r["round"] > 0)
    return rows[-1]["train_loss"], worst, [a["n"] for a in arms]


def main() -> None:
    from joblib import Parallel, delayed

    from eegrad.bench.report import ratio_interval
    from eegrad.bench.settings import SETTINGS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tuning", required=True)
    p.add_argument("--departures", nargs="+", type=float, default=[None],
                   help="the default's departure values (default: the default as built)")
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
    todo = [(n, "guess", s, None) for n in names for s in args.seeds]
    todo += [(n, "default", s, a) for a in args.departures for n in names for s in args.seeds]
    out = Parallel(n_jobs=args.jobs)(delayed(_run)(n, m, s, rates[n], a) for n, m, s, a in todo)
    res = dict(zip(todo, out, strict=True))
    for a in args.departures:
        label = "default" if a is None else f"departure={a:g}"
        pairs = []
        for n in names:
            ours = [res[(n, "default", s, a)] for s in args.seeds]
            yours = [res[(n, "guess", s, None)] for s in args.seeds]
            f = (np.array([o[0] for o in ours]), np.array([y[0] for y in yours]))
            w = (np.array([o[1] for o in ours]), np.array([y[1] for y in yours]))
            r, lo, hi = ratio_interval([f])
            pairs.append(f)
            print(f"{label} {n:26s} {r:.3f} ({lo:.3f}-{hi:.3f}) worst "
                  f"{ratio_interval([w])[0]:.2f} n {ours[0][2][::5]}", flush=True)
        r, lo, hi = ratio_interval(pairs)
        print(f"{label} geometric mean {r:.3f} ({lo:.3f}-{hi:.3f})", flush=True)


if __name__ == "__main__":
    main()
