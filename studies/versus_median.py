"""The default against the median fixed n of a card, paired by seed (the issue's "never worse
than a blind guess"), from a card's saved runs, beside an earlier default's.

The card's table gives the same paired difference in its column "− median"
(:func:`eegrad.examples.scorecard.summarise`, ``versus_median``). This script reads it from a
card's saved runs (:func:`eegrad.examples.scorecard.load_runs`) on any number of their seeds,
and with ``--before STORE`` sets beside it that store's default (the runs of an earlier
default, on the same seeds and the same fixed n) and the two defaults' own paired difference,
every number in % of the best fixed n's loss, ± its standard error over the seeds::

    python studies/versus_median.py DIR/runs cnn-e1 cnn-e3 --seeds 60 --before OLD/runs

Each run's final loss is the card's window (:func:`eegrad.examples.scorecard.final_losses`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from eegrad.examples import scorecard


def _percent(mean_se: tuple[float, float]) -> str:
    return f"{100 * mean_se[0]:+.1f} % ± {100 * mean_se[1]:.1f} %"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store", type=Path, help="a card's runs/ folder")
    p.add_argument("settings", nargs="+", choices=sorted(scorecard.SETTINGS))
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--before", type=Path, help="the runs/ folder of an earlier default")
    args = p.parse_args()
    seeds = list(range(args.seeds))
    columns = ["default − median fixed n"]
    if args.before is not None:
        columns += ["before − median fixed n", "default − before"]
    print("| setting | seeds | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for setting in args.settings:
        fixed = [m for m in scorecard.saved_methods(args.store, setting)
                 if m.startswith("fedavg-")]  # fmt: skip
        rows = scorecard.load_runs(args.store, setting, ["default", *fixed], seeds)
        line = [_percent(scorecard.summarise(rows)["versus_median"])]
        if args.before is not None:
            before = [{**r, "method": "before"}
                      for r in scorecard.load_runs(args.before, setting, ["default"], seeds)]
            s = scorecard.summarise(rows + before, "before")
            back = s["versus_default"]  # before less the default
            line += [_percent(s["versus_median"]), _percent((-back[0], back[1]))]
        print(f"| {setting} | {len(seeds)} | " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
