"""A Flower ``Grid`` that runs a ``ClientApp`` in this process, synchronously.

Flower's simulation runtime starts Ray and runs client calls in worker processes — the way to
run a Flower app on one machine. For tests and seeded studies that run many short federations,
:class:`LocalGrid` delivers each message by calling the ``ClientApp`` directly, in order, with
the same ``Message`` and ``Context`` objects Flower would build; the strategy (ours or Flower's
``FedAvg``) and the ``ClientApp`` are unchanged. Node ids are 64-bit unsigned integers, as
Flower's are (above 2⁶³, so a conversion to int64 would show).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.serverapp import Grid
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from .._validation import check_integer
from .._validation import fail as fail_param

__all__ = ["LocalGrid"]

#: Error code of a reply whose ClientApp raised (Flower's ClientApp exception code).
CLIENT_APP_RAISED_EXCEPTION = 0


class LocalGrid(Grid):
    """Deliver messages to a ``ClientApp`` in this process.

    Parameters
    ----------
    client_app : ClientApp
        The app every node runs.
    num_nodes : int
        Number of nodes (clients), >= 1; node i gets ``node_config = {"partition-id": i,
        "num-partitions": num_nodes}`` as in Flower's simulation.
    seed : int
        Seed of the node ids.
    run_config : dict, optional
        The run config every context carries.
    fail : callable, optional
        ``fail(partition_id, message) -> bool``: drop that node's reply (as a timed-out node),
        for testing failure handling.
    deliver : {"on-push", "on-pull"}
        When a node runs its ClientApp: when the message is pushed (default; the replies wait
        in the grid until pulled, as a SuperLink holds them), or when its reply is pulled, so
        that a server that pulls one reply at a time (:func:`eegrad.flower.pulling.pull_replies`)
        has one reply in memory at a time, as it would in a deployment whose replies wait on
        the SuperLink.

    Notes
    -----
    **Time-outs.** A round's ``timeout`` (Flower's ``Strategy.start(timeout=...)``, which reaches
    :meth:`send_and_receive`, or :meth:`push_messages`'s) is honoured as a deployment would: the
    nodes run one after another here but stand for nodes that train in parallel, so a node whose
    own call takes longer than the timeout sends no reply (its reply is dropped, as a straggler's
    that never reached the server).
    """

    #: Every reply that will come exists once it is asked for: one pull pass suffices.
    synchronous = True

    def __init__(
        self,
        client_app: ClientApp,
        num_nodes: int,
        *,
        seed: int = 0,
        run_config: dict[str, Any] | None = None,
        fail: Callable[[int, Message], bool] | None = None,
        deliver: str = "on-push",
    ):
        num_nodes = check_integer(num_nodes, "num_nodes", "LocalGrid", ge=1)
        if deliver not in ("on-push", "on-pull"):
            raise fail_param("deliver", "LocalGrid", "'on-push' or 'on-pull'", deliver)
        self.deliver = deliver
        self._pushed: dict[str, tuple[Message, float | None]] = {}
        ids = np.random.default_rng(seed).integers(2**63, 2**64 - 1, size=num_nodes,
                                                   dtype=np.uint64, endpoint=True)  # fmt: skip
        self.node_ids = [int(i) for i in ids]  # Python ints: no int64 round trip
        self.client_app = client_app
        self.fail = fail
        self.contexts = {
            nid: Context(run_id=1, node_id=nid,
                         node_config={"partition-id": i, "num-partitions": num_nodes},
                         state=RecordDict(), run_config=dict(run_config or {}))
            for i, nid in enumerate(self.node_ids)
        }
        self._partition = {nid: i for i, nid in enumerate(self.node_ids)}
        self._replies: dict[str, Message] = {}
        self._count = 0
        self._run: Any = Run.create_empty(run_id=1)  # the contexts' run, until set_run
        try:  # messages carry the process's task identity, which Flower's server runtime sets
            TaskIdentity.run_id  # noqa: B018
        except RuntimeError:
            TaskIdentity.task_id = 1
            TaskIdentity.run_id = 1
            TaskIdentity.node_id = SUPERLINK_NODE_ID

    def set_run(self, run: Any) -> None:
        """Remember the run Flower's server runtime sets (Grid API)."""
        self._run = run

    @property
    def run(self) -> Any:
        """The run set by :meth:`set_run` (Grid API)."""
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int,
                       group_id: str, ttl: float | None = None) -> Message:  # fmt: skip
        """A message to node ``dst_node_id`` (Grid API)."""
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        """The nodes' ids, 64-bit unsigned as Flower's (Grid API)."""
        return list(self.node_ids)

    def push_messages(self, messages: Iterable[Message], *,
                      timeout: float | None = None) -> Iterable[str]:  # fmt: skip
        """Deliver each message to its node's ClientApp now, in order (``deliver="on-pull"``:
        when its reply is pulled); returns their ids (Grid API). A node that raises gives an
        error reply, as in Flower; one that ``fail`` drops, or whose call takes longer than
        ``timeout`` seconds (None: no limit), gives none.
        """
        ids = []
        for msg in messages:
            self._count += 1
            mid = f"local-{self._count}"
            msg.metadata.__dict__["_message_id"] = mid
            ids.append(mid)
            if self.deliver == "on-pull":
                self._pushed[mid] = (msg, timeout)
            else:
                self._answer(mid, msg, timeout)
        return ids

    def _answer(self, mid: str, msg: Message, timeout: float | None = None) -> None:
        """Run the node's ClientApp on ``msg`` and keep its reply under ``mid`` (none where it
        took longer than ``timeout`` seconds)."""
        node = msg.metadata.dst_node_id
        if node not in self.contexts:
            return  # no such node: no reply, as a node that never answers
        if self.fail is not None and self.fail(self._partition[node], msg):
            return
        began = time.monotonic()
        # The node gets a message of its own, as a deployment's deserialised one: its content's
        # records copied (the arrays' bytes shared, they are immutable), so that a client (or a
        # mod, as SecAgg+'s, that pops from it) changes nothing another node receives.
        msg = Message(content=copy.deepcopy(msg.content), dst_node_id=node,
                      message_type=msg.metadata.message_type, group_id=msg.metadata.group_id,
                      ttl=msg.metadata.ttl)  # fmt: skip
        msg.metadata.__dict__["_message_id"] = mid
        try:
            reply = self.client_app(msg, self.contexts[node])
        except Exception as exc:  # noqa: BLE001 - a failing client is an error reply, as in Flower
            reply = Message(Error(code=CLIENT_APP_RAISED_EXCEPTION,
                                  reason=f"{type(exc).__name__}: {exc}"), reply_to=msg)  # fmt: skip
        if timeout is not None and time.monotonic() - began > timeout:
            return  # a straggler: its reply would come after the server stopped waiting
        reply.metadata.__dict__["_src_node_id"] = node
        self._replies[mid] = reply

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """The replies to the given message ids that have arrived (Grid API); with
        ``deliver="on-pull"``, each node runs now."""
        out = []
        for m in message_ids:
            if m in self._pushed:
                self._answer(m, *self._pushed.pop(m))
            if m in self._replies:
                out.append(self._replies.pop(m))
        return out

    def send_and_receive(self, messages: Iterable[Message], *,
                         timeout: float | None = None) -> Iterable[Message]:  # fmt: skip
        """Push the messages and pull their replies (Grid API; delivery is synchronous here; a
        node slower than ``timeout`` seconds gives no reply)."""
        return self.pull_messages(self.push_messages(messages, timeout=timeout))
