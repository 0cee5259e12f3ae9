"""Checkpoint and resume of a federated run: (configuration, state, model) in one file.

After each round :class:`~eegrad.flower.EEGradStrategy` writes (:func:`save_run`) its
configuration's fingerprint (what a run must share to continue this one: budget, D, rule,
privacy, inner strategy and its hyperparameters, the model's arrays), its
:class:`~eegrad.flower.state.RunState` and the round's model, in the format of
:mod:`eegrad.checkpoint` (``.npz`` arrays and a JSON tree, replaced atomically; never a pickle).
On resume, :func:`read_run` loads the file and :func:`check_fingerprint` refuses a checkpoint of
another run, naming each difference; :func:`restore_run` loads the saved state into a fresh one
built for the saved K and d. This module knows the state and the fingerprint, not the strategy.
"""

from __future__ import annotations

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

__all__ = ["SavedRun", "check_fingerprint", "model_fingerprint", "read_run", "restore_run",
           "save_run"]  # fmt: skip


def model_fingerprint(model: dict[str, np.ndarray]) -> list[list[Any]]:
    """The model's arrays as a fingerprint names them: [name, shape, dtype] each."""
    return [[k, list(a.shape), np.dtype(a.dtype).str] for k, a in model.items()]


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
    """Read a checkpoint written by :func:`save_run`."""
    tree, arrays = read_checkpoint(path)
    keys = tree["model keys"]
    model = {k: arrays.pop(f"model{i}") for i, k in enumerate(keys)}
    return SavedRun(Path(path), tree["fingerprint"], tree["state"], arrays, model)


def check_fingerprint(saved: SavedRun, fingerprint: dict[str, Any],
                      model: dict[str, np.ndarray]) -> None:  # fmt: skip
    """Refuse (:class:`~eegrad.checkpoint.CheckpointError`) a checkpoint whose fingerprint
    differs from this run's (``fingerprint`` and the ``model`` it starts from), naming every
    difference."""
    here = {**fingerprint, "model arrays": model_fingerprint(model)}
    keys = list(saved.fingerprint) + [k for k in here if k not in saved.fingerprint]
    differ = [k for k in keys if saved.fingerprint.get(k) != here.get(k)]
    if differ:
        what = "; ".join(f"{k}: {saved.fingerprint.get(k)!r} in the checkpoint, "
                         f"{here.get(k)!r} here" for k in differ)  # fmt: skip
        raise CheckpointError(f"The checkpoint {saved.path} is of another run: {what}.")


def restore_run(state: RunState, saved: SavedRun) -> None:
    """Load the saved state into ``state``, whose estimator (and private release) are built
    for the saved K and d: the rule's and the estimator's arrays and the generators in place."""
    fields = saved.tree["__dict__"]
    missing = [k for k in state.state_dict() if k not in fields]
    if missing:
        raise CheckpointError(f"The checkpoint {saved.path} has no {missing[0]!r}: it is of "
                              "another version of eegrad.flower.")  # fmt: skip
    restored = restore_state(state.state_dict(), saved.tree, saved.arrays, "checkpoint")
    state.load_state_dict(restored)
