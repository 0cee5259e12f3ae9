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

**One run a file.** From its start to its end a run holds a lock on each file it keeps
(``<file>.lock`` beside it, :mod:`filelock`: the operating system's lock, so a run that is
killed leaves no lock held); a second run given one of them is refused at its start, naming the
run that holds it (its process, host and start time, written in the lock file), before it
writes or removes anything.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout

from .._validation import InvalidParameterError, fail
from ..results import append_row, evaluations_beside, write_table
from .checkpointing import (
    check_fingerprint,
    check_state,
    model_digest,
    read_run,
    restore_run,
    save_run,
)
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

    def __init__(self, csv_path: str | Path | None, checkpoint: str | Path | None,
                 owner: str = "EEGradStrategy") -> None:  # fmt: skip
        self.csv_path = None if csv_path is None else _file_path(csv_path, "csv_path", owner)
        self.checkpoint = None if checkpoint is None else _file_path(checkpoint, "checkpoint",
                                                                     owner)  # fmt: skip
        if self.csv_path is not None and self.checkpoint is not None:
            mine = {"csv_path": self.csv_path, "the evaluations beside it": self.evaluation_path}
            for what, path in mine.items():
                if path.resolve() == self.checkpoint.resolve():
                    raise fail("checkpoint", owner, f"another file than {what} (each is "
                               "rewritten: the records would be written over the run's "
                               "checkpoint)", str(checkpoint))  # fmt: skip
        self._locks: list[FileLock] = []
        self.fresh()

    def lock(self) -> None:
        """Take the lock of each file this run keeps (``<file>.lock``), or refuse the run,
        naming the run that holds one; held until :meth:`unlock`."""
        self.unlock()
        for name, path in (("csv_path", self.csv_path), ("checkpoint", self.checkpoint)):
            if path is None:
                continue
            lock_path = path.with_name(path.name + ".lock")
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(lock_path), timeout=0)
            try:
                lock.acquire()
            except Timeout:
                self.unlock()
                raise InvalidParameterError(
                    f"The {name!r} of EEGradStrategy, {str(path)!r}, is in use by another run "
                    f"({_holder(lock_path)}): two runs on one file would interleave their "
                    "records and overwrite each other's checkpoint. Wait for that run to end, "
                    f"or give this one another {name}."
                ) from None
            self._locks.append(lock)
            lock_path.write_text(json.dumps({
                "pid": os.getpid(), "host": socket.gethostname(),
                "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}) + "\n")  # fmt: skip

    def unlock(self) -> None:
        """Let go of the locks :meth:`lock` took (a run that ended, or failed)."""
        while self._locks:
            self._locks.pop().release()

    def fresh(self) -> None:
        """A new run: its evaluations' table empty (:attr:`evaluations`), nothing written yet."""
        #: The run's evaluations, written beside the records (:mod:`eegrad.flower.evaluations`).
        self.evaluations = EvaluationTable(self.evaluation_path)
        #: The digest of the model the run started from (:func:`begin`), in its checkpoint.
        self.initial_model: str | None = None
        #: The last round whose checkpoint was written (None: none this run).
        self.saved_round: int | None = None
        #: The last round whose record reached ``csv_path`` (None: none this run).
        self.written_round: int | None = None

    def check_writable(self) -> None:
        """Before the first round trains: each file's folder exists and takes a file (a
        temporary one is written and removed there), so that a run never trains a round it
        cannot keep; then the files' locks are taken (:meth:`lock`, held until
        :meth:`unlock`), and a checkpoint's temporary files left by a write that was killed
        are removed."""
        for name, path in (("csv_path", self.csv_path), ("checkpoint", self.checkpoint)):
            if path is None:
                continue
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryFile(dir=path.parent):
                    pass
                if path.exists() and not os.access(path, os.R_OK | os.W_OK):
                    raise PermissionError(f"{path} cannot be read and written")
            except OSError as err:
                raise InvalidParameterError(
                    f"The {name!r} of EEGradStrategy, {str(path)!r}, cannot be written "
                    f"({type(err).__name__}: {err}); give a file in a folder the run can write, "
                    "before any round trains."
                ) from err
        self.lock()  # one run a file: nothing of another run's is removed below
        for path in (self.csv_path, self.checkpoint):
            if path is not None:
                _remove_stale_temporaries(path)

    def begin(self, initial: dict[str, np.ndarray]) -> None:
        """A run starts from the model ``initial`` (its arrays by name): its digest goes into
        every checkpoint, so that a run given another initial model does not resume it."""
        self.initial_model = model_digest(initial)

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
            self.written_round = state.server_round
        if self.checkpoint is not None:
            save_run(self.checkpoint, {**fingerprint, "initial model": self.initial_model},
                     state, snapshot())  # fmt: skip
            self.saved_round = state.server_round

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
        self.saved_round = state.server_round
        if self.csv_path is not None:  # the rounds the checkpoint holds, nothing after them
            write_table(self.csv_path, state.records, columns)
            self.written_round = state.server_round
            self.evaluations.keep_until(state.server_round)
        return saved.model

    def last_kept(self, recorded: int) -> int:
        """The last round a stopped run keeps: its checkpoint's (a resume continues after
        it), else its records' file's, else the ``recorded`` rounds (kept in memory only)."""
        if self.checkpoint is not None:
            return self.saved_round or 0
        if self.csv_path is not None:
            return self.written_round or 0
        return recorded

    def kept(self, rounds_done: int) -> str:
        """What a run that stopped after ``rounds_done`` rounds keeps, in words for its log:
        the checkpoint's rounds are those whose write succeeded (:attr:`saved_round`)."""
        if self.csv_path is None and self.checkpoint is None:
            return "nothing was kept (give csv_path= and checkpoint= to keep a run and resume it)"
        kept = []
        for what, path, last in (("records", self.csv_path, self.written_round),
                                 ("checkpoint", self.checkpoint, self.saved_round)):  # fmt: skip
            if path is not None:
                kept.append(f"{what} {path} (rounds 1 to {last})" if last else
                            f"no {what} ({path} was not written this run)")  # fmt: skip
        resume = "; start it again to resume" if self.saved_round else ""
        return f"kept: {', '.join(kept)}{resume}"


def _file_path(value: Any, name: str, owner: str) -> Path:
    """A keeping file's path: a str or path-like naming no folder."""
    if not isinstance(value, str | os.PathLike) or not str(value):
        raise fail(name, owner, "a file's path (str or Path)", value)
    path = Path(value)
    if path.is_dir():
        raise fail(name, owner, "a file's path, not a folder's", str(value))
    return path


def _holder(lock_path: Path) -> str:
    """The run holding ``lock_path``, as its lock file says (process, host, start)."""
    try:
        held = json.loads(lock_path.read_text())
        return (f"process {held['pid']} on {held['host']}, started {held['started']}; "
                f"its lock: {lock_path}")  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return f"its lock: {lock_path}"


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the temporary files that an interrupted write of ``path`` left beside it
    (:func:`eegrad.results.atomic_write`'s ``.<name>.*.tmp``): one run writes one checkpoint."""
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)
