"""Overhead of GradientEstimator.ask + tell per round against one pass over a d-vector
(run by hand).

For d = 10³ … 10⁶, NumPy float64 arrays and PyTorch CPU float32 tensors: the time of one round
(``ask`` + ``tell`` of a precomputed gradient, N = 5 arms, 8 gradients in turn, over the second
of two iterates) divided by the time of ``x += y`` on vectors of the same size — once with one
cache-hot ``y``, once cycling through the same 8 gradients. The target is at most 5 (five passes
over the vector per round). Two rules: the default (:class:`~eegrad.MemoryThompson`, which for
d > 16 also forms the pulled arm's row of the Gram matrix of the arm means, N more passes) and
the per-iterate :class:`~eegrad.ThompsonVariance`.

Then, for the default rule (NumPy, d = 10³, T = 50), the time of ``next_iterate`` — the refit of
the past iterates — after 1, 8 and 64 iterates (the default window), with ``engine="numpy"``
and with the compiled refit (``engine="auto"``, Numba installed).

Usage: ``python benchmarks/bench_loop.py``
"""

from __future__ import annotations

import time

import numpy as np

from eegrad import GradientEstimator, ThompsonVariance, default_selector
from eegrad.engines import numba_available

N, T = 5, 200
RULES = {"default (MemoryThompson)": default_selector, "ThompsonVariance": ThompsonVariance}


def per_round(make, d: int, rule) -> float:
    grads = [make(d) for _ in range(8)]
    est = GradientEstimator(rule(), N, T, dim=d, rng=0)
    best = np.inf
    for _ in range(5):
        est.reset()
        for t in range(T):  # a first iterate: the rule with memory then has evidence
            est.ask()
            est.tell(grads[t % 8])
        est.next_iterate()
        t0 = time.perf_counter()
        for t in range(T):
            est.ask()
            est.tell(grads[t % 8])
        best = min(best, (time.perf_counter() - t0) / T)
    return best


def iterate_start(engine: str, iterates: tuple[int, ...], d: int = 10**3,
                  T_: int = 50) -> dict[int, float]:
    """Time of ``next_iterate`` after each of ``iterates`` iterates (best of the 3 around it)."""
    grads = [np.random.default_rng(i).standard_normal(d) for i in range(8)]
    est = GradientEstimator(default_selector(), N, T_, dim=d, rng=0, engine=engine)
    times: dict[int, float] = {}
    for k in range(1, max(iterates) + 2):
        for t in range(T_):
            est.ask()
            est.tell(grads[t % 8])
        t0 = time.perf_counter()
        est.next_iterate()
        dt = time.perf_counter() - t0
        for at in iterates:
            if at - 1 <= k <= at + 1:
                times[at] = min(times.get(at, np.inf), dt)
    return times


def axpy(x, ys, reps: int = 200) -> float:
    """Time of ``x += y`` cycling through ``ys`` (one vector: cache-hot; the 8 gradients of the
    rounds: as cold as the estimator's inputs)."""
    best = np.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(reps):
            x += ys[i % len(ys)]
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def main() -> None:
    backends = {"numpy float64": lambda d: np.random.default_rng(d).standard_normal(d)}
    try:
        import torch

        torch.set_num_threads(1)
        backends["torch float32 (CPU)"] = lambda d: torch.randn(d)
    except ImportError:  # pragma: no cover
        pass
    print("| backend | rule | d | ask+tell per round | x += y (one y) | ratio | x += G (the "
          "rounds' 8 gradients) | ratio |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name, make in backends.items():
        for d in (10**3, 10**4, 10**5, 10**6):
            hot = axpy(make(d), [make(d)])
            cold = axpy(make(d), [make(d) for _ in range(8)])
            for rule_name, rule in RULES.items():
                r = per_round(make, d, rule)
                print(f"| {name} | {rule_name} | {d:.0e} | {r * 1e6:.1f} µs | {hot * 1e6:.1f} µs "
                      f"| {r / hot:.1f}× | {cold * 1e6:.1f} µs | {r / cold:.1f}× |")  # fmt: skip
    iterates = (1, 8, 64)
    engines = ["numpy"] + (["auto"] if numba_available() else [])
    starts = {engine: iterate_start(engine, iterates) for engine in engines}
    print()
    print("| next_iterate of the default rule (d = 1e+03, T = 50) | "
          + " | ".join(f"after {k} iterate{'s' * (k > 1)}" for k in iterates) + " |")  # fmt: skip
    print("|---|" + "---|" * len(iterates))
    for engine, times in starts.items():
        label = "NumPy refit (engine='numpy')" if engine == "numpy" else "compiled refit"
        print(f"| {label} | " + " | ".join(f"{times[k] * 1e3:.2f} ms" for k in iterates) + " |")


if __name__ == "__main__":
    main()
