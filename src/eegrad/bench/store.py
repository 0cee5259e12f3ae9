"""The table of the bench's baseline runs, kept in the repository beside its report.

Every method that no change of eegrad's default touches (each fixed n, your FedAvg, the
schedules, the default's ending given to a fixed n, ISP and BARA-style: all but
:data:`~eegrad.bench.runner.RULE_METHODS`) has its runs kept in one compressed table,
``docs/bench-runs.csv.gz``, one line a run: its key (:func:`~eegrad.bench.runner.run_key`:
setting, seed, rate, the harness's version and the method's code), what names it, and its
evaluations and arms as space-separated lists. A bench run takes a run from it wherever the
key is today's, so that a rule change from a fresh clone reruns the rule alone; a run whose
key is not there (a changed harness or baseline, a new setting) is run. ``eegrad bench``
writes the table of its own baseline runs as ``DIR/bench-runs.csv.gz``; copied over the
repository's, it is what later runs take.

The values are written as Python writes a float (the shortest repr that reads back the same
number), so a run taken from the table is the run that made it, digit for digit.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..results import atomic_write_bytes

__all__ = ["FIELDS", "TableRun", "default_table", "read_table", "write_table"]

#: The table's columns.
FIELDS = ("key", "setting", "dataset", "split", "method", "seed", "lr", "round", "cost",
          "wall_clock", "train_loss", "test_accuracy", "n")  # fmt: skip
#: The columns that are lists, one value an evaluation (``n``: one a round).
_LISTS = ("round", "cost", "wall_clock", "train_loss", "test_accuracy", "n")

#: One run of the table: its key, its learning rate, its evaluation rows and its arms.
TableRun = tuple[str, float, list[dict[str, Any]], list[dict[str, Any]]]


def default_table() -> Path:
    """The repository's table, ``docs/bench-runs.csv.gz`` beside the package's source (in a
    clone; an installed package has none, and every run is run)."""
    return Path(__file__).resolve().parents[3] / "docs" / "bench-runs.csv.gz"


def read_table(path: str | Path | None) -> dict[str, tuple[list[dict], list[dict]]]:
    """The runs of the table at ``path`` by key (none where there is no file); a line that
    does not read back whole is left out (its run is run again)."""
    if path is None or not Path(path).exists():
        return {}
    with gzip.open(path, "rt", newline="") as fh:
        lines = list(csv.DictReader(fh))
    out: dict[str, tuple[list[dict], list[dict]]] = {}
    for line in lines:
        try:
            name, method, seed = line["setting"], line["method"], int(line["seed"])
            cols = {k: line[k].split() for k in _LISTS}
            rounds = [int(r) for r in cols["round"]]
            values = {k: [float(x) for x in cols[k]]
                      for k in ("cost", "wall_clock", "train_loss", "test_accuracy")}  # fmt: skip
            if not rounds or any(len(v) != len(rounds) for v in values.values()):
                continue
            if any(math.isnan(x) for v in values.values() for x in v):
                continue
            rows = [{"setting": name, "dataset": line["dataset"], "split": line["split"],
                     "method": method, "seed": seed, "round": r,
                     **{k: values[k][i] for k in values}} for i, r in enumerate(rounds)]  # fmt: skip
            arms = [{"setting": name, "method": method, "seed": seed, "round": i + 1,
                     "n": int(n)} for i, n in enumerate(cols["n"])]  # fmt: skip
        except (KeyError, ValueError, AttributeError):
            continue
        out[line["key"]] = (rows, arms)
    return out


def write_table(path: str | Path, runs: Iterable[TableRun]) -> Path:
    """Write the runs (key, rate, rows, arms) as the table at ``path`` (atomically), sorted by
    setting, method, seed and key, so that the same runs give the same file."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    lines = []
    for key, lr, rows, arms in runs:
        first = rows[0]
        lines.append({"key": key, "setting": first["setting"], "dataset": first["dataset"],
                      "split": first["split"], "method": first["method"],
                      "seed": int(first["seed"]), "lr": repr(float(lr)),
                      **{k: " ".join(repr(float(r[k])) for r in rows)
                         for k in ("cost", "wall_clock", "train_loss", "test_accuracy")},
                      "round": " ".join(str(int(r["round"])) for r in rows),
                      "n": " ".join(str(int(a["n"])) for a in arms)})  # fmt: skip
    lines.sort(key=lambda x: (x["setting"], x["method"], x["seed"], x["key"]))
    writer.writerows(lines)
    data = gzip.compress(buf.getvalue().encode(), compresslevel=9, mtime=0)
    atomic_write_bytes(Path(path), data)
    return Path(path)
