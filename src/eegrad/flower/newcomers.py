"""Nodes that join a run late, asked a few at a time while what they cost is unknown.

With a total budget whose clients report their cost (``unit="samples"``, seconds, energy), a
round's cap prices a node that has never reported a cost at the costliest cost seen
(:meth:`~eegrad.flower.round_costs.RoundCosts.worst`). The nodes connected at the run's first
round are one population, sampled uniformly: what the first rounds' clients cost stands for the
others. Nodes that join later may be of another kind (a new device type, a larger partition),
and nothing seen bounds their cost: a round that asked many of them at once could spend several
times the budget left. So a round asks, of the nodes that joined at one later server round (a
*cohort*), at most as many that have never reported a cost as that cohort has nodes that have —
one while none has (:func:`limit_newcomers`). A cohort's first reply then prices its others
(the costliest seen), and its share of the rounds grows as its costs are seen: a run ends within
about one client's cost of its budget where late nodes cost more than any seen, not several
times past it. Where the sample holds no more newcomers than that, nothing changes: the draw is
the uniform one, and a run whose nodes all connected at its start draws exactly as before.
"""

from __future__ import annotations

from logging import INFO

import numpy as np
from flwr.supercore import log

from .state import RunState

__all__ = ["limit_newcomers", "note_joined"]


def note_joined(state: RunState, nodes: list[int], server_round: int) -> None:
    """Note the server round at which each of ``nodes`` was first connected."""
    for node in nodes:
        state.joined.setdefault(int(node), int(server_round))


def limit_newcomers(state: RunState, nodes: list[int], pick: np.ndarray, server_round: int,
                    rng: np.random.Generator) -> np.ndarray:  # fmt: skip
    """The indices ``pick`` of a uniform draw among ``nodes``, with each late cohort's nodes
    never seen cut to at most as many as that cohort has seen (one where none has); each cut
    node is replaced by a node drawn uniformly among those the limit allows and not drawn (none
    left: the round asks fewer). Said once a run."""
    first = min(state.joined.values(), default=server_round)
    seen = state.client_costs
    cohort_seen: dict[int, int] = {}
    for node, joined in state.joined.items():
        if joined > first and node in seen:
            cohort_seen[joined] = cohort_seen.get(joined, 0) + 1

    def allowed(i: int, taken: dict[int, int]) -> bool:
        node = nodes[i]
        joined = state.joined.get(node, first)
        if joined <= first or node in seen:
            return True
        return taken.get(joined, 0) < max(1, cohort_seen.get(joined, 0))

    kept, taken, cut = [], {}, 0
    for i in (int(i) for i in pick):
        if allowed(i, taken):
            kept.append(i)
            joined = state.joined.get(nodes[i], first)
            if joined > first and nodes[i] not in seen:
                taken[joined] = taken.get(joined, 0) + 1
        else:
            cut += 1
    if not cut:
        return pick
    drawn = set(kept)
    while cut:
        pool = [i for i in range(len(nodes)) if i not in drawn and allowed(i, taken)]
        if not pool:
            break
        i = int(pool[int(rng.integers(len(pool)))])
        kept.append(i)
        drawn.add(i)
        joined = state.joined.get(nodes[i], first)
        if joined > first and nodes[i] not in seen:
            taken[joined] = taken.get(joined, 0) + 1
        cut -= 1
    if not state.said_newcomers:
        log(INFO, "EE-Grad: server round %d asks few of the nodes that joined after the run's "
            "first round and never reported a cost (a group that joined together: at most as "
            "many as it has reported, one at first), so that clients of unknown cost never "
            "spend the budget several times over", server_round)  # fmt: skip
        state.said_newcomers = True
    return np.array(sorted(kept), dtype=int)
