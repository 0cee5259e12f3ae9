"""Flower's own log lines, true under eegrad.

A wrapped strategy's ``configure_train`` is called on a view of the grid that lists only the n
nodes eegrad chose, and a linear strategy's ``aggregate_train`` on one reply that stands for
the round: Flower's lines would say ``Sampled 6 nodes (out of 6)`` and ``Received 1 results and
0 failures`` where 6 of 20 nodes were asked and 6 replied. :func:`round_counts` holds the
round's real counts while the wrapped strategy is called, and the line is written with them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["round_counts"]

#: The message formats of Flower's lines this rewrites (each as Flower writes it, its phase
#: in the format or as its first argument), and which counts each takes.
_LINES = {"configure_train: Sampled %s nodes (out of %s)": "sampled",
          "aggregate_train: Received %s results and %s failures": "received",
          "%s: Received %s results and %s failures": "received"}  # fmt: skip


class _Counts(logging.Filter):
    def __init__(self, sampled: tuple[int, int] | None, received: tuple[int, int] | None):
        super().__init__()
        self.counts = {"sampled": sampled, "received": received}

    def filter(self, record: logging.LogRecord) -> bool:
        kind = _LINES.get(record.msg) if isinstance(record.msg, str) else None
        counts = None if kind is None else self.counts[kind]
        if counts is not None:
            if record.msg.startswith("%s"):  # the phase as the first argument
                if record.args and record.args[0] == "aggregate_train":
                    record.args = ("aggregate_train", *counts)
            else:
                record.args = counts
        return True


@contextmanager
def round_counts(*, sampled: tuple[int, int] | None = None,
                 received: tuple[int, int] | None = None) -> Iterator[None]:
    """Within the block, Flower's ``configure_train`` line says ``sampled`` (the nodes asked,
    out of the nodes connected) and its ``aggregate_train`` line ``received`` (the replies
    folded, the nodes that failed or sent none in time)."""
    logger = logging.getLogger("flwr")
    counts = _Counts(sampled, received)
    logger.addFilter(counts)
    try:
        yield
    finally:
        logger.removeFilter(counts)
