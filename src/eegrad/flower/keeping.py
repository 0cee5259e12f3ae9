"""What a federated run keeps beyond the server's memory, as a part
:class:`~eegrad.flower.EEGradStrategy` holds: its records as a CSV (``csv_path``), its
evaluations beside them (``<stem>-evaluation.csv``), and its checkpoint (``checkpoint``), each
optional.

After every round :meth:`RunKeeping.after_round` appends the round's record and replaces the
checkpoint (configuration's fingerprint, the run's state, the round's model; written
atomically by :mod:`eegrad.flower.checkpointing`); at the start of a run
:meth:`RunKeeping.resume` reads a checkpoint that exists, checks it is this run's and
consistent, and rewrites the records and evaluations to the rounds it holds; a run that stops
early says what it keeps (:meth:`RunKeeping.kept`). The strategy reads with no branch for
whether it keeps any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..results import append_row, evaluations_beside, write_table
from .checkpointing import check_fingerprint, check_state, read_run, restore_run, save_run
from .evaluations import EvaluationTable
from .state import RunState

__all__ = ["RunKeeping"]


class RunKeeping:
    """The records' CSV, the evaluations beside it and the checkpoint of a run.

    Parameters
    ----------
    csv_path : str or Path, optional
        The records, a tidy CSV with a line a round (None: not written).
    checkpoint : str or Path, optional
        The checkpoint, replaced after every round and resumed from when it exists (None: none).
    """

    def __init__(self, csv_path: str | Path | None, checkpoint: str | Path | None) -> None:
        self.csv_path = None if csv_path is None else Path(csv_path)
        self.checkpoint = None if checkpoint is None else Path(checkpoint)
        self.fresh()

    def fresh(self) -> None:
        """A new run: its evaluations' table empty (:attr:`evaluations`)."""
        #: The run's evaluations, written beside the records (:mod:`eegrad.flower.evaluations`).
        self.evaluations = EvaluationTable(self.evaluation_path)

    @property
    def evaluation_path(self) -> Path | None:
        """Where the evaluations are written: ``<stem>-evaluation.csv`` beside ``csv_path``."""
        return None if self.csv_path is None else evaluations_beside(self.csv_path)

    @property
    def resumes(self) -> bool:
        """Whether a run starts from a checkpoint (one is given and exists)."""
        return self.checkpoint is not None and self.checkpoint.exists()

    def after_round(self, state: RunState, columns: tuple[str, ...], fingerprint: dict[str, Any],
                    snapshot: Callable[[], dict[str, np.ndarray]]) -> None:  # fmt: skip
        """Write the round just recorded (the last of ``state.records``: the header with the
        first) and the checkpoint of the run after it (``snapshot()``, called only where a
        checkpoint is written: brings the state up to date and returns the round's model's
        arrays by name)."""
        if self.csv_path is not None:
            if len(state.records) == 1:
                write_table(self.csv_path, state.records, columns)
            else:
                append_row(self.csv_path, state.records[-1], columns)
        if self.checkpoint is not None:
            save_run(self.checkpoint, fingerprint, state, snapshot())

    def resume(self, state: RunState, fingerprint: dict[str, Any],
               initial: dict[str, np.ndarray], setup: Callable[[int, int], None],
               columns: tuple[str, ...]) -> dict[str, np.ndarray]:  # fmt: skip
        """Load the checkpoint into the fresh ``state`` (refused, naming the difference, where
        it is another run's or contradicts itself; ``setup(K, d)`` builds the rule for the
        saved K and d first), keep the records and evaluations to its rounds, and return the
        saved model's arrays by name."""
        saved = read_run(self.checkpoint)
        check_fingerprint(saved, fingerprint, initial)
        check_state(saved)
        setup(saved.field("num_nodes"), saved.field("dim"))
        restore_run(state, saved)
        if self.csv_path is not None:  # the rounds the checkpoint holds, nothing after them
            write_table(self.csv_path, state.records, columns)
            self.evaluations.keep_until(state.server_round)
        return saved.model

    def kept(self, rounds_done: int) -> str:
        """What a run that stopped after ``rounds_done`` rounds keeps, in words for its log."""
        kept = [f"{what} {path}" for what, path in (("records", self.csv_path),
                ("checkpoint", self.checkpoint)) if path is not None]  # fmt: skip
        if not kept:
            return "nothing was kept (give csv_path= and checkpoint= to keep a run and resume it)"
        return f"kept: {', '.join(kept)}, rounds 1 to {rounds_done}" + (
            "; start it again to resume" if self.checkpoint is not None else "")
