"""The field bench: eegrad's default against your FedAvg, tuned fixed n, cohort schedules, ISP
and BARA-style, on several offline data sets (``eegrad bench``), as a practitioner compares
them: their app as it is, the strategy swapped.

:func:`main` tunes your FedAvg's client learning rate on the tuning seeds (the guessed n, 10 %
of K; a rate whose runs diverge or end above the initial loss is not chosen,
:func:`~eegrad.bench.tuning.tune`), runs every method of every setting
(:mod:`eegrad.bench.settings`) at that rate on the reported seeds — the headline — and, for
what a user who retunes would see, tunes the default and each rival at its own rate and runs
them there. It writes ``DIR/bench.csv`` (:data:`~eegrad.bench.runner.COLUMNS`: one row per
evaluation, every method at your FedAvg's rate), ``DIR/arms.csv`` (n of every round),
``DIR/retuned.csv`` and ``DIR/retuned-arms.csv`` (the same at each method's own rate),
``DIR/tuning.json``, ``DIR/report.md`` with its figure, ``DIR/readme-table.md`` (the README's
table of the report's headline), and ``DIR/bench-runs.csv.gz``, the table
of its baseline runs (:mod:`eegrad.bench.store`). Runs come from the store ``DIR/runs/``, then
the repository's table, then are run (:class:`~eegrad.bench.tuning.Runs`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .._validation import check_integer
from ..results import atomic_write_bytes, write_table
from .runner import COLUMNS, METHODS, methods_of
from .settings import SETTINGS, check_settings
from .store import default_table, read_table
from .store import write_table as write_runs_table
from .tuning import MAX_EXTENSIONS, Runs, tune

__all__ = ["COLUMNS", "MAX_EXTENSIONS", "METHODS", "RETUNED", "SETTINGS", "main", "plan"]

#: The methods tuned at their own rate too, for the table of what a user who retunes would see
#: (your FedAvg is tuned for the headline).
RETUNED = ("default", "grow", "decay", "isp", "bara")
#: The columns of ``arms.csv``.
ARM_COLUMNS = ("setting", "method", "seed", "round", "n")


def plan(settings: list[str], seeds: list[int], quick: bool,
         rates: dict[str, dict[str, float]], methods: dict[str, list[str]] | None = None,
         ) -> list[tuple]:  # fmt: skip
    """The reported runs: each setting's ``methods`` (default every method it runs,
    :func:`~eegrad.bench.runner.methods_of`) on every seed, each at ``rates[setting][method]``
    or, where the setting has one rate for all (``rates[setting]["guess"]`` alone), at that."""
    todo = []
    for name in settings:
        chosen = methods_of(name, quick) if methods is None else methods[name]
        for seed in seeds:
            for m in chosen:
                lr = rates[name].get(m, rates[name]["guess"])
                todo.append((name, m, seed, lr, quick))
    return todo


def _tables(rows_path: Path, arms_path: Path,
            results: list[tuple]) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """Write the runs' evaluation rows and arms; returns both."""
    rows = [r for rs, _ in results for r in rs]
    arms = [a for _, a_s in results for a in a_s]
    write_table(rows_path, rows, COLUMNS)
    write_table(arms_path, arms, ARM_COLUMNS)
    return rows, arms


def main(out: str | Path, *, quick: bool = False, jobs: int = 1, seeds: int | None = None,
         settings: list[str] | None = None, command: str = "eegrad bench",
         quiet: bool = False, rule_only: bool = False,
         table: str | Path | None = None) -> Path:  # fmt: skip
    """Run the bench into ``out``; returns the report's path. ``table``: the table of baseline
    runs to take runs from (default the repository's, :func:`~eegrad.bench.store.
    default_table`); ``rule_only``: refuse to run a baseline it does not hold."""
    start = time.perf_counter()
    names = check_settings(settings, quick)
    seeds = check_integer(seeds if seeds is not None else (2 if quick else 10), "seeds",
                          "eegrad bench", ge=1)  # fmt: skip
    jobs = check_integer(jobs, "jobs", "eegrad bench", ge=1)
    out = Path(out)
    store = out / "runs"
    store.mkdir(parents=True, exist_ok=True)
    table = default_table() if table is None else Path(table)
    runs = Runs(store, read_table(table), jobs, quiet, rule_only)
    retuned = {n: [m for m in RETUNED if m in methods_of(n, quick)] for n in names}
    rates, grids = tune({n: ["guess", *retuned[n]] for n in names}, quick, runs)
    yours = {n: {"guess": rates[n]["guess"]} for n in names}
    reported = list(range(seeds))
    headline = plan(names, reported, quick, yours)
    own = plan(names, reported, quick, rates, {n: ["guess", *retuned[n]] for n in names})
    rows, arms = _tables(out / "bench.csv", out / "arms.csv", runs.results(headline))
    own_rows, _ = _tables(out / "retuned.csv", out / "retuned-arms.csv", runs.results(own))
    write_runs_table(out / "bench-runs.csv.gz",
                     [(k, lr, rs, a) for k, (lr, rs, a) in runs.baselines.items()])  # fmt: skip
    took = {"seconds": time.perf_counter() - start, "running_seconds": runs.seconds,
            "runs": dict(runs.counts), "table": str(table), "jobs": jobs}  # fmt: skip
    atomic_write_bytes(out / "tuning.json", json.dumps(
        {"your_rate": {n: r["guess"] for n, r in yours.items()}, "rates": rates,
         "grids": grids, "took": took}, indent=1).encode())  # fmt: skip
    from .report import report

    return report(rows, arms, out, command, rates, grids, retuned=own_rows, took=took)
