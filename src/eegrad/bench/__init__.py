"""The field bench: eegrad's default against tuned fixed n, cohort schedules and ISP, on
several offline data sets (``eegrad bench``).

:func:`main` tunes every method's client learning rate (each fixed n's among them) on the
tuning seeds (:func:`tune`: a grid whose best is at its edge is extended), runs every method of every setting (:mod:`eegrad.bench.settings`) on the reported seeds, and writes
``DIR/bench.csv`` (:data:`~eegrad.bench.runner.COLUMNS`: one row per evaluation),
``DIR/arms.csv`` (n of every round), ``DIR/tuning.json`` and ``DIR/report.md`` with its figure.
Finished runs are kept under ``DIR/runs/``: a rerun takes each again where what made it is
today's (:func:`~eegrad.bench.runner.saved_run`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .._validation import check_integer
from ..results import atomic_write_bytes, write_table
from .runner import (
    COLUMNS,
    LR_GRID,
    METHODS,
    TUNING_SEEDS,
    job,
    methods_of,
)
from .settings import SETTINGS, check_settings

__all__ = ["COLUMNS", "MAX_EXTENSIONS", "METHODS", "SETTINGS", "main", "plan", "tune"]


def _execute(todo: list[tuple], jobs: int, store: Path, quiet: bool) -> list[tuple]:
    """Run (or take from the store) every job, in order."""
    from joblib import Parallel, delayed

    out = Parallel(n_jobs=jobs, verbose=0 if quiet else 5)(
        delayed(job)(str(store), *t) for t in todo)  # fmt: skip
    return list(out)


def plan(settings: list[str], seeds: list[int], quick: bool,
         tuned: dict[str, dict[str, float]] | None = None,
         grids: dict[tuple[str, str], list[float]] | None = None) -> list[tuple]:  # fmt: skip
    """The runs: with ``tuned`` None, the tuning runs (every method, each fixed n among them,
    at every learning rate of its grid — ``grids``, default :data:`~eegrad.bench.runner.
    LR_GRID` of the setting's model — on the tuning seeds); else the reported runs, each
    method at its tuned rate."""
    todo = []
    for name in settings:
        s = SETTINGS[name]
        methods = methods_of(name, quick)
        if tuned is None:
            for m in methods:
                grid = (grids or {}).get((name, m), LR_GRID[s.model])
                for lr in grid:
                    for seed in TUNING_SEEDS[:1] if quick else TUNING_SEEDS:
                        todo.append((name, m, seed, lr, quick))
            continue
        for seed in seeds:
            for m in methods:
                todo.append((name, m, seed, tuned[name][m], quick))
    return todo


def _losses(results: list[tuple], todo: list[tuple]) -> dict[tuple, float]:
    """The mean final training loss of each (setting, method, learning rate) over its seeds."""
    losses: dict[tuple, list[float]] = {}
    for (name, method, _seed, lr, _quick), (rows, _arms) in zip(todo, results, strict=True):
        losses.setdefault((name, method, lr), []).append(float(rows[-1]["train_loss"]))
    return {k: sum(v) / len(v) for k, v in losses.items()}


def _tune(results: list[tuple], todo: list[tuple]) -> dict[str, dict[str, float]]:
    """Per setting and method, the learning rate of least mean final training loss."""
    best: dict[str, dict[str, tuple[float, float]]] = {}
    for (name, method, lr), mean in _losses(results, todo).items():
        if method not in best.setdefault(name, {}) or mean < best[name][method][1]:
            best[name][method] = (lr, mean)
    return {name: {m: lr for m, (lr, _) in by_m.items()} for name, by_m in best.items()}


#: The most steps a method's learning-rate grid is extended by, each way.
MAX_EXTENSIONS = 4


def tune(names: list[str], quick: bool, jobs: int, store: Path,
         quiet: bool) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:  # fmt: skip
    """Tune every method's learning rate: the setting model's grid first; a method whose best
    rate is at its grid's edge gets the next rate beyond it (the grid's ratio), until its best
    is inside (at most :data:`MAX_EXTENSIONS` steps a side). Returns the rates and, per setting
    and method, the grid tried and whether its best stayed at an edge."""
    grids = {(n, m): list(LR_GRID[SETTINGS[n].model]) for n in names
             for m in methods_of(n, quick)}  # fmt: skip
    grown = {key: 0 for key in grids}
    while True:
        todo = plan(names, [], quick, grids=grids)
        results = _execute(todo, jobs, store, quiet)
        tuned, losses = _tune(results, todo), _losses(results, todo)
        more = False
        for (name, m), grid in grids.items():
            best = tuned[name][m]
            ratio = grid[1] / grid[0]
            if grown[(name, m)] >= MAX_EXTENSIONS or best not in (grid[0], grid[-1]):
                continue
            if best == grid[0]:
                grid.insert(0, float(f"{grid[0] / ratio:.6g}"))
            else:
                grid.append(float(f"{grid[-1] * ratio:.6g}"))
            grown[(name, m)] += 1
            more = True
        if not more:
            break
    report = {f"{n} {m}": {"grid": grid, "loss": {f"{lr:g}": losses[(n, m, lr)] for lr in grid},
                           "at_edge": tuned[n][m] in (grid[0], grid[-1])}
              for (n, m), grid in grids.items()}  # fmt: skip
    return tuned, report


def main(out: str | Path, *, quick: bool = False, jobs: int = 1, seeds: int | None = None,
         settings: list[str] | None = None, command: str = "eegrad bench",
         quiet: bool = False) -> Path:  # fmt: skip
    """Run the bench into ``out``; returns the report's path."""
    names = check_settings(settings, quick)
    seeds = check_integer(seeds if seeds is not None else (2 if quick else 10), "seeds",
                          "eegrad bench", ge=1)  # fmt: skip
    jobs = check_integer(jobs, "jobs", "eegrad bench", ge=1)
    out = Path(out)
    store = out / "runs"
    store.mkdir(parents=True, exist_ok=True)
    tuned, grids = tune(names, quick, jobs, store, quiet)
    atomic_write_bytes(out / "tuning.json", json.dumps({"rates": tuned, "grids": grids},
                                                       indent=1).encode())  # fmt: skip
    todo = plan(names, list(range(seeds)), quick, tuned)
    results = _execute(todo, jobs, store, quiet)
    rows = [r for rs, _ in results for r in rs]
    arms = [a for _, a_s in results for a in a_s]
    write_table(out / "bench.csv", rows, COLUMNS)
    write_table(out / "arms.csv", arms, ("setting", "method", "seed", "round", "n"))
    from .report import report

    return report(rows, arms, out, command, tuned, grids)
