"""A variant of the default rule in the MNIST study of ``eegrad example flower``.

Runs the study's default federation (its rule swapped for a candidate of
``benchmarks/rule_candidates.py``, built as the strategy builds the default) on one split, in
this process, and prints each seed's final objective gap (the mean of the last 10 % of rounds,
as the study reads it), its rounds of one client, and the mean ± SE over seeds::

    python benchmarks/mnist_candidates.py one-step --split shards --seeds 10

``default`` runs the default itself. Compare with the study's table (``eegrad example flower
--jobs 2``), whose fixed-n rows do not depend on the rule.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from eegrad import ProgressThompson
from eegrad.examples import flower
from eegrad.flower import strategy

sys.path.insert(0, str(Path(__file__).parent))
import rule_candidates


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = sorted(rule_candidates.PER_ROUND)
    p.add_argument("candidate", choices=["default", *names])
    p.add_argument("--split", default="shards")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--rounds", type=int, default=150)
    args = p.parse_args()
    picks: list[int] = []
    cls = rule_candidates.PER_ROUND.get(args.candidate, ProgressThompson)
    if cls is not ProgressThompson:
        strategy._default_rule_class = lambda private: cls  # the rule the default builds
    ask = cls.ask

    def counted(self, *a, **k):
        out = ask(self, *a, **k)
        picks.append(int(np.asarray(out).ravel()[0]) + 1)
        return out

    cls.ask = counted
    gaps = []
    for seed in range(args.seeds):
        picks.clear()
        rows = flower._job("default", seed, None, dataset="mnist", split=args.split,
                           rounds=args.rounds, grid=None, progress=False)  # fmt: skip
        gaps.append(flower.final_gaps(rows)["default"][0])  # as the study reads it
        print(f"seed {seed}: {gaps[-1]:.4f}, rounds of one client {picks.count(1)}", flush=True)
    print(f"{args.candidate} on {args.split}: {np.mean(gaps):.4f} ± "
          f"{np.std(gaps, ddof=1) / np.sqrt(len(gaps)):.4f} ({len(gaps)} seeds)")


if __name__ == "__main__":
    main()
