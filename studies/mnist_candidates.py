"""A variant of the default rule in the MNIST study of ``eegrad example flower``.

Runs the study's default federation with a candidate of ``studies/rule_candidates.py`` as
its rule (``eegrad.examples.flower.run``'s ``selector``, on the default's random streams) on
one split, and prints each seed's final objective gap (the mean of the last 10 % of rounds, as
the study reads it), its rounds of one, two and three clients, and the mean ± SE over seeds::

    python studies/mnist_candidates.py one-step --split shards --seeds 10

``default`` runs the default's own rule. Compare with the study's table (``eegrad example
flower --jobs 2``), whose fixed-n rows do not depend on the rule.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from eegrad import ProgressThompson
from eegrad.examples import flower
from eegrad.flower.strategy import DEFAULT_NOISE_ORDER

sys.path.insert(0, str(Path(__file__).parent))
import rule_candidates


def counting(cls: type[ProgressThompson], picks: list[int]) -> type[ProgressThompson]:
    """``cls`` that appends the n of each of its asks to ``picks``."""

    class Counting(cls):  # type: ignore[misc, valid-type]
        def ask(self, *args: Any, **kwargs: Any) -> Any:
            out = super().ask(*args, **kwargs)
            picks.append(int(np.asarray(out).ravel()[0]) + 1)
            return out

    return Counting


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("candidate", choices=["default", *sorted(rule_candidates.PER_ROUND)])
    p.add_argument("--split", default="shards")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--rounds", type=int, default=150)
    args = p.parse_args()
    picks: list[int] = []
    rule = counting(rule_candidates.PER_ROUND.get(args.candidate, ProgressThompson), picks)

    def selector(population: int, spend: np.ndarray) -> ProgressThompson:
        return rule(population=population, spend=spend, noise_order=DEFAULT_NOISE_ORDER)

    gaps = []
    for seed in range(args.seeds):
        picks.clear()
        rows = flower.run(["default"], [seed], dataset="mnist", split=args.split,
                          rounds=args.rounds, selector=selector)  # fmt: skip
        gaps.append(flower.final_gaps(rows)["default"][0])  # as the study reads it
        few = ", ".join(str(picks.count(n)) for n in (1, 2, 3))
        print(f"seed {seed}: {gaps[-1]:.4f}; rounds of 1, 2, 3 clients: {few}", flush=True)
    print(f"{args.candidate} on {args.split}: {np.mean(gaps):.4f} ± "
          f"{np.std(gaps, ddof=1) / np.sqrt(len(gaps)):.4f} ({len(gaps)} seeds)")


if __name__ == "__main__":
    main()
