"""Replies pulled a few at a time, so that a server folds each and drops it: memory O(d), not
O(n·d).

Flower's grids answer ``send_and_receive`` with the list of every reply of the round, which a
server holds while it aggregates (n model copies). :func:`pull_replies` pushes the round's
messages and then pulls their replies in calls of at most :data:`REPLIES_AT_ONCE` message ids
(``Grid.pull_messages(ids)``, which returns every reply of those ids that has come), yielding
each as it is pulled: a server that folds each reply into running sums and lets it go
(:class:`~eegrad.flower.EEGradStrategy`, :mod:`eegrad.flower.replies`) then holds at most
:data:`REPLIES_AT_ONCE` replies, whatever n is, and a poll of n pending replies makes
⌈n / :data:`REPLIES_AT_ONCE`⌉ calls to the grid (one a reply would make n round trips to a
SuperLink every poll). :class:`PullingGrid` is a view of a grid whose ``send_and_receive`` does
this, for Flower's ``Strategy.start`` loop, which hands the replies straight to
``aggregate_train``.

A grid that answers synchronously (:class:`~eegrad.flower.LocalGrid`, ``synchronous = True``:
every reply that will come exists once the pull is asked for) is pulled in one pass, and told the
round's ``timeout`` when the messages are pushed (it drops the reply of a node slower than that);
any other is polled until every reply has come or ``timeout`` seconds have passed, as Flower's
own ``send_and_receive`` does.

**Whose reply.** Every reply is named by the node its message was sent to. A SuperLink that finds
a node unavailable answers for it with an error reply of its own (source: the SuperLink's node
id); such a reply is named by the node it stands for, so that a dead node is named once, by its
own id. A reply that claims another node than the one its message was sent to (neither that
node nor the SuperLink), or answers a message already answered, is not yielded, and said: a
replayed or forged reply is never folded under the asked node's name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from logging import WARNING
from typing import Any

from flwr.app import Message
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.supercore import log

__all__ = ["POLL_SECONDS", "REPLIES_AT_ONCE", "PullingGrid", "pull_replies"]

#: Seconds between two polls of a grid that has not yet every reply.
POLL_SECONDS = 0.5
#: The most message ids one pull asks for: the most replies the server holds at once, and
#: the divisor of a poll's calls to the grid.
REPLIES_AT_ONCE = 8


def pull_replies(grid: Any, messages: Iterable[Message], timeout: float | None = None, *,
                 poll_seconds: float = POLL_SECONDS,
                 at_once: int | None = None) -> Iterator[Message]:  # fmt: skip
    """Push ``messages`` now and return an iterator of their replies, one at a time as each is
    pulled (``at_once`` message ids a pull, default :data:`REPLIES_AT_ONCE`); it stops when all have come, after one pass for a
    synchronous grid, or at ``timeout`` seconds (None: no limit). Replies that never come are
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
    at_once = REPLIES_AT_ONCE if at_once is None else at_once
    return _pulled(grid, pending, sent_to, end, poll_seconds, max(1, int(at_once)))


def _named_by_destination(reply: Message, node: int) -> Message:
    """``reply``, its source the node its message was sent to (a SuperLink's error reply for an
    unavailable node comes from the SuperLink itself)."""
    if int(reply.metadata.src_node_id) != node:
        reply.metadata.__dict__["_src_node_id"] = node
    return reply


def _pulled(grid: Any, pending: list[str], sent_to: dict[str, int], end: float | None,
            poll_seconds: float, at_once: int) -> Iterator[Message]:  # fmt: skip
    synchronous = bool(getattr(grid, "synchronous", False))
    answered: set[str] = set()
    while pending:
        came = set()
        for i in range(0, len(pending), at_once):
            asked = pending[i:i + at_once]
            replies = list(grid.pull_messages(asked))
            replies.reverse()  # popped in the grid's order, each dropped as it is yielded
            while replies:
                reply = replies.pop()
                mid = _answered(reply, asked)
                if not _from_the_asked(reply, sent_to[mid], mid in answered):
                    continue
                came.add(mid)
                answered.add(mid)
                reply = _named_by_destination(reply, sent_to[mid])
                yield reply
                del reply  # the caller has folded it: nothing of it is kept here
        pending = [m for m in pending if m not in came]
        if not pending or synchronous or (end is not None and time.monotonic() >= end):
            return
        if not came:
            time.sleep(poll_seconds)


def _from_the_asked(reply: Message, node: int, again: bool) -> bool:
    """Whether ``reply`` is the one answer of the node its message was sent to (or the
    SuperLink's error reply standing for it); a reply claiming another node, or a second
    answer to the same message (``again``), is said and not folded."""
    source = int(reply.metadata.src_node_id)
    if source not in (node, SUPERLINK_NODE_ID):
        log(WARNING, "EE-Grad: a reply to the message sent to node %d claims node %d: not "
            "folded (a reply counts for the node asked, once)", node, source)  # fmt: skip
        return False
    if again:
        log(WARNING, "EE-Grad: a second reply to the message sent to node %d: not folded (a "
            "reply counts for the node asked, once)", node)  # fmt: skip
        return False
    return True


def _answered(reply: Message, asked: list[str]) -> str:
    """The id of the message ``reply`` answers: its ``reply_to_message_id``, or where a grid
    leaves that empty (a SuperLink's error reply for an unavailable node may), the one id asked
    for."""
    mid = str(reply.metadata.reply_to_message_id or "")
    if mid in asked:
        return mid
    if len(asked) == 1:
        return asked[0]
    raise ValueError(f"A reply pulled for the messages {asked} answers none of them "
                     f"(reply_to_message_id {mid!r}).")


class PullingGrid:
    """A view of a Flower ``Grid`` whose ``send_and_receive`` yields the replies one at a time
    (:func:`pull_replies`); every other call goes to the grid. ``round_timeout``: the timeout
    a round waits, given the one Flower's loop passes (a budget of seconds caps it at what is
    left of it)."""

    def __init__(self, grid: Any, at_once: int | None = None,
                 round_timeout: Callable[[float | None], float | None] | None = None):
        self._grid = grid
        self._at_once = at_once
        self._round_timeout = round_timeout

    def send_and_receive(self, messages: Iterable[Message], *,
                         timeout: float | None = None) -> Iterator[Message]:  # fmt: skip
        """Push the messages and yield their replies as they are pulled (Grid API)."""
        if self._round_timeout is not None:
            timeout = self._round_timeout(timeout)
        return pull_replies(self._grid, messages, timeout, at_once=self._at_once)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)
