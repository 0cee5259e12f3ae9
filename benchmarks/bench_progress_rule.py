"""Time of one round of :class:`~eegrad.ProgressThompson` (``ask``, ``tell_parts``,
``tell_parts`` with the signal and the persistence) over R Monte Carlo realizations, with the persistence's
non-negative fit batched over the rows (:func:`~eegrad.selectors.progress_fits.nonnegative_minima`,
the rule as shipped) against the same rule fitting row by row in a Python loop (the plain
reference: the same fit called on one row at a time, as the rule did before). Both give the
same fits to the last bit (``tests/test_progress.py``)::

    python benchmarks/bench_progress_rule.py

prints, for R = 1, 100 and 1000 (K = 20 clients, d = 8, 60 rounds), the milliseconds per round
of each and their ratio, measured in one run.
"""

from __future__ import annotations

import time

import numpy as np

from eegrad.selectors import progress_fits
from eegrad.selectors.progress import ProgressThompson

K, D, ROUNDS = 20, 8, 60
#: The fit as shipped, where the rule's persistence fit calls it (progress_fits, not the
#: progress module's re-export: patching that one timed the batched fit against itself).
BATCHED = progress_fits.nonnegative_minima


def row_by_row(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference: the fit of one row at a time, in a Python loop."""
    rows = [BATCHED(A[r : r + 1], b[r : r + 1]) for r in range(A.shape[0])]
    return np.concatenate([f for f, _ in rows]), np.concatenate([ok for _, ok in rows])


def per_round(R: int) -> float:
    rule = ProgressThompson(population=K, spend=np.linspace(1.0, 0.2, K), seed=0)
    rule.init(R, K, D)
    rng = np.random.default_rng(0)
    prev = None
    t0 = time.perf_counter()
    for t in range(1, ROUNDS + 1):
        n = int(rule.ask(t).max()) + 1  # one n for every row: the parts are (R, n, d)
        arms = np.full(R, n - 1)
        rule._pending = arms
        parts = rng.standard_normal((R, n, D)) + 1.0
        mean = parts.mean(axis=1)
        rule.tell_parts(arms, parts, np.ones((R, n)), mean_norm2=np.einsum("rd,rd->r", mean, mean),
                        persistence=None if prev is None else np.einsum("rd,rd->r", mean, prev))
        prev = mean
    return (time.perf_counter() - t0) / ROUNDS


def main() -> None:
    print("| R | batched (ms per round) | row by row (ms per round) | row by row / batched |")
    print("|---|---|---|---|")
    for R in (1, 100, 1000):
        fast = per_round(R)
        progress_fits.nonnegative_minima = row_by_row
        try:
            slow = per_round(R)
        finally:
            progress_fits.nonnegative_minima = BATCHED
        print(f"| {R} | {1e3 * fast:.1f} | {1e3 * slow:.1f} | {slow / fast:.1f} |")


if __name__ == "__main__":
    main()
