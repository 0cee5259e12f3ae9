r"""The split of a total budget over a run's last rounds: how many clients each round asks.

A run with a total budget B and h rounds left ends on the model of its last round. On a
quadratic whose excess loss E contracts by :math:`\rho` a round and to which a round of n adds
the noise :math:`q_n \propto v_n` (the variance of its mean; the same expected step for every n,
as where the clients train their own way),

.. math::

    E_h = \rho^h E_0 + \sum_{j=1}^{h} \rho^{h-j} q_{n_j},

so that the noise of round j reaches the run's end shrunk by :math:`\rho^{h-j}`: the last
round's whole, an early one's little. Using every round (each contracts the loss), the best
split of the budget solves

.. math::

    \min_{n_1..n_h} \sum_j \rho^{h-j} v_{n_j} \quad\text{s.t.}\quad \sum_j c_{n_j} \le B,

with :math:`c_n` the expected cost of a round of n. Where rounds are scarce (the budget buys
more than the cheapest round in each), this says why more clients a round help: each round
that remains averages more updates, and the last rounds, whose noise stays in the model, most.
With :math:`v_n \propto 1/n` and :math:`c_n \propto n` the solution is
:math:`n_j \propto \rho^{(h-j)/2}`: even (your FedAvg's n, B over the rounds) where nothing
contracts (:math:`\rho = 1`), and growing towards the end the more each round forgets.

:func:`plan_rounds` solves it for any costs and noises (the arms as fitted) by its Lagrangian:
each round j takes :math:`\arg\min_n \rho^{h-j} v_n + \lambda c_n` (a point of the lower convex
hull of :math:`(c_n, v_n)`), and :math:`\lambda` is the least, by bisection on its logarithm,
whose rounds fit in the budget; the budget a hull's steps leave over goes to the latest rounds,
one step up the hull at a time while it fits. A rule asks each round the plan's first n and
plans again the next round, with what the round cost and showed. :class:`BudgetAhead` holds
what a run has ahead (every n's cost, the budget and the rounds left), as each ask's outlook
tells it, and plans with them.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_array, check_integer, check_real, fail
from .evidence import Outlook

__all__ = ["BudgetAhead", "plan_rounds", "planned_value"]


def _hull(costs: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """The arms on the lower convex hull of (c_n, v_n) that no cheaper arm beats in noise,
    by increasing cost: the only arms a Lagrangian split ever takes."""
    order = np.lexsort((noise, costs))
    hull: list[int] = []
    for i in order:
        if hull and noise[i] >= noise[hull[-1]]:
            continue  # no less noise for more cost
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b lies on or above the line from a to i: not on the lower hull
            if (noise[b] - noise[a]) * (costs[i] - costs[a]) >= \
                    (noise[i] - noise[a]) * (costs[b] - costs[a]):  # fmt: skip
                hull.pop()
            else:
                break
        hull.append(int(i))
    return np.array(hull, dtype=np.int64)


def plan_rounds(costs: np.ndarray, noise: np.ndarray, rho: float, rounds: int,
                budget: float) -> np.ndarray:  # fmt: skip
    r"""The split of ``budget`` over ``rounds`` rounds (the module's notes): the arm (n − 1)
    of each round, the next one first, shape (rounds,).

    Parameters
    ----------
    costs : ndarray of shape (N,)
        :math:`c_n > 0`, the expected cost of a round of every n.
    noise : ndarray of shape (N,)
        :math:`v_n \ge 0`, the variance of a round's mean at every n (any positive scale).
    rho : float
        :math:`\rho` in (0, 1], the loss's contraction a round.
    rounds : int
        h >= 1, the rounds left, the next one included.
    budget : float
        B >= 0, what the rounds may spend.

    Returns
    -------
    ndarray of int64, shape (rounds,)
        The arms, each on the lower hull of (c_n, v_n). Where even the cheapest arm every
        round costs more than the budget, every round is the cheapest (the caller decides
        what to do with rounds it cannot afford); where the least-noise arm every round costs
        less, every round is that arm (the budget cannot be spent).
    """
    owner = "plan_rounds"
    c = check_array(costs, "costs", owner, ndim=1)
    v = check_array(noise, "noise", owner, shape=c.shape)
    if np.any(c <= 0):
        raise fail("costs", owner, "costs > 0 for every arm", c)
    if np.any(v < 0):
        raise fail("noise", owner, "variances >= 0 for every arm", v)
    rho = check_real(rho, "rho", owner, gt=0, le=1)
    budget = check_real(budget, "budget", owner, ge=0)
    h = check_integer(rounds, "rounds", owner, ge=1)
    hull = _hull(c, v)
    hc, hv = c[hull], v[hull]
    weights = rho ** np.arange(h - 1, -1, -1, dtype=np.float64)  # the next round first

    def split(lam: float) -> np.ndarray:  # each round's place on the hull
        return np.argmin(weights[:, None] * hv[None, :] + lam * hc[None, :], axis=1)

    if hc[-1] * h <= budget:  # every round at the least noise: the budget cannot be spent
        return np.full(h, hull[-1], dtype=np.int64)
    if hc[0] * h >= budget:  # not even the cheapest every round: the cheapest
        return np.full(h, hull[0], dtype=np.int64)
    # λ's bracket: 0 takes the least noise (too costly, above); a λ past every hull slope
    # takes the cheapest (affordable)
    with np.errstate(divide="ignore", invalid="ignore"):
        slopes = -np.diff(hv) / np.diff(hc)
    lo = max(float(np.min(slopes)) * weights.min() * 1e-3, 1e-300) if slopes.size else 1e-300
    hi = float(np.max(slopes)) * weights.max() * 2.0 + 1e-300 if slopes.size else 1.0
    for _ in range(200):
        mid = float(np.sqrt(lo * hi))
        if hc[split(mid)].sum() <= budget:
            hi = mid
        else:
            lo = mid
        if hi <= lo * (1.0 + 1e-12):
            break
    place = split(hi)
    left = budget - hc[place].sum()
    for j in range(h - 1, -1, -1):  # what the steps leave over: the latest rounds up the hull
        while place[j] + 1 < hull.size and hc[place[j] + 1] - hc[place[j]] <= left:
            left -= hc[place[j] + 1] - hc[place[j]]
            place[j] += 1
    order = np.argsort(weights, kind="stable")  # the plan's n never falls towards the end
    place[order] = np.sort(place)
    return hull[place]


def planned_value(arms: np.ndarray, noise: np.ndarray, rho: float) -> float:
    r"""The noise a split leaves in the final model, :math:`\sum_j \rho^{h-j} v_{n_j}`
    (the module's notes; ``arms`` the next round first)."""
    arms = np.asarray(arms, dtype=np.int64)
    weights = float(rho) ** np.arange(arms.size - 1, -1, -1, dtype=np.float64)
    return float(np.dot(weights, np.asarray(noise, dtype=np.float64)[arms]))


class BudgetAhead:
    """What a run with a total budget has ahead, as each ask's outlook tells it: every n's
    expected cost of a round, the budget left and the rounds left (each None until told; the
    rounds left None in a run with no last round). A value not told keeps the last told."""

    def __init__(self, N: int) -> None:
        self.N = N
        self.costs: np.ndarray | None = None
        self.budget_left: float | None = None
        self.rounds_left: int | None = None

    def take(self, outlook: Outlook, owner: str) -> None:
        """Every n's expected cost :math:`c_n > 0`, shape (N,), what the run has left to spend
        (>= 0) and the rounds it has left (>= 1), from ``outlook`` where it tells the costs."""
        if outlook.costs is None:
            return
        c = check_array(outlook.costs, "costs", owner, shape=(self.N,))
        if np.any(c <= 0):
            raise fail("costs", owner, "costs > 0 for every arm", c)
        self.costs = c.copy()
        self.budget_left = None if outlook.budget_left is None else check_real(
            outlook.budget_left, "budget_left", owner, ge=0)  # fmt: skip
        self.rounds_left = None if outlook.rounds_left is None else check_integer(
            outlook.rounds_left, "rounds_left", owner, ge=1)  # fmt: skip

    def told(self) -> bool:
        """Whether the costs and the budget left have been told."""
        return self.costs is not None and self.budget_left is not None

    def rounds_bind(self) -> bool:
        """Whether the rounds left, not the budget, end the run: the budget left affords more
        than the cheapest round in each of them."""
        if self.rounds_left is None or not self.told():
            return False
        return self.rounds_left * float(self.costs.min()) < self.budget_left

    def last_round_arm(self) -> int | None:
        r"""The most clients whose round's expected cost fits in the budget left B and leaves
        less than the cheapest round's, :math:`\max\{n : c_n \le B,\ B - c_n < \min_m c_m\}`
        (an arm, n − 1), or None where no round can end the run so, or before the costs and
        the budget left are told."""
        if not self.told():
            return None
        c, left = self.costs, self.budget_left
        ends = np.flatnonzero((c <= left) & (left - c < c.min()))
        return int(ends.max()) if ends.size else None

    def plan(self, noise: np.ndarray, rho: float) -> np.ndarray:
        """The split of the budget left over the rounds left (:func:`plan_rounds`), the next
        round first, for every n's noise ``noise``, shape (N,), and the contraction ``rho``."""
        return plan_rounds(self.costs, noise, rho, self.rounds_left, self.budget_left)

    def explain_plan(self, arms: np.ndarray, rho: float | None) -> str:
        """The plan ``arms`` (n − 1, the next round first) in words for a run's log, with what
        a round keeps of the last one's noise, ``rho`` (None: not yet fitted, an even
        split)."""
        plan = np.asarray(arms) + 1
        shown = (", ".join(str(k) for k in plan) if plan.size <= 8 else
                 f"{', '.join(str(k) for k in plan[:4])}, …, "
                 f"{', '.join(str(k) for k in plan[-3:])}")  # fmt: skip
        why = ("what a round's noise the next keeps not yet fitted: an even split"
               if rho is None else f"each round keeps ρ = {rho:.3g} of the last one's noise")
        if self.rounds_left == 1:
            return f"the run's last round: the budget left, {self.budget_left:.4g}, on n = {shown}"
        return (f"the budget left, {self.budget_left:.4g}, split over the {self.rounds_left} "
                f"rounds left for the least noise at the end: n = {shown} ({why})")
