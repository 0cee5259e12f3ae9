"""Sweeps: a base experiment times a grid of axes, in chunks of realizations, through
``joblib.Parallel`` — loky processes locally, a Dask cluster or Ray when asked.

A sweep file (TOML)::

    name = "sweep-quick"
    seed = 1
    realizations = 400        # per cell
    chunk = 100               # realizations per task
    base = "rules"            # a preset's name, or a [base] table (an experiment config)

    [axes]                    # any config key (dotted), each a non-empty list
    T = [[100, 1000]]
    selector = [{rule = "eegrad", c = 1.0}, {rule = "thompson"}]

Each (cell, chunk) is a task: the cell's configuration with ``realizations = chunk`` and the
random-stream prefix ``spawn_key = [cell, chunk]`` (``SeedSequence(seed, spawn_key=...)``), so a
task's numbers depend on the seed and its indices only. Finished tasks are written atomically to
``OUT/tasks/`` as they complete; a rerun skips them, so a sweep killed at any moment loses only
the tasks in flight. ``OUT/manifest.json`` holds the resolved sweep and its hash: a folder made
by a different sweep is refused with the keys that differ. The merged table ``results.csv``
combines a cell's chunks in chunk order (means and standard errors from the chunks' sums), so it
is byte-identical whatever the executor, the number of jobs or the order of completion.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._extras import require_cli
from .config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    config_to_dict,
    preset_path,
    read_toml,
)
from .results import environment, write_json, write_table
from .studies import config_from_dict, run_study

__all__ = ["EXECUTORS", "Sweep", "load_sweep", "merge_rows", "run_sweep"]

EXECUTORS = ("local", "dask", "ray")
#: Seconds to wait for a Dask scheduler at --address before giving up with one line.
CONNECT_TIMEOUT_S = 5

def merge_spec(study: str) -> Any:
    """The registered study's merge rule: key columns, (mean, SE) pairs merged from chunks, and
    the columns averaged with the realizations as weights; None if it cannot be swept."""
    from .studies import study_kind

    return study_kind(study).merge


@dataclass(frozen=True)
class Sweep:
    """A resolved sweep: the base configuration (as data), the axes, and the chunking."""

    name: str
    seed: int
    realizations: int
    chunk: int
    base: dict[str, Any]
    axes: dict[str, list[Any]]
    source: str = "the sweep"

    def resolved(self) -> dict[str, Any]:
        """The sweep as plain data: name, seed, realizations, chunk, base and axes."""
        return {"name": self.name, "seed": self.seed, "realizations": self.realizations,
                "chunk": self.chunk, "base": self.base, "axes": self.axes}  # fmt: skip

    def digest(self) -> str:
        """SHA-256 of :meth:`resolved`: what a resumed sweep's manifest must match."""
        text = json.dumps(self.resolved(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def cells(self) -> list[tuple[dict[str, Any], ExperimentConfig]]:
        """Every combination of axis values (the first axis varies slowest), with its config."""
        keys = list(self.axes)
        out = []
        for values in itertools.product(*(self.axes[k] for k in keys)):
            point = dict(zip(keys, values, strict=True))
            data = apply_overrides(self.base, point)
            data.update(seed=self.seed, realizations=self.chunk)
            out.append((point, config_from_dict(data, where=self.source)))
        return out

    def chunks(self) -> list[int]:
        """Realizations of each chunk of a cell (the last may be smaller)."""
        full, rest = divmod(self.realizations, self.chunk)
        return [self.chunk] * full + ([rest] if rest else [])


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file; every cell's configuration is checked before anything
    runs (an unknown axis key, an empty list or a value of the wrong type is a ConfigError)."""
    path = Path(path)
    where = str(path)
    data = read_toml(path, "Sweep file")
    allowed = {"name", "seed", "realizations", "chunk", "base", "axes"}
    for key in data:
        if key not in allowed:
            raise ConfigError(f"Unknown key {key!r} in {where}. Expected one of: "
                              f"{', '.join(sorted(allowed))}.")  # fmt: skip

    def integer(key: str, default: int | None, minimum: int) -> int:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"Key {key!r} in {where} must be an integer >= {minimum}. "
                              f"Got {value!r} instead.")  # fmt: skip
        return value

    seed = integer("seed", 0, 0)
    realizations = integer("realizations", None, 1)
    chunk = integer("chunk", min(realizations, 1000), 1)
    base_value = data.get("base", {})
    if isinstance(base_value, str):
        base = read_toml(preset_path(base_value))
    elif isinstance(base_value, dict):
        base = copy.deepcopy(base_value)
    else:
        raise ConfigError(f"Key 'base' in {where} must be a preset's name or a table. "
                          f"Got {base_value!r} instead.")  # fmt: skip
    axes = data.get("axes", {})
    if not isinstance(axes, dict):
        raise ConfigError(f"Key 'axes' in {where} must be a table of lists.")
    axes = _flatten(axes)  # TOML reads `selector.c = [...]` as a nested table
    for key, values in axes.items():
        if key in ("seed", "realizations", "spawn_key"):
            raise ConfigError(f"Axis {key!r} in {where} is set by the sweep itself (its 'seed', "
                              "'realizations' and 'chunk'); it cannot be an axis.")  # fmt: skip
        if not isinstance(values, list) or not values:
            raise ConfigError(f"Axis {key!r} in {where} must be a non-empty list of values. "
                              f"Got {values!r} instead.")  # fmt: skip
    name = data.get("name", path.stem)
    if not isinstance(name, str):
        raise ConfigError(f"Key 'name' in {where} must be a string. Got {name!r} instead.")
    base.setdefault("name", name)
    sweep = Sweep(name, seed, realizations, chunk, base, axes, where)
    cells = sweep.cells()  # validates every cell
    study = cells[0][1].study
    if merge_spec(study) is None:
        from .studies import all_studies

        sweepable = ", ".join(k.name for k in all_studies() if k.merge is not None)
        raise ConfigError(f"Study {study!r} cannot be swept (its statistic is not a mean over "
                          f"realizations); sweepable: {sweepable}.")  # fmt: skip
    return sweep


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        full = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            out.update(_flatten(value, full))
        else:
            out[full] = value
    return out


def _run_task(cfg_data: dict[str, Any]) -> list[dict[str, Any]]:
    """One task, in a worker: run the study on one chunk; returns its rows."""
    return run_study(config_from_dict(cfg_data, own_keys=False)).rows  # written out whole


def _task_path(out: Path, cell: int, chunk: int) -> Path:
    return out / "tasks" / f"cell{cell:05d}-chunk{chunk:05d}.json"


def _check_manifest(out: Path, sweep: Sweep) -> None:
    path = out / "manifest.json"
    if not path.exists():
        write_json(path, {"hash": sweep.digest(), "sweep": sweep.resolved()})
        return
    old = json.loads(path.read_text(encoding="utf-8"))
    if old.get("hash") == sweep.digest():
        return
    changed = _diff(old.get("sweep", {}), json.loads(json.dumps(sweep.resolved(), default=str)))
    raise ConfigError(
        f"The results folder {str(out)!r} belongs to another sweep (hash {old.get('hash', '?')[:12]}"
        f" != {sweep.digest()[:12]}); changed: {', '.join(changed) or 'unknown'}. Use another "
        "--out, or delete the folder to start over."
    )


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _diff(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else str(k))
        return out
    return [] if a == b else [f"{prefix} ({a!r} -> {b!r})"]


def _parallel_context(executor: str, jobs: int | None, address: str | None):
    """joblib's backend for the executor, and a clean-up callable."""
    require_cli("eegrad's sweeps")
    import joblib

    if executor == "local":
        return joblib.parallel_config(backend="loky", n_jobs=jobs or -1), lambda: None
    if executor == "dask":
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as exc:  # pragma: no cover - the 'dist' extra is missing
            raise ConfigError("--executor dask needs the 'dist' extra: "
                              "pip install 'eegrad[dist]'") from exc  # fmt: skip
        if address:
            try:
                client = Client(address, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                raise ConfigError(f"--address {address}: no Dask scheduler answered within "
                                  f"{CONNECT_TIMEOUT_S} s ({type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else 'no reply'})."
                                  ) from None  # fmt: skip
            cluster = None
        else:
            cluster = LocalCluster(n_workers=jobs or 2, threads_per_worker=1, processes=True,
                                   dashboard_address=None)  # fmt: skip
            client = Client(cluster)

        def close() -> None:
            client.close()
            if cluster is not None:
                cluster.close()

        return joblib.parallel_config(backend="dask", n_jobs=-1), close
    raise ConfigError(f"No joblib backend for executor {executor!r}.")  # Ray: _ray_results


def _ray_results(todo: list, jobs: int | None, address: str | None):
    """Run the tasks as Ray tasks and yield each result as it completes (Ray's joblib backend
    returns them only all at once, which an interrupted sweep would lose). Uses a running Ray
    (``ray.init`` done by the caller, or ``--address``), else starts a local one with ``jobs``
    CPUs and stops it afterwards."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("--executor ray needs Ray: pip install 'ray[default]' (it also comes "
                          "with the 'flower' extra)") from exc  # fmt: skip
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=address, num_cpus=None if address else jobs,
                     include_dashboard=False, log_to_driver=False)  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"--address {address}: no Ray cluster answered "
                              f"({type(exc).__name__}: {exc}).") from None  # fmt: skip
    try:
        task = ray.remote(_with_key)
        pending = [task.remote(key, data) for key, data in todo]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        if started:
            ray.shutdown()


def run_sweep(
    sweep: Sweep,
    out: str | Path,
    *,
    executor: str = "local",
    jobs: int | None = None,
    address: str | None = None,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Run every task not yet in ``out``, then merge all into ``out/results.csv``."""
    require_cli("eegrad's sweeps")
    import joblib
    from tqdm.auto import tqdm

    if executor not in EXECUTORS:
        raise ConfigError(f"The 'executor' must be one of {', '.join(EXECUTORS)}. "
                          f"Got {executor!r} instead.")  # fmt: skip
    out = Path(out)
    start = time.perf_counter()
    cells = sweep.cells()
    sizes = sweep.chunks()
    _check_manifest(out, sweep)
    # A process killed while writing leaves a hidden temporary file: never read, removed here.
    for stale in (out / "tasks").glob(".*.tmp"):
        stale.unlink(missing_ok=True)
    todo = []
    for ci, (_, cfg) in enumerate(cells):
        for ki, size in enumerate(sizes):
            if not _task_path(out, ci, ki).exists():
                data = config_to_dict(cfg)
                data.update(realizations=size, spawn_key=[ci, ki])
                todo.append(((ci, ki), data))
    total = len(cells) * len(sizes)
    with tqdm(total=total, initial=total - len(todo), disable=quiet, file=sys.stderr,
              unit="task", desc=sweep.name) as bar:  # fmt: skip
        if todo and executor == "ray":
            for (ci, ki), rows in _ray_results(todo, jobs, address):
                write_json(_task_path(out, ci, ki), {"rows": rows})  # saved as it completes
                bar.update(1)
        elif todo:
            context, close = _parallel_context(executor, jobs, address)
            try:
                with context:
                    results = joblib.Parallel(return_as="generator_unordered")(
                        joblib.delayed(_with_key)(key, data) for key, data in todo
                    )
                    for (ci, ki), rows in results:
                        write_json(_task_path(out, ci, ki), {"rows": rows})
                        bar.update(1)
            finally:
                close()
    merged = merge_rows(sweep, cells, out)
    study = cells[0][1].study
    key_cols, pairs, means = merge_spec(study)
    axis_cols = [a for a in sweep.axes if a not in key_cols]
    columns = (*axis_cols, *key_cols, *(c for p in pairs for c in p), *means, "realizations")
    write_table(out / "results.csv", merged, columns)
    write_json(out / "metadata.json", {
        "name": sweep.name, "seed": sweep.seed, "hash": sweep.digest(), "sweep": sweep.resolved(),
        "cells": len(cells), "tasks": total, "tasks_run_now": len(todo), "executor": executor,
        "jobs": jobs, "wall_time_s": round(time.perf_counter() - start, 3),
        "environment": environment(),
    })  # fmt: skip
    return merged


def _with_key(key: tuple[int, int], data: dict[str, Any]):
    return key, _run_task(data)


def axis_label(value: Any) -> Any:
    """A table cell for an axis value: a selector table becomes its name."""
    if isinstance(value, dict):
        if "label" in value:
            return value["label"]
        if "rule" in value:
            extra = ",".join(f"{k}={v}" for k, v in sorted(value.items()) if k != "rule")
            return value["rule"] + (f"({extra})" if extra else "")
        return json.dumps(value, sort_keys=True)
    if isinstance(value, list):
        return " ".join(map(str, value))
    return value


def merge_rows(sweep: Sweep, cells: list, out: Path) -> list[dict[str, Any]]:
    """Combine each cell's chunk rows, in chunk order, into one row per key."""
    study = cells[0][1].study
    key_cols, pairs, means = merge_spec(study)
    merged = []
    for ci, (point, _) in enumerate(cells):
        chunk_rows = [json.loads(_task_path(out, ci, ki).read_text(encoding="utf-8"))["rows"]
                      for ki in range(len(sweep.chunks()))]  # fmt: skip
        for i, first in enumerate(chunk_rows[0]):
            parts = [rows[i] for rows in chunk_rows]
            row = {a: axis_label(v) for a, v in point.items() if a not in key_cols}
            row.update({k: first[k] for k in key_cols})
            n = [p["realizations"] for p in parts]
            N = sum(n)
            for m_col, s_col in pairs:
                row[m_col], row[s_col] = _merge_mean_se([p[m_col] for p in parts],
                                                        [p[s_col] for p in parts], n)  # fmt: skip
            for col in means:
                row[col] = sum(p[col] * k for p, k in zip(parts, n, strict=True)) / N
            row["realizations"] = N
            merged.append(row)
    return merged


def _merge_mean_se(means: list[float], ses: list[float], n: list[int]) -> tuple[float, float]:
    """Pooled mean and standard error from chunks' means, standard errors and sizes."""
    if any(m is None or (isinstance(m, float) and math.isnan(m)) for m in means):
        return float("nan"), float("nan")
    N = sum(n)
    mean = sum(m * k for m, k in zip(means, n, strict=True)) / N
    sumsq = 0.0
    for m, s, k in zip(means, ses, n, strict=True):
        var = 0.0 if k < 2 or s is None or math.isnan(s) else s * s * k  # sample variance
        sumsq += (k - 1) * var + k * m * m
    if N < 2:
        return mean, float("nan")
    var = max(sumsq - N * mean * mean, 0.0) / (N - 1)
    return mean, math.sqrt(var / N)
