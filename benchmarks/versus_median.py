"""The default against the median fixed n of a card, paired by seed (the issue's "never worse
than a blind guess"), from a card's saved runs.

The card's table gives the default's mean over the median fixed n's; this prints the paired
difference, seed by seed, to the median fixed n (the mean of the two middle ones where the
card has an even number), in % of the best fixed n's loss, ± its standard error over the seeds.
With ``--before STORE``, the same for that store's default (the runs of an earlier default, on
the same seeds and the same fixed n), and the two defaults' own paired difference::

    python benchmarks/versus_median.py DIR/runs cnn-e1 cnn-e3 --seeds 60 --before OLD/runs

Each run's final loss is the card's window (:func:`eegrad.examples.scorecard.final_losses`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from eegrad.examples import scorecard


def _runs(store: Path, setting: str, method: str, seeds: list[int]) -> list[dict]:
    rows = []
    for seed in seeds:
        saved = scorecard._saved(store / setting / f"{method}-seed{seed}.csv")
        if saved is None:
            raise SystemExit(f"{store / setting}: no saved run of {method}, seed {seed}")
        rows += saved
    return rows


def _paired(values: list[float], scale: float) -> str:
    d = np.asarray(values) / scale
    return f"{100 * d.mean():+.1f} % ± {100 * d.std(ddof=1) / np.sqrt(d.size):.1f} %"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store", type=Path, help="a card's runs/ folder")
    p.add_argument("settings", nargs="+", choices=sorted(scorecard.SETTINGS))
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--before", type=Path, help="the runs/ folder of an earlier default")
    args = p.parse_args()
    seeds = list(range(args.seeds))
    print("| setting | seeds | default − median fixed n | before − median fixed n | "
          "default − before |")
    print("|---|---|---|---|---|")
    for setting in args.settings:
        folder = args.store / setting
        fixed = sorted({f.name.split("-seed")[0] for f in folder.glob("fedavg-*-seed*.csv")
                        if not f.name.endswith(".arms.csv")})  # fmt: skip
        rows = [r for m in fixed for r in _runs(args.store, setting, m, seeds)]
        rows += _runs(args.store, setting, "default", seeds)
        summary = scorecard.summarise(rows, "default")
        finals = scorecard.final_losses(rows)
        means = {m: float(np.mean([finals[m][s] for s in seeds])) for m in fixed}
        order = sorted(fixed, key=means.get)
        middle = order[(len(order) - 1) // 2: len(order) // 2 + 1]  # one, or the two middle
        median = [float(np.mean([finals[m][s] for m in middle])) for s in seeds]
        scale = summary["best_loss"]
        mine = [finals["default"][s] for s in seeds]
        line = [_paired([a - b for a, b in zip(mine, median, strict=True)], scale), "", ""]
        if args.before is not None:
            old = scorecard.final_losses(_runs(args.before, setting, "default", seeds))["default"]
            before = [old[s] for s in seeds]
            line[1] = _paired([a - b for a, b in zip(before, median, strict=True)], scale)
            line[2] = _paired([a - b for a, b in zip(mine, before, strict=True)], scale)
        print(f"| {setting} | {len(seeds)} | " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
