r"""What a round of n clients costs when every client trains its own way (the total-budget mode).

With ``EEGradStrategy(total_budget=...)`` the clients are sent no share: each trains as it always
does and reports what that cost (a metric, e.g. its samples times a per-sample cost, or its
seconds). A round of n clients then costs

* ``round_cost="sum"``: :math:`\sum_i c_i + D(n)` — client-hours, energy or money, spent by every
  client asked;
* ``round_cost="slowest"``: :math:`\max_i c_i + D(n)` — wall-clock time, with the n clients
  training in parallel and the server waiting for the slowest (stragglers included: a node that
  sends no reply before Flower's per-round ``timeout`` costs the round that timeout, and is then
  expected at that cost; :class:`~eegrad.flower.EEGradStrategy` tells it so).

:class:`RoundCosts` learns the clients' costs from what they report, and predicts the expected
cost of a round of every n (:meth:`RoundCosts.expected`). The sampled clients are a uniform draw
of n of the K nodes without replacement; the costs of the nodes seen so far (each node's latest
report, so that a node whose cost drifts is followed) stand for the population:

* sum: :math:`n\,\bar c + D(n)`, :math:`\bar c` the mean of the nodes' latest costs;
* slowest: the expected maximum of n draws without replacement from the m costs seen,
  :math:`\mathbb E\max = \sum_j c_{(j)}\,[\binom{j}{n} - \binom{j-1}{n}] / \binom{m}{n}`
  (:math:`c_{(1)} \le \dots \le c_{(m)}`), for n ≤ m; for n > m, with replacement,
  :math:`\sum_j c_{(j)}[(j/m)^n - ((j-1)/m)^n]`.

Before any report the clients' cost is ``c_min`` (0 when not given), the least a client can cost.

Which n the budget left affords is decided on the worst case (:meth:`RoundCosts.worst`: the n
largest costs seen, or the largest), so that a run never spends more than its total while its
clients cost no more than they have.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import gammaln

__all__ = ["ROUND_COSTS", "RoundCosts"]

#: How a round's cost is made of its clients' costs.
ROUND_COSTS = ("sum", "slowest")


class RoundCosts:
    """The clients' reported costs and the expected cost of a round of n clients.

    Parameters
    ----------
    mode : {"sum", "slowest"}
        How a round's cost is made of its clients' (the module's notes).
    aggregation : callable
        D(n), the server's cost of a round of n clients.
    c_min : float
        A client's cost before any report (>= 0).
    latest : dict, optional
        Each node's latest reported cost, by node id (a run's, which :meth:`tell` updates in
        place; default: none yet).
    """

    def __init__(self, mode: str, aggregation: Any, c_min: float = 0.0,
                 latest: dict[int, float] | None = None) -> None:  # fmt: skip
        self.mode = mode
        self.aggregation = aggregation
        self.c_min = float(c_min)
        #: Each node's latest reported cost, by node id.
        self.latest: dict[int, float] = {} if latest is None else latest

    def tell(self, costs: dict[int, float]) -> None:
        """Record the costs the round's clients reported, by node id."""
        self.latest.update({int(k): float(v) for k, v in costs.items()})

    def round_cost(self, costs: list[float], n: int) -> float:
        """What a round of n clients asked cost, from its clients' ``costs`` (those that
        replied) and D(n)."""
        server = float(self.aggregation(np.array([float(n)]))[0])
        if not costs:
            return server
        return server + (float(np.sum(costs)) if self.mode == "sum" else float(np.max(costs)))

    def expected(self, N: int) -> np.ndarray:
        """The expected cost of a round of n = 1..N clients, shape (N,)."""
        n = np.arange(1, N + 1, dtype=float)
        server = np.asarray(self.aggregation(n), dtype=float)
        seen = np.sort(np.fromiter(self.latest.values(), float, len(self.latest)))
        if seen.size == 0:
            clients = (n if self.mode == "sum" else np.ones_like(n)) * self.c_min
        elif self.mode == "sum":
            clients = n * float(seen.mean())
        else:
            clients = np.array([_expected_max(seen, int(k)) for k in n])
        return server + clients

    def worst(self, N: int) -> np.ndarray:
        """The most a round of n = 1..N clients can cost among the costs seen (the n largest
        summed, or the largest), plus D(n), shape (N,): a round whose worst case fits in the
        budget left cannot overspend it while no client costs more than any seen."""
        n = np.arange(1, N + 1, dtype=float)
        server = np.asarray(self.aggregation(n), dtype=float)
        seen = np.sort(np.fromiter(self.latest.values(), float, len(self.latest)))[::-1]
        top = float(seen[0]) if seen.size else self.c_min
        if self.mode == "slowest":
            return server + top
        padded = np.concatenate([seen, np.full(max(N - seen.size, 0), top)])[:N]
        return server + np.cumsum(padded)


def _log_comb(a: np.ndarray, b: int) -> np.ndarray:
    """log C(a, b), -inf where a < b."""
    a = np.asarray(a, dtype=float)
    with np.errstate(invalid="ignore"):
        out = gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)
    return np.where(a >= b, out, -np.inf)


def _expected_max(sorted_costs: np.ndarray, n: int) -> float:
    """E max of n draws from ``sorted_costs`` (ascending): without replacement for n <= m,
    with replacement beyond."""
    m = sorted_costs.size
    j = np.arange(1, m + 1, dtype=float)
    if n <= m:
        cdf = np.exp(_log_comb(j, n) - _log_comb(np.array([m]), n))  # P(max <= c_(j))
    else:
        cdf = (j / m) ** n
    p = np.diff(np.concatenate([[0.0], cdf]))
    return float(np.dot(p, sorted_costs))
