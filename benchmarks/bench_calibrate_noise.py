"""Calls of Flower's RDP accountant that calibrating CentralDP("auto") takes: the bracketed
false position of :func:`eegrad.flower.privacy.least_passing_scale` against plain bisection
to the same relative tolerance, each n = 1..N of K nodes calibrated from the z of n − 1 (as
:meth:`CentralDP.multipliers` does). Each call is one composition of the accountant (about a
second on a laptop), so the calls are the cost::

    python benchmarks/bench_calibrate_noise.py

prints, per setting, the calls of each method, their ratio, and the largest relative difference
between the two methods' z (both are within rtol of the root, on its passing side).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from eegrad.flower.privacy import epsilon_spent, least_passing_scale

RTOL = 1e-3
#: (rounds, max ε, δ, K nodes, N arms): the privacy tests' federation, the scorecard's (g).
SETTINGS = [(30, 6.0, 1e-5, 8, 8), (100, 8.0, 1e-5, 200, 20)]


def bisection(excess, start: float, rtol: float = RTOL) -> float:
    """The plain reference: the bracket by doubling or halving, then bisection on z."""
    lo = hi = start
    while excess(hi) > 0:
        lo, hi = hi, hi * 2.0
    if lo == hi:
        lo = hi / 2.0
        while lo > 1e-3 and excess(lo) <= 0:
            lo, hi = lo / 2.0, lo
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return hi


def counted_excess(count: list[int], n: int, rounds: int, eps: float, delta: float,
                   K: int) -> Callable[[float], float]:  # fmt: skip
    """ln(ε(z)/ε_max) of n of K nodes over ``rounds``, counting its calls in ``count[0]``."""

    def excess(z: float) -> float:
        count[0] += 1
        return math.log(epsilon_spent(z, n, rounds, delta, K) / eps)

    return excess


def main() -> None:
    print("| rounds | ε | K | N | bisection's calls | false position's calls | ratio | "
          "max rel. diff of z |")
    print("|---|---|---|---|---|---|---|---|")
    for rounds, eps, delta, K, N in SETTINGS:
        calls: dict[str, int] = {}
        zs: dict[str, list[float]] = {}
        for name, method in (("bisection", bisection), ("false position", least_passing_scale)):
            epsilon_spent.cache_clear()  # every call composes anew
            count = [0]
            z: list[float] = []
            for n in range(1, N + 1):
                excess = counted_excess(count, n, rounds, eps, delta, K)
                start = z[-1] if z else 1.0
                z.append(bisection(excess, start) if method is bisection else
                         least_passing_scale(excess, start=start, rtol=RTOL))  # fmt: skip
            calls[name], zs[name] = count[0], z
        pairs = zip(zs["false position"], zs["bisection"], strict=True)
        diff = max(abs(a - b) / b for a, b in pairs)
        print(f"| {rounds} | {eps} | {K} | {N} | {calls['bisection']} | "
              f"{calls['false position']} | "
              f"{calls['false position'] / calls['bisection']:.2f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
