"""A run's evaluations as a table: one line per metric of each evaluation, at the run's cost so
far, kept in memory and written beside the records (:func:`eegrad.results.evaluations_beside`),
so that ``eegrad plot`` draws them against the cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..results import append_row, read_table, write_table

__all__ = ["EVALUATION_COLUMNS", "EvaluationTable"]

#: Columns of the evaluations' table: one line per metric of an evaluation after
#: ``server_round`` (0: the initial model), at the run's ``cost`` so far; ``source`` is
#: ``server`` (Flower's ``evaluate_fn``) or ``clients`` (federated evaluation).
EVALUATION_COLUMNS = ("server_round", "cost", "source", "metric", "value")


class EvaluationTable:
    """The evaluations of one run, written to ``path`` (None: kept in memory only)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        #: One dict a line (:data:`EVALUATION_COLUMNS`).
        self.rows: list[dict[str, Any]] = []
        self._started = False  # the header written this run

    def add(self, server_round: int, cost: float, source: str, metrics: Any) -> None:
        """Keep (and write) an evaluation's scalar metrics."""
        rows = [{"server_round": server_round, "cost": cost, "source": source,
                 "metric": str(k), "value": float(v)} for k, v in dict(metrics).items()
                if isinstance(v, int | float | np.number) and not isinstance(v, bool)]  # fmt: skip
        self.rows.extend(rows)
        if self.path is None or not rows:
            return
        if not self._started:  # the header, and the rounds a resume keeps
            write_table(self.path, self.rows, EVALUATION_COLUMNS)
            self._started = True
        else:
            for row in rows:
                append_row(self.path, row, EVALUATION_COLUMNS)

    def has(self, server_round: int, source: str) -> bool:
        """Whether an evaluation of ``source`` after ``server_round`` is kept."""
        return any(r["server_round"] == server_round and r["source"] == source
                   for r in self.rows)  # fmt: skip

    def keep_until(self, server_round: int) -> None:
        """On resume: the lines of the rounds the checkpoint holds, nothing after them (a file
        this table did not write is begun again)."""
        if self.path is None or not self.path.exists():
            return
        try:
            self.rows = [{**r, "server_round": int(r["server_round"]), "cost": float(r["cost"]),
                          "value": float(r["value"])}
                         for r in read_table(self.path) if int(r["server_round"]) <= server_round]  # fmt: skip
        except (KeyError, ValueError):
            self.rows = []
        write_table(self.path, self.rows, EVALUATION_COLUMNS)
        self._started = True
