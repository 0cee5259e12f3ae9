"""Which nodes a round may ask, as a part :class:`~eegrad.flower.EEGradStrategy` holds: the
nodes connected, waited for before the run's first round, and what the log says of them.

Before the run's first round :meth:`NodeWaiting.connected` waits for ``min_available_nodes``
(the wrapped strategy's, where it has one) and for the nodes the rule needs (two for a rule that
learns from a spread); later rounds, a resumed run's first included, ask among the nodes
connected, as the uninterrupted run would, so that a node that dies never stalls the run, and a
round with fewer than planned says so once. The rule is set up for the K of the first round (:meth:`NodeWaiting.planned`); a node
that connects later is asked as any other, a round asking at most K (said once).
"""

from __future__ import annotations

import time
from logging import INFO, WARNING
from typing import Any

from flwr.supercore import log

from .state import RunState

__all__ = ["NodeWaiting"]


class NodeWaiting:
    """The nodes a run waits for and asks among.

    Parameters
    ----------
    min_available_nodes : int
        Nodes to wait for before the run's first round.
    rule_needs : int
        The nodes the rule needs at the first round (2 for one that learns from a spread).
    """

    def __init__(self, min_available_nodes: int, rule_needs: int) -> None:
        self.min_available_nodes = min_available_nodes
        self.rule_needs = rule_needs

    def planned(self, connected: int) -> int:
        """K the rule is set up for: the nodes connected at the first round, or the more the
        run waited for."""
        return max(connected, self.min_available_nodes)

    def connected(self, grid: Any, state: RunState, server_round: int) -> list[int]:
        """The nodes connected now, sorted: before the run's first round, at least
        ``min_available_nodes`` and the rule's need; later (a resumed run's rounds too), the
        fewest a round can run (1, or 2 under SecAgg+). A round with fewer than planned, or more than the rule's K, says so
        once; its record's ``nodes_connected`` says how many."""
        fresh = state.first_round and not state.rounds_done  # a resumed run is past its first
        wait_for = (max(self.min_available_nodes, self.rule_needs, state.min_clients)
                    if fresh else state.min_clients)  # fmt: skip
        waited = 0.0
        while len(nodes := sorted(int(i) for i in grid.get_node_ids())) < wait_for:
            if waited % 10.0 == 0.0:  # every 10 s, not every poll
                log(INFO, "Waiting for nodes: %d of %d connected", len(nodes), wait_for)
            time.sleep(1.0)
            waited += 1.0
        if not fresh:
            self._say(state, server_round, len(nodes))
        state.nodes_connected = len(nodes)
        return nodes

    def _say(self, state: RunState, server_round: int, connected: int) -> None:
        """Once a run: fewer nodes than ``min_available_nodes``, more than the rule's K."""
        if connected < self.min_available_nodes and not state.said_fewer:
            log(WARNING, "EE-Grad: server round %d: %d nodes connected, fewer than "
                "min_available_nodes = %d; the rounds go on among the nodes connected (a round "
                "asks at most that many; each record's nodes_connected says how many)",
                server_round, connected, self.min_available_nodes)  # fmt: skip
            state.said_fewer = True
        if state.num_nodes is not None and connected > state.num_nodes and not state.said_more:
            log(WARNING, "EE-Grad: server round %d: %d nodes connected, more than the K = %d "
                "the rule was set up for at the run's start (as was a budget of your FedAvg's "
                "spend, which stays); each may be asked, a round at most %d of them (start "
                "with min_available_nodes=%d for the rule to plan for them all)",
                server_round, connected, state.num_nodes, state.rule.N, connected)  # fmt: skip
            state.said_more = True
