"""Replies pulled one at a time, so that a server folds each and drops it: memory O(d), not O(n·d).

Flower's grids answer ``send_and_receive`` with the list of every reply of the round, which a
server holds while it aggregates (n model copies). :func:`pull_replies` pushes the round's
messages and then pulls their replies one message id at a time (``Grid.pull_messages([id])``),
yielding each as it is pulled: a server that folds each reply into running sums and lets it go
(:class:`~eegrad.flower.EEGradStrategy`, :mod:`eegrad.flower.replies`) then holds one reply at a
time. :class:`PullingGrid` is a view of a grid whose ``send_and_receive`` does this, for
Flower's ``Strategy.start`` loop, which hands the replies straight to ``aggregate_train``.

A grid that answers synchronously (:class:`~eegrad.flower.LocalGrid`, ``synchronous = True``:
every reply that will come exists once the pull is asked for) is pulled in one pass, and told the
round's ``timeout`` when the messages are pushed (it drops the reply of a node slower than that);
any other is polled until every reply has come or ``timeout`` seconds have passed, as Flower's
own ``send_and_receive`` does.

**Whose reply.** Every reply is named by the node its message was sent to. A SuperLink that finds
a node unavailable answers for it with an error reply of its own (source: the SuperLink's node
id); such a reply is named by the node it stands for, so that a dead node is named once, by its
own id.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from flwr.app import Message

__all__ = ["POLL_SECONDS", "PullingGrid", "pull_replies"]

#: Seconds between two polls of a grid that has not yet every reply.
POLL_SECONDS = 0.5


def pull_replies(grid: Any, messages: Iterable[Message], timeout: float | None = None, *,
                 poll_seconds: float = POLL_SECONDS) -> Iterator[Message]:  # fmt: skip
    """Push ``messages`` now and return an iterator of their replies, one at a time as each is
    pulled (each message id pulled on its own); it stops when all have come, after one pass for
    a synchronous grid, or at ``timeout`` seconds (None: no limit). Replies that never come are
    not yielded (the caller names them as timed out)."""
    messages = list(messages)
    synchronous = bool(getattr(grid, "synchronous", False))
    if synchronous:
        pending = list(grid.push_messages(messages, timeout=timeout))
    else:
        pending = list(grid.push_messages(messages))
    sent_to = {mid: int(m.metadata.dst_node_id) for mid, m in zip(pending, messages, strict=True)}
    del messages
    end = None if timeout is None else time.monotonic() + timeout
    return _pulled(grid, pending, sent_to, end, poll_seconds)


def _named_by_destination(reply: Message, node: int) -> Message:
    """``reply``, its source the node its message was sent to (a SuperLink's error reply for an
    unavailable node comes from the SuperLink itself)."""
    if int(reply.metadata.src_node_id) != node:
        reply.metadata.__dict__["_src_node_id"] = node
    return reply


def _pulled(grid: Any, pending: list[str], sent_to: dict[str, int], end: float | None,
            poll_seconds: float) -> Iterator[Message]:  # fmt: skip
    synchronous = bool(getattr(grid, "synchronous", False))
    while pending:
        came = set()
        for mid in pending:
            replies = list(grid.pull_messages([mid]))
            if replies:
                came.add(mid)
                reply = _named_by_destination(replies.pop(), sent_to[mid])
                del replies
                yield reply
                del reply  # the caller has folded it: nothing of it is kept here
        pending = [m for m in pending if m not in came]
        if not pending or synchronous or (end is not None and time.monotonic() >= end):
            return
        if not came:
            time.sleep(poll_seconds)


class PullingGrid:
    """A view of a Flower ``Grid`` whose ``send_and_receive`` yields the replies one at a time
    (:func:`pull_replies`); every other call goes to the grid."""

    def __init__(self, grid: Any):
        self._grid = grid

    def send_and_receive(self, messages: Iterable[Message], *,
                         timeout: float | None = None) -> Iterator[Message]:  # fmt: skip
        """Push the messages and yield their replies as they are pulled (Grid API)."""
        return pull_replies(self._grid, messages, timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)
