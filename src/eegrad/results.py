"""Results are data: tidy CSV tables, ``metadata.json`` and figures, written atomically.

Every write goes to a temporary file in the destination folder, then ``os.replace`` puts it in
place, so a reader (or an interrupted run) never sees a half-written file.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import os
import platform
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

__all__ = ["append_row", "atomic_write", "atomic_write_bytes", "environment", "evaluations_beside",
           "format_value", "read_table", "write_json", "write_table"]  # fmt: skip


def evaluations_beside(records: str | Path) -> Path:
    """Where a federated run's evaluations are kept beside its records table:
    ``<stem>-evaluation.csv`` (written by :class:`~eegrad.flower.EEGradStrategy`, read by
    ``eegrad plot``)."""
    records = Path(records)
    return records.with_name(f"{records.stem}-evaluation.csv")


@functools.cache
def _umask() -> int:
    """The process's umask (read once: reading it means setting it for a moment)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it to ``path``,
    with the permissions a plain ``open(path, "w")`` would give (0666 less the umask; a
    temporary file is 0600). An interrupted write leaves ``path`` as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (:func:`atomic_write`)."""
    atomic_write(path, lambda fh: fh.write(data))


def format_value(x: Any) -> str:
    """A cell: shortest round-trip repr for floats (byte-stable), empty for NaN. NumPy floats
    are written as Python floats (NumPy 2's repr would write ``np.float64(...)``)."""
    if isinstance(x, float | np.floating):
        return "" if math.isnan(x) else repr(float(x))
    return str(x)


def write_table(path: str | Path, rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> None:
    """A tidy CSV: a header of ``columns``, then one line per row."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([format_value(row[c]) for c in columns])
    atomic_write_bytes(path, buf.getvalue().encode("utf-8"))


def append_row(path: str | Path, row: dict[str, Any], columns: Sequence[str]) -> None:
    """Append one line to a table written by :func:`write_table` (for a table that grows by a
    row at a time: each round costs one line, not a rewrite of the file)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([format_value(row[c]) for c in columns])
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(buf.getvalue())
        fh.flush()
        os.fsync(fh.fileno())


def read_table(path: str | Path) -> list[dict[str, str]]:
    """Rows of a CSV written by :func:`write_table`, as strings."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_json(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented, key-sorted JSON, atomically (arrays as lists)."""
    text = json.dumps(data, indent=2, sort_keys=True, default=_jsonable) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def _jsonable(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def environment() -> dict[str, Any]:
    """Versions of Python, eegrad and its dependencies (for metadata)."""
    versions = {}
    for pkg in ("eegrad", "numpy", "scipy", "matplotlib", "tqdm", "joblib", "numba"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "versions": versions,
    }
