"""Benchmark of the Monte Carlo engines on the paper's Figure 1 workload (run by hand).

Workload: d = 2, F = ½‖w‖², σ² = (50, 26, 16.7)·T/50, EE-Grad (α = 2.5, β, P "oracle", c = 1),
K = 5 SGD iterations, R = 2000 realizations, T = 50, 200, 3000. Reported per T, in ns per
realization-round (R·K·T rounds), all measured in one run:

(a) the NumPy engine;
(b) the compiled engine on 1 thread and on all cores;
(c) a plain vectorised NumPy loop (one generator, no blocking: what the engine replaces);
(d) a naive one-realization-at-a-time Python loop, timed on a subset of realizations and
    scaled to R (said so in the table);
(e) the floor: as many standard normals (R·K·T·d) drawn with ``Generator.standard_normal`` in
    bulk, 1M at a time into a preallocated buffer.

Then the peak memory of the compiled and NumPy engines at R = 2000, T = 3000 (growth of the
process's peak RSS over the interpreter's baseline after imports and compilation, each in a
fresh subprocess), the wall time of ``eegrad reproduce figure1`` on its defaults, and the cold
first-call cost of compilation (empty Numba cache).

Usage::

    python benchmarks/bench_engines.py [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

from eegrad import (
    KLLCB,
    Arms,
    ChiSquareLCB,
    EEGrad,
    GaussianOracle,
    MemoryKLLCB,
    MemoryThompson,
    Quadratic,
    ThompsonVariance,
    run_sgd,
)
from eegrad.engines.numba_engine import default_threads

R, K, D = 2000, 5, 2
SIGMA2 = np.array([50.0, 26.0, 16.7])


def oracle_at(T: int) -> GaussianOracle:
    return GaussianOracle(Quadratic(D), Arms(SIGMA2 * T / 50))


def w0() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((R, D))


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def plain_numpy_sgd(T: int, rng: np.random.Generator, w: np.ndarray, R_: int = R) -> np.ndarray:
    """A plain vectorised EE-Grad + SGD: one generator, (R, d) normals per round, fancy-indexed
    Welford statistics; the straightforward implementation the NumPy engine replaces."""
    s2 = SIGMA2 * T / 50
    N = s2.size
    alpha, c = 2.5, 1.0
    beta = s2.max()
    rows = np.arange(R_)
    w = w.copy()
    for _ in range(K):
        grad, sqrt_m = w.copy(), np.abs(w)
        P = (w * w).sum(axis=1)[:, None]
        count = np.zeros((R_, N))
        mean = np.zeros((R_, N, D))
        sq = np.zeros((R_, N))
        total = np.zeros((R_, D))
        for t in range(1, T + 1):
            if t <= 2 * N:
                arms = np.full(R_, (t - 1) % N)
            else:
                x = alpha * np.log(t) / (count - 1)
                f = beta * P * np.sqrt(x * D / c) * np.maximum(1.0, np.sqrt(x / (c * D)))
                arms = np.argmin(sq / (count - 1) - f, axis=1)
            g = grad + np.sqrt(s2[arms])[:, None] * sqrt_m * rng.standard_normal((R_, D))
            count[rows, arms] += 1
            old = mean[rows, arms]
            delta = g - old
            new = old + delta / count[rows, arms][:, None]
            mean[rows, arms] = new
            sq[rows, arms] += (delta * (g - new)).sum(axis=1)
            total += g
        w = w - 0.85 * total / T
    return w


def naive_loop_sgd(T: int, rng: np.random.Generator, n_real: int) -> None:
    """One realization at a time, one round at a time, in Python."""
    s2 = SIGMA2 * T / 50
    N = s2.size
    beta = s2.max()
    for _ in range(n_real):
        w = rng.standard_normal(D)
        for _ in range(K):
            P = float(w @ w)
            hist = [[] for _ in range(N)]
            total = np.zeros(D)
            for t in range(1, T + 1):
                if t <= 2 * N:
                    n = (t - 1) % N
                else:
                    best, n = np.inf, 0
                    for a in range(N):
                        h = np.array(hist[a])
                        V = h.var(axis=0, ddof=1).sum()
                        x = 2.5 * np.log(t) / (len(h) - 1)
                        f = beta * P * np.sqrt(x * D) * max(1.0, np.sqrt(x / D))
                        if V - f < best:
                            best, n = V - f, a
                g = w + np.sqrt(s2[n]) * np.abs(w) * rng.standard_normal(D)
                hist[n].append(g)
                total += g
            w = w - 0.85 * total / T


def floor_normals(count: int, rng: np.random.Generator) -> None:
    buf = np.empty(1_000_000)
    left = count
    while left > 0:
        m = min(left, buf.size)
        rng.standard_normal(out=buf[:m])
        left -= m


def floor_normals_threads(count: int, threads: int) -> None:
    """The floor on ``threads`` threads, each with its own generator (NumPy releases the GIL
    while filling a buffer)."""
    from concurrent.futures import ThreadPoolExecutor

    gens = np.random.default_rng(1).spawn(threads)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda g: floor_normals(count // threads, g), gens))


#: The selection rules compared in the second table: (name, constructor).
RULES = [("EEGrad", EEGrad), ("KLLCB", KLLCB), ("ChiSquareLCB", ChiSquareLCB),
         ("ThompsonVariance", ThompsonVariance),
         ("MemoryThompson", MemoryThompson), ("MemoryKLLCB", MemoryKLLCB)]  # fmt: skip


MEMORY_SCRIPT = """
import resource, sys, numpy as np
from eegrad import Arms, EEGrad, GaussianOracle, Quadratic, run_sgd
T = 3000
o = GaussianOracle(Quadratic(2), Arms(np.array([50.0, 26.0, 16.7]) * T / 50))
w0 = np.random.default_rng(0).standard_normal((2000, 2))
run_sgd(o, EEGrad(), w0[:300], K=1, T=10, eta=0.85, rng=1, engine=sys.argv[1])  # compile, warm
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
run_sgd(o, EEGrad(), w0, K=5, T=T, eta=0.85, rng=1, engine=sys.argv[1])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((peak - base) / 1024)
"""

COLD_SCRIPT = """
import time, numpy as np
t0 = time.perf_counter()
from eegrad import Arms, EEGrad, GaussianOracle, Quadratic, estimate_gradient
o = GaussianOracle(Quadratic(2), Arms([50.0, 26.0, 16.7]))
w = np.ones((10, 2))
t1 = time.perf_counter()
estimate_gradient(o, EEGrad(), w, 10, rng=0, engine="numba")
t2 = time.perf_counter()
estimate_gradient(o, EEGrad(), w, 10, rng=0, engine="numba")
t3 = time.perf_counter()
print(t2 - t1, t3 - t2)
"""


def subprocess_float(script: str, *args: str, env: dict | None = None) -> list[float]:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                         check=True, env=env)  # fmt: skip
    return [float(x) for x in out.stdout.split()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--naive-realizations", type=int, default=4)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    threads = default_threads()
    # Warm up the compiled engine (its cache may be cold).
    run_sgd(oracle_at(50), EEGrad(), w0()[:300], K=1, T=10, eta=0.85, rng=1, engine="numba")
    results = []
    for T in (50, 200, 3000):
        o = oracle_at(T)
        rr = R * K * T
        row = {"T": T}

        def engine(name, th=None, o=o, T=T):
            return lambda: run_sgd(o, EEGrad(), w0(), K, T, 0.85, rng=1, engine=name, threads=th)

        row["numpy"] = best_of(engine("numpy"), args.repeat) / rr * 1e9
        row["numba_1"] = best_of(engine("numba", 1), args.repeat) / rr * 1e9
        row["numba_all"] = best_of(engine("numba", threads), args.repeat) / rr * 1e9
        row["plain"] = best_of(lambda T=T: plain_numpy_sgd(T, np.random.default_rng(1), w0()),
                               args.repeat) / rr * 1e9  # fmt: skip
        n = args.naive_realizations
        t = best_of(lambda T=T, n=n: naive_loop_sgd(T, np.random.default_rng(1), n), 1)
        row["naive"] = t / (n * K * T) * 1e9
        row["floor"] = best_of(lambda rr=rr: floor_normals(rr * D, np.random.default_rng(1)),
                               args.repeat) / rr * 1e9  # fmt: skip
        row["floor_all"] = best_of(lambda rr=rr: floor_normals_threads(rr * D, threads),
                                   args.repeat) / rr * 1e9  # fmt: skip
        for name, make in RULES:
            for eng, th in (("numba", threads), ("numpy", None)):
                if eng == "numpy" and name != "EEGrad" and T == 3000 and args.repeat > 0:
                    reps = 1  # the NumPy rules with memory take minutes here: one run
                else:
                    reps = args.repeat
                run = lambda make=make, eng=eng, th=th, o=o, T=T: run_sgd(
                    o, make(), w0(), K, T, 0.85, rng=1, engine=eng, threads=th)
                row[f"{name}_{eng}"] = best_of(run, reps) / rr * 1e9
        results.append(row)
        print(f"T={T} done", file=sys.stderr)
    mem = {e: subprocess_float(MEMORY_SCRIPT, e)[0] for e in ("numba", "numpy")}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        cold, warm = subprocess_float(COLD_SCRIPT, env=env)
        # The interpreter running this script, not whatever 'eegrad' is on PATH (or none).
        cmd = [sys.executable, "-m", "eegrad", "reproduce", "figure1", "--out", out, "--quiet"]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)  # first: fills the cache if needed
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        figure1 = time.perf_counter() - t0
    print(f"\nMachine: {platform.machine()}, {os.cpu_count()} cores, {platform.processor() or '-'};"
          f" Python {platform.python_version()}, NumPy {np.__version__}; all cores = {threads}"
          " threads.\n")  # fmt: skip
    print("| T | NumPy engine | compiled, 1 thread | compiled, all cores | plain vectorised "
          "NumPy | naive loop (scaled) | floor: bulk normals | NumPy engine ÷ compiled all "
          "| compiled 1 thread ÷ floor | NumPy engine ÷ plain |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['T']} | {r['numpy']:.1f} | {r['numba_1']:.1f} | {r['numba_all']:.1f} | "
              f"{r['plain']:.1f} | {r['naive']:.0f} | {r['floor']:.1f} | "
              f"{r['numpy'] / r['numba_all']:.1f}× | {r['numba_1'] / r['floor']:.2f}× | "
              f"{r['plain'] / r['numpy']:.2f}× |")  # fmt: skip
    print(
        "\n(ns per realization-round; the naive loop is timed on "
        f"{args.naive_realizations} realizations and scaled; best of {args.repeat}.)\n"
    )
    print("\n| T | rule | compiled, all cores | NumPy engine | compiled ÷ compiled EE-Grad |")
    print("|---|---|---|---|---|")
    for r in results:
        for name, _ in RULES:
            print(f"| {r['T']} | {name} | {r[name + '_numba']:.1f} | {r[name + '_numpy']:.1f} | "
                  f"{r[name + '_numba'] / r['EEGrad_numba']:.2f}× |")  # fmt: skip
    print("\n| T | compiled EE-Grad, all cores | floor: bulk normals on all cores | ratio |")
    print("|---|---|---|---|")
    for r in results:
        print(f"| {r['T']} | {r['numba_all']:.1f} | {r['floor_all']:.1f} | "
              f"{r['numba_all'] / r['floor_all']:.2f}× |")  # fmt: skip
    print(f"\nPeak memory above the baseline at R = 2000, T = 3000: compiled {mem['numba']:.1f} MB,"
          f" NumPy {mem['numpy']:.1f} MB.")  # fmt: skip
    print(f"`eegrad reproduce figure1` (defaults, compiled engine, warm cache): {figure1:.2f} s "
          f"(first run: {first:.2f} s).")  # fmt: skip
    print(f"Cold first call (empty Numba cache): {cold:.2f} s to compile; next call {warm:.4f} s.")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": results, "memory_mb": mem, "figure1_s": figure1,
                       "cold_compile_s": cold}, fh, indent=2)  # fmt: skip


if __name__ == "__main__":
    main()
