"""Checkpoint and resume of a federated run: (configuration, state, model) in one file.

After each round :class:`~eegrad.flower.EEGradStrategy` writes (:func:`save_run`) its
configuration's fingerprint (what a run must share to continue this one: budget, D, rule,
privacy, inner strategy and its hyperparameters, the model's arrays), its
:class:`~eegrad.flower.state.RunState` and the round's model, in the format of
:mod:`eegrad.checkpoint` (``.npz`` arrays and a JSON tree, replaced atomically; never a pickle).
On resume, :func:`read_run` loads the file and checks its layout (a damaged, truncated or edited
file is refused naming the file and what is wrong, never loaded half-way),
:func:`check_fingerprint` refuses a checkpoint of another run, naming each difference (the seed
included), :func:`check_state` refuses a state that contradicts itself (the rounds done, their
records, the steps, the cost, K and d), and :func:`restore_run` loads the saved state into a
fresh one built for the saved K and d. This module knows the state and the fingerprint, not the strategy.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..checkpoint import (
    CheckpointError,
    capture_state,
    read_checkpoint,
    restore_state,
    write_checkpoint,
)
from .state import RunState

__all__ = ["SavedRun", "check_fingerprint", "check_state", "model_digest", "model_fingerprint",
           "read_run", "restore_run", "save_run"]  # fmt: skip


def model_fingerprint(model: dict[str, np.ndarray]) -> list[list[Any]]:
    """The model's arrays as a fingerprint names them: [name, shape, dtype] each."""
    return [[k, list(a.shape), np.dtype(a.dtype).str] for k, a in model.items()]


def model_digest(model: dict[str, np.ndarray]) -> str:
    """The model's values as a fingerprint names them: the SHA-256 of every array's name,
    dtype, shape and bytes, in order (two initial models of the same names and shapes differ
    here where their values do)."""
    digest = hashlib.sha256()
    for name, a in model.items():
        a = np.ascontiguousarray(a)
        digest.update(f"{name}|{np.dtype(a.dtype).str}|{a.shape}|".encode())
        digest.update(a.tobytes())
    return f"sha256:{digest.hexdigest()}"


def save_run(path: str | Path, fingerprint: dict[str, Any], state: RunState,
             model: dict[str, np.ndarray]) -> None:  # fmt: skip
    """Write the run after a round (replacing the previous checkpoint atomically):
    ``fingerprint`` the configuration's, ``state`` the run's, ``model`` the round's arrays by
    name."""
    tree, arrays = capture_state(state.state_dict())
    for i, a in enumerate(model.values()):
        arrays[f"model{i}"] = a
    doc = {"fingerprint": {**fingerprint, "model arrays": model_fingerprint(model)},
           "model keys": list(model), "state": tree}  # fmt: skip
    write_checkpoint(path, doc, arrays)


@dataclass
class SavedRun:
    """A checkpoint as read: its fingerprint, its state's tree and arrays, and its model."""

    path: Path
    fingerprint: dict[str, Any]
    tree: Any
    arrays: dict[str, np.ndarray]
    model: dict[str, np.ndarray]

    def field(self, name: str) -> Any:
        """One plain field of the saved state (e.g. ``num_nodes``), before it is restored."""
        return self.tree["__dict__"][name]


def read_run(path: str | Path) -> SavedRun:
    """Read a checkpoint written by :func:`save_run`; its layout (the fingerprint, the model's
    names, arrays, shapes and dtypes, the state's tree) is checked, and anything else is
    refused with a :class:`~eegrad.checkpoint.CheckpointError` naming the file and what is
    wrong."""
    path = Path(path)
    tree, arrays = read_checkpoint(path)

    def damaged(what: str) -> CheckpointError:
        return CheckpointError(f"The checkpoint {path} is damaged: {what}.")

    if not isinstance(tree, dict):
        raise damaged("its tree is no mapping")
    for key, kind in (("fingerprint", dict), ("model keys", list), ("state", dict)):
        if not isinstance(tree.get(key), kind):
            raise damaged(f"{key!r} is missing or not a {kind.__name__}")
    keys = tree["model keys"]
    if not all(isinstance(k, str) for k in keys):
        raise damaged("its model's names are not all strings")
    missing = [f"model{i}" for i in range(len(keys)) if f"model{i}" not in arrays]
    if missing:
        raise damaged(f"the model's array {missing[0]!r} is missing")
    model = {k: arrays.pop(f"model{i}") for i, k in enumerate(keys)}
    declared = tree["fingerprint"].get("model arrays")
    if declared != model_fingerprint(model):
        raise damaged(f"its model's arrays (name, shape, dtype) are {model_fingerprint(model)}, "
                      f"where its fingerprint says {declared}")  # fmt: skip
    if not isinstance(tree["state"].get("__dict__"), dict):
        raise damaged("its state is no mapping of fields")
    return SavedRun(path, tree["fingerprint"], tree["state"], arrays, model)


def check_state(saved: SavedRun) -> None:
    """Refuse a saved state whose plain fields contradict each other or the model: the round
    count, the steps, the cost, K and d, and one record per round done, in order."""
    fields = saved.tree["__dict__"]

    def damaged(what: str) -> CheckpointError:
        return CheckpointError(f"The checkpoint {saved.path} is damaged: {what}.")

    def integer(name: str, least: int) -> int:
        value = fields.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise damaged(f"{name} is {value!r}, not an integer >= {least}")
        return value

    rounds = integer("server_round", 0)
    steps = integer("steps_taken", 0)
    if steps > rounds:
        raise damaged(f"steps_taken = {steps} exceeds the server rounds done, {rounds}")
    cost = fields.get("cost")
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not np.isfinite(cost) \
            or cost < 0:  # fmt: skip
        raise damaged(f"cost is {cost!r}, not a finite number >= 0")
    if rounds:
        integer("num_nodes", 1)
        dim = integer("dim", 1)
        size = sum(int(a.size) for a in saved.model.values())
        if dim != size:
            raise damaged(f"dim = {dim}, where its model has {size} numbers")
    records = fields.get("records")
    if not isinstance(records, list) or len(records) != rounds:
        got = f"{len(records)} records" if isinstance(records, list) else repr(records)
        raise damaged(f"it holds {got:.60} for {rounds} server rounds done (one record a round)")
    for i, rec in enumerate(records, start=1):
        row = rec.get("__dict__") if isinstance(rec, dict) else None
        if not isinstance(row, dict) or row.get("server_round") != i:
            raise damaged(f"its record {i} is not that of server round {i}: {rec!r:.80}")


def check_fingerprint(saved: SavedRun, fingerprint: dict[str, Any],
                      model: dict[str, np.ndarray]) -> None:  # fmt: skip
    """Refuse (:class:`~eegrad.checkpoint.CheckpointError`) a checkpoint whose fingerprint
    differs from this run's (``fingerprint`` and the initial ``model`` it starts from: its
    arrays' names, shapes and dtypes, and its values' digest), naming every difference."""
    here = {**fingerprint, "model arrays": model_fingerprint(model),
            "initial model": model_digest(model)}  # fmt: skip
    older = [k for k in here if k not in saved.fingerprint]
    if older:
        raise CheckpointError(
            f"The checkpoint {saved.path} was written by an earlier version of eegrad.flower "
            f"(its fingerprint has no {', '.join(repr(k) for k in older)}): resume it with the "
            "version that wrote it, or remove it to start afresh."
        )
    keys = list(saved.fingerprint) + [k for k in here if k not in saved.fingerprint]
    differ = [k for k in keys if saved.fingerprint.get(k) != here.get(k)]
    if differ == ["initial model"]:
        raise CheckpointError(
            f"The checkpoint {saved.path} continues a run that started from another initial "
            "model (its arrays' names, shapes and dtypes agree, their values differ): give the "
            "initial model that run started from to resume it, or another checkpoint (or "
            f"remove {saved.path}) to train this model afresh."
        )
    if differ:
        what = "; ".join(f"{k}: {saved.fingerprint.get(k)!r} in the checkpoint, "
                         f"{here.get(k)!r} here" for k in differ)  # fmt: skip
        raise CheckpointError(f"The checkpoint {saved.path} is of another run: {what}.")


def restore_run(state: RunState, saved: SavedRun) -> None:
    """Load the saved state into ``state``, whose rule's driver (and private release) are
    built for the saved K and d: the rule's and the driver's arrays and the generators in
    place. A state of another layout (e.g. an earlier version's ``estimator``, where the rule's
    driver is ``rule`` now) is refused naming what differs."""
    fields = saved.tree["__dict__"]
    missing = [k for k in state.state_dict() if k not in fields]
    if missing:
        extra = [k for k in fields if k not in state.state_dict()]
        what = f" and has {', '.join(repr(k) for k in extra)} instead" if extra else ""
        raise CheckpointError(
            f"The checkpoint {saved.path} was written by another version of eegrad.flower: its "
            f"state has no {missing[0]!r}{what}. Resume it with the version that wrote it, or "
            "remove it to start afresh.")
    try:
        restored = restore_state(state.state_dict(), saved.tree, saved.arrays, "checkpoint")
        state.load_state_dict(restored)
    except CheckpointError as err:
        raise CheckpointError(f"The checkpoint {saved.path} cannot be restored: {err}") from err
    except (KeyError, AttributeError, TypeError, ValueError, IndexError) as err:
        raise CheckpointError(f"The checkpoint {saved.path} is damaged: its state cannot be "
                              f"restored ({type(err).__name__}: {err}).") from err
