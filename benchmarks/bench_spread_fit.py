"""The time of one ``SpreadThompson.fit`` (noise_order=2), which the every-round rules call
several times a round, at R = 1 and R = 1000 realizations::

    python benchmarks/bench_spread_fit.py

Compare two versions in one run by putting the other's ``src`` first on ``PYTHONPATH``.
"""

from __future__ import annotations

import time

import numpy as np

import eegrad
from eegrad import SpreadThompson


def main() -> None:
    print(f"eegrad from {eegrad.__file__}")
    for R, calls in ((1, 2000), (1000, 200)):
        rule = SpreadThompson(population=20, noise_order=2)
        rule.init(R, 20, 3)
        # a well-posed fit: a normal matrix, moments and residual weights as after some rounds
        fit = rule.model.spread
        fit.normal[:] = np.eye(3) + 0.1
        fit.moment[:] = 1.0
        fit.yy[:], fit.nu[:], fit.nu2[:] = 3.0, 5.0, 5.0
        best = np.inf
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(calls):
                rule.model.fit()
            best = min(best, (time.perf_counter() - t) / calls)
        print(f"R = {R}: {best * 1e6:.1f} µs per fit (best of 5 × {calls})")


if __name__ == "__main__":
    main()
