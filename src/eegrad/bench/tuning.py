"""Where a bench's runs come from, and how its learning rates are tuned.

:class:`Runs` takes each run from the bench's store of finished runs (``DIR/runs``), else from
the repository's table of baseline runs (:mod:`eegrad.bench.store`) where its key is today's,
else runs it (in ``jobs`` processes, each given the setting itself, so that a setting
registered in this process runs in the workers too). With ``rule_only`` a baseline that neither
holds is an error: a rule change reruns the rule, never a baseline by accident.

:func:`tune` picks each (setting, method)'s client learning rate on the tuning seeds
(:data:`~eegrad.bench.runner.TUNING_SEEDS`): over the grid of the setting's model
(:data:`~eegrad.bench.runner.LR_GRID`), the rate of least mean final training loss among the
**admissible** ones — a rate is admissible where no tuning seed's run diverges and each ends
below its initial loss, so that "your FedAvg" is a tuned app and never a diverging one. A grid
whose best admissible rate is at an edge grows one rate past it (the grid's ratio), and one
with no admissible rate grows downwards, at most :data:`MAX_EXTENSIONS` rates a side.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._validation import InvalidParameterError
from .runner import LR_GRID, RULE_METHODS, TUNING_SEEDS, job, run_key, saved_run
from .settings import SETTINGS

__all__ = ["MAX_EXTENSIONS", "BaselineNotInTable", "Runs", "admissible", "tune"]

#: The most rates a method's learning-rate grid is extended by, each way.
MAX_EXTENSIONS = 4

#: One run to make: (setting, method, seed, learning rate, quick).
Job = tuple[str, str, int, float, bool]


class BaselineNotInTable(InvalidParameterError):
    """``--rule-only`` met a baseline run that neither the store nor the table holds."""


@dataclass
class Runs:
    """Where runs come from (the module's notes), and how many came from each place."""

    store: Path
    table: dict[str, tuple[list[dict], list[dict]]]
    jobs: int = 1
    quiet: bool = True
    rule_only: bool = False
    counts: dict[str, int] = field(default_factory=lambda: {"run": 0, "store": 0, "table": 0})
    #: The baseline runs this bench used, for its own table: key -> (lr, rows, arms).
    baselines: dict[str, tuple[float, list[dict], list[dict]]] = field(default_factory=dict)
    seconds: float = 0.0

    def results(self, todo: list[Job]) -> list[tuple[list[dict], list[dict]]]:
        """Every run of ``todo``, in order."""
        from joblib import Parallel, delayed

        out: list[Any] = [None] * len(todo)
        pending = []
        for i, (name, method, seed, lr, quick) in enumerate(todo):
            key = run_key(name, method, seed, lr, quick)
            saved = saved_run(self.store, name, method, seed, lr, quick)
            where = "store"
            if saved is None and key in self.table:
                saved, where = self.table[key], "table"
            if saved is not None:
                out[i] = saved
                self.counts[where] += 1
            elif self.rule_only and method not in RULE_METHODS:
                raise BaselineNotInTable(
                    f"The baseline run {name} {method} (seed {seed}, rate {lr:g}) is in neither "
                    f"the store ({self.store}) nor the table of baseline runs: its harness or its "
                    "code changed since the table was made. Run the bench without --rule-only "
                    "to run the baselines again (then copy DIR/bench-runs.csv.gz over "
                    "docs/bench-runs.csv.gz)."
                )
            else:
                pending.append(i)
        if pending:
            start = time.perf_counter()
            done = Parallel(n_jobs=self.jobs, verbose=0 if self.quiet else 5)(
                delayed(job)(str(self.store), SETTINGS[todo[i][0]], *todo[i][1:])
                for i in pending)  # fmt: skip
            self.seconds += time.perf_counter() - start
            for i, result in zip(pending, done, strict=True):
                out[i] = result
            self.counts["run"] += len(pending)
        for (name, method, seed, lr, quick), (rows, arms) in zip(todo, out, strict=True):
            if method not in RULE_METHODS and rows:
                self.baselines[run_key(name, method, seed, lr, quick)] = (lr, rows, arms)
        return out


def admissible(runs: list[list[dict]]) -> bool:
    """Whether a rate's tuning runs (each its evaluation rows) are admissible: none diverged
    (a finite final loss) and each ends below its initial loss."""
    for rows in runs:
        first, last = float(rows[0]["train_loss"]), float(rows[-1]["train_loss"])
        if not math.isfinite(last) or len(rows) < 2 or not last < first:
            return False
    return True


def tune(methods: dict[str, list[str]], quick: bool,
         runs: Runs) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:  # fmt: skip
    """Tune the learning rate of each setting's ``methods`` (the module's notes). Returns the
    rates, ``{setting: {method: rate}}``, and per ``"setting method"`` the grid tried, each
    rate's mean final loss and admissibility, and whether the best stayed at an edge or no
    rate was admissible (then the least loss among all is taken, and said)."""
    seeds = TUNING_SEEDS[:1] if quick else TUNING_SEEDS
    grids = {(n, m): list(LR_GRID[SETTINGS[n].model]) for n, ms in methods.items() for m in ms}
    grown = {key: [0, 0] for key in grids}  # extensions below, above
    while True:
        todo = [(n, m, seed, lr, quick) for (n, m), grid in grids.items() for lr in grid
                for seed in seeds]  # fmt: skip
        by_rate: dict[tuple, list[list[dict]]] = {}
        for (n, m, _seed, lr, _q), (rows, _arms) in zip(todo, runs.results(todo), strict=True):
            by_rate.setdefault((n, m, lr), []).append(rows)
        best, more = {}, False
        for (n, m), grid in grids.items():
            ratio = grid[1] / grid[0]
            mean = {lr: sum(float(r[-1]["train_loss"]) for r in by_rate[(n, m, lr)]) / len(seeds)
                    for lr in grid}  # fmt: skip
            ok = [lr for lr in grid if admissible(by_rate[(n, m, lr)])]
            if not ok:  # every rate diverged or rose: smaller ones
                if grown[(n, m)][0] < MAX_EXTENSIONS:
                    grid.insert(0, float(f"{grid[0] / ratio:.6g}"))
                    grown[(n, m)][0] += 1
                    more = True
                best[(n, m)] = (min(grid, key=lambda lr: mean.get(lr, math.inf)), mean, ok)
                continue
            lr = min(ok, key=lambda x: mean[x])
            best[(n, m)] = (lr, mean, ok)
            if lr == grid[0] and grown[(n, m)][0] < MAX_EXTENSIONS:
                grid.insert(0, float(f"{grid[0] / ratio:.6g}"))
                grown[(n, m)][0] += 1
                more = True
            elif lr == grid[-1] and grown[(n, m)][1] < MAX_EXTENSIONS:
                grid.append(float(f"{grid[-1] * ratio:.6g}"))
                grown[(n, m)][1] += 1
                more = True
        if not more:
            break
    rates: dict[str, dict[str, float]] = {}
    report: dict[str, Any] = {}
    for (n, m), grid in grids.items():
        lr, mean, ok = best[(n, m)]
        rates.setdefault(n, {})[m] = lr
        report[f"{n} {m}"] = {"grid": grid, "loss": {f"{x:g}": mean[x] for x in grid},
                              "admissible": [f"{x:g}" for x in ok],
                              "at_edge": bool(ok) and lr in (grid[0], grid[-1]),
                              "none_admissible": not ok}  # fmt: skip
    return rates, report
