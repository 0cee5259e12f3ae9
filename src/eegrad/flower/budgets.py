r"""The budget of a federated run, as a part :class:`~eegrad.flower.EEGradStrategy` holds: what a
round may ask, what its clients are sent, what it cost, and when the run ends.

Two budgets, one interface, each owning its accounting (the run's spend is
:attr:`~eegrad.flower.state.RunState.cost`):

* :class:`RoundBudget` — the paper's model (Section 2): every round has the budget B, shared by
  its n clients, each sent the share :math:`(B - D(n))/n`; the arms are
  :math:`n = 1..N`, :math:`N = \max\{n : B > n c_{min} + D(n)\}`; a round costs B. The rule is
  told the rounds left of ``num_rounds`` before it asks (where it weighs the run's end).
* :class:`TotalBudget` — the run's total: the clients train their own way and report what it
  cost (:mod:`eegrad.flower.round_costs`); a round of n costs its clients' costs (summed, or the
  slowest's) plus D(n); a round asks at most the n whose worst case fits in the budget left,
  and the run ends (:class:`BudgetSpent`) before a round that cannot afford the fewest clients.
  The rule is told every n's expected cost and the budget left before it asks.

A strategy asks its budget, round by round: :meth:`~RoundBudget.at_most` and
:meth:`~RoundBudget.outlook` the rule is given with its ask, :meth:`~RoundBudget.share` for the
messages, :meth:`~RoundBudget.spent` from the round's replies, :meth:`~RoundBudget.charge` to
the run's cost, and :meth:`~RoundBudget.record` for the round's record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from logging import INFO, WARNING
from typing import Any

import numpy as np
from flwr.app import ConfigRecord
from flwr.supercore import log

from .._validation import InvalidParameterError, check_real, fail
from ..arms import feasible_arms, per_client_spend
from ..selectors.base import Selector
from ..selectors.evidence import OUTLOOK, Outlook
from .client import SHARE_KEY
from .replies import ClientUpdateError, RoundFold
from .round_costs import ROUND_COSTS, RoundCosts
from .state import RunState
from .stops import RunStopped

__all__ = ["BudgetSpent", "FedAvgSpend", "RoundBudget", "TotalBudget", "baseline_of",
           "make_budget"]

#: Points 1..this of D(n) in the fingerprint of a total-budget run (N is not known yet).
D_POINTS = 64


class BudgetSpent(RunStopped):
    """With a total budget: the next round would cost more than the budget left."""


@dataclass(frozen=True)
class FedAvgSpend:
    r"""A total budget of client trainings: what the wrapped strategy would spend in the run's
    ``num_rounds``, each round training :math:`\max(\lfloor K f\rfloor, m)` of the K nodes
    connected (Flower's ``FedAvg.configure_train``: f its ``fraction_train``, m its
    ``min_train_nodes``). Known when the run starts (its rounds) and its first round's nodes
    connect (:meth:`TotalBudget.resolve`), and kept for the run, said in its line: the rule
    plans for the K nodes of its first round (a round asks at most K), so nodes that join
    later are asked as any other but add no budget; a run that waits for them
    (``min_available_nodes``) counts them.

    Parameters
    ----------
    strategy : str
        The wrapped strategy's class, for the log.
    fraction_train : float
        Its ``fraction_train``, in (0, 1].
    min_train_nodes : int
        Its ``min_train_nodes``, >= 0.
    """

    strategy: str
    fraction_train: float
    min_train_nodes: int

    @classmethod
    def of(cls, strategy: Any, owner: str = "choose_clients") -> FedAvgSpend:
        """The spend of a Flower strategy that samples as FedAvg does; refused where it has no
        ``fraction_train`` or trains no client."""
        fraction = getattr(strategy, "fraction_train", None)
        least = getattr(strategy, "min_train_nodes", 0) or 0
        name = type(strategy).__name__
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise fail("budget", owner, f"given: {name} has no fraction_train to take its "
                       "spend from (give the run's budget in client trainings)", None)  # fmt: skip
        if not 0 < float(fraction) <= 1:
            raise fail("strategy", owner, f"a strategy that trains clients: {name}'s "
                       f"fraction_train = {fraction!r} gives none a round (give budget=, or a "
                       "fraction_train in (0, 1])", strategy)  # fmt: skip
        return cls(name, float(fraction), int(least))

    def per_round(self, num_nodes: int) -> int:
        """The clients a round of it trains among ``num_nodes``: max(⌊K f⌋, m), at most K."""
        return min(int(num_nodes), max(int(num_nodes * self.fraction_train),
                                       self.min_train_nodes))  # fmt: skip

    def total(self, num_rounds: int, num_nodes: int) -> int:
        """Its trainings in ``num_rounds`` rounds of ``num_nodes`` nodes."""
        return int(num_rounds) * self.per_round(num_nodes)

    def describe(self, num_rounds: int, num_nodes: int) -> str:
        """The budget in words: "100 client trainings, what FedAvg(fraction_train=0.5) spends
        in 10 rounds of 20 nodes"."""
        least = f", min_train_nodes={self.min_train_nodes}" if self.min_train_nodes else ""
        return (f"{self.total(num_rounds, num_nodes)} client trainings, what "
                f"{self.strategy}(fraction_train={self.fraction_train:g}{least}) spends in "
                f"{num_rounds} rounds of {num_nodes} nodes ({self.per_round(num_nodes)} a "
                "round)")


def _server_cost(aggregation: Any) -> str:
    """The server's cost of a round in words for the log, where there is one: nothing for
    the default (none), else ", plus the server's D(n) = ..."."""
    if getattr(aggregation, "b", None) == 0 and getattr(aggregation, "fixed", 0) == 0:
        return ""
    return f", plus the server's D(n) = {aggregation!r}"


def baseline_of(strategy: Any) -> FedAvgSpend | None:
    """Your strategy's own schedule, where it samples as Flower's FedAvg does (its
    ``fraction_train`` and ``min_train_nodes``: :class:`FedAvgSpend`), else None."""
    if strategy is None:
        return None
    try:
        return FedAvgSpend.of(strategy, "EEGradStrategy")
    except InvalidParameterError:
        return None


def rounds_left(server_round: int, num_rounds: int | None) -> int | None:
    """The rounds the run has left of ``num_rounds``, ``server_round`` included (at least 1;
    None where the rounds are not given)."""
    return None if num_rounds is None else max(1, num_rounds - server_round + 1)


class RoundBudget:
    """B per round, shared by the round's clients (the paper's Section 2).

    Parameters
    ----------
    budget : float
        B, > 0, in the clients' cost units.
    c_min : float
        The least a client's participation can cost, > 0: it bounds the arms, N.
    aggregation : callable
        D(n), the server's cost of a round of n clients.
    cost_metric : str
        The reply's metric of what a client spent (for the records, and the check that the
        clients spend their shares).
    """

    #: The run's total (None: a budget per round).
    total = None
    #: Whether a round's cost grows with its clients (the default rule then weighs it).
    per_cost = False
    #: What of a rule's outlook this budget tells it before each ask (:meth:`outlook`).
    supplies = frozenset({"rounds_left"})
    #: Record columns this budget adds.
    columns: tuple[str, ...] = ()
    #: Whether every reply must report its cost.
    cost_required = False
    #: Whether a node's cost is unknown until it reports one (B a round: its share is known).
    prices_unseen = False

    def __init__(self, budget: float, c_min: float | None, aggregation: Any, *,
                 cost_metric: str, cost_scale: float = 1.0, round_cost: str = "sum",
                 owner: str = "EEGradStrategy") -> None:  # fmt: skip
        self.budget = check_real(budget, "budget", owner, gt=0)
        if round_cost not in ROUND_COSTS:
            raise fail("round_cost", owner, f"one of {ROUND_COSTS}", round_cost)
        #: The settings a fold reads a reply's cost with, and the fingerprint names.
        self.round_cost, self.cost_scale = round_cost, cost_scale
        if c_min is None:
            raise fail("c_min", owner, "the least a client's participation costs, > 0, "
                       "with a per-round budget", None)  # fmt: skip
        self.c_min = check_real(c_min, "c_min", owner, gt=0)
        self.aggregation = aggregation
        self.cost_metric = cost_metric
        #: N of the budget, before the nodes are known (it checks the budget, as
        #: Arms.from_costs does).
        self.max_arms, _ = feasible_arms(self.c_min, aggregation, self.budget, owner=owner)

    def arms(self, num_nodes: int) -> int:
        """N for K = ``num_nodes``: min(the budget's, K)."""
        return min(self.max_arms, num_nodes)

    def spend(self, N: int) -> np.ndarray:
        """Each client's spend :math:`(B - D(n))/n` of the arms n = 1..N, shape (N,)."""
        return per_client_spend(self.budget, self.aggregation, np.arange(1, N + 1))

    def share(self, n: int) -> float:
        """What each of the n clients of a round is sent to spend, :math:`(B - D(n))/n`."""
        return float(per_client_spend(self.budget, self.aggregation, n))

    def configure(self, config: ConfigRecord, n: int) -> None:
        """Put in a round's train config what its n clients are sent: the share, under
        :data:`~eegrad.flower.client.SHARE_KEY`."""
        config[SHARE_KEY] = self.share(n)

    def check_private(self, owner: str = "EEGradStrategy") -> None:
        """Nothing to refuse under central DP: the clients are sent their shares, and the
        records say what was sent, not what a client reported."""

    def say_arms(self, num_nodes: int) -> None:
        """Where fewer nodes are connected than the budget affords clients, say so."""
        if num_nodes < self.max_arms:
            log(WARNING, "EE-Grad: %d nodes are connected, so a round asks 1 to %d clients, "
                "where the budget affords up to N = %d: connect more nodes to let the rule "
                "choose among them (in Flower's local simulation: flwr federation "
                "simulation-config @none/default local --num-supernodes N)", num_nodes,
                num_nodes, self.max_arms)  # fmt: skip

    def say_left(self, state: RunState) -> None:
        """Nothing is left at a run's end: B a round is spent every round."""

    def resolve(self, num_rounds: int | None, num_nodes: int) -> None:
        """Nothing to settle at the run's start: B a round is given."""

    def at_most(self, state: RunState, N: int, least: int, server_round: int,
                baseline: int | None = None) -> int | None:  # fmt: skip
        """The most clients the round may ask: any of the N (None)."""
        return None

    def outlook(self, state: RunState, server_round: int, num_rounds: int | None,
                baseline: int | None = None) -> Outlook:  # fmt: skip
        """What the rule is told before it asks: the rounds left of ``num_rounds``, this one
        included (where the run has a known end), and the n your strategy would ask
        (``baseline``, where it samples as FedAvg does)."""
        return Outlook(rounds_left=rounds_left(server_round, num_rounds), baseline=baseline)

    def round_timeout(self, state: RunState, n: int, timeout: float | None) -> float | None:
        """How long a round of n waits for its replies: Flower's ``timeout``."""
        return timeout

    def check_replies(self, fold: RoundFold, server_round: int) -> None:
        """Refuse a round whose replies report no spend: clients that train their own way
        under a per-round budget, which the run would otherwise count as spending nothing
        (where the fold reads their costs: not under central DP)."""
        if fold.reveals_costs and fold.replied and np.all(np.isnan(fold.costs)):
            raise ClientUpdateError(
                f"No reply of server round {server_round} reports what it spent (the metric "
                f"{self.cost_metric!r}): with a per-round budget (budget=) each client spends "
                "the share of B it is sent and reports it. Wrap the client's train function "
                "with eegrad.flower.budgeted_train or budgeted_torch_train; or, for clients that "
                "train their own way (as Flower's quickstart clients do), give the run's "
                "total_budget= instead of budget=, counted in a metric they report (e.g. "
                "cost_metric='num-examples')."
            )

    def note_local_steps(self, state: RunState, fold: RoundFold, steps: float | None,
                         server_round: int) -> None:  # fmt: skip
        """Say once what the rule assumes where it reads the clients' local steps (the clients
        spend the shares they are sent) and the round gives none (``steps`` None): every n's
        update goes as far (FedSGD's model), and the noise decides n. Either not every reply
        reported them, or the path reads no client's metrics (secure sums, a private release)."""
        if steps is not None or state.said_no_steps or \
                "local_steps" not in state.rule.selector.reads:  # fmt: skip
            return
        why = ("do not all report 'local-steps'" if fold.reads_local_steps else
               "are read as sums or through a private release, which reads no client's "
               "'local-steps'")  # fmt: skip
        log(INFO, "EE-Grad: the replies of server round %d %s: the rule takes every n's update "
            "to go as far (FedSGD's model: one step on the share) and chooses n by the noise. "
            "A client that trains several steps on its share can report them as the metric "
            "'local-steps' (budgeted_train does), which the plain path reads; the federated "
            "guide's section 2 says what that changes", server_round, why)  # fmt: skip
        state.said_no_steps = True

    def spent(self, state: RunState, fold: RoundFold, n: int, timed_out: Sequence[int],
              timeout: float | None) -> float:  # fmt: skip
        """What the round used of B: D of the clients that replied, plus their reported
        spends; under central DP, whose fold reads no client metric, the shares they were
        sent (nothing of a client's data reaches the records)."""
        replied = fold.replied
        used = float(self.aggregation(np.array([float(max(replied, 1))]))[0])
        if not replied:
            return used
        if not fold.reveals_costs:
            return used + replied * self.share(n)
        return used + float(np.nansum(fold.costs))

    def charge(self, used: float) -> float:
        """What the round adds to the run's cost: B, whatever it used."""
        return self.budget

    def describe(self, state: RunState, n: int) -> str:
        """The budget of a round of n, in words for the run's log."""
        return f"a share of {self.share(n):.4g} each of B = {self.budget:g}"

    def record(self, state: RunState) -> dict[str, Any]:
        """The round's record fields of the budget."""
        return {"budget": self.budget}

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint must share with this budget."""
        n = np.arange(1.0, self.max_arms + 2.0)
        return {"budget": self.budget, "c_min": self.c_min, "total_budget": None,
                "D(1..N+1)": [float(x) for x in self.aggregation(n)]}  # fmt: skip

    def summary(self) -> None:
        """Log the budget (Strategy API's summary)."""
        log(INFO, "\t├──> EE-Grad: budget B = %g per round, c_min = %g%s", self.budget,
            self.c_min, _server_cost(self.aggregation))  # fmt: skip


class TotalBudget:
    """The run's total budget, spent by clients that train their own way.

    Parameters
    ----------
    total : float
        The run's total, > 0, in the unit of ``cost_scale`` × the clients' ``cost_metric``.
    c_min : float, optional
        A client's cost before any has reported one (>= 0, default 0).
    aggregation : callable
        D(n), the server's cost of a round of n clients.
    round_cost : {"sum", "slowest"}
        A round's cost of its clients' (:mod:`eegrad.flower.round_costs`).
    cost_metric : str or None
        The reply's metric of what a client's training cost (None: each reply costs
        ``cost_scale``).
    cost_scale : float
        What one unit of ``cost_metric`` costs (for a straggler's wait: the round's timeout
        read in the metric's seconds).
    """

    #: What of a rule's outlook this budget tells it before each ask (:meth:`outlook`).
    supplies = frozenset({"costs", "budget_left", "rounds_left"})
    #: Record columns this budget adds.
    columns: tuple[str, ...] = ("budget_left",)
    #: Whether every reply must report its cost.
    cost_required = True
    #: N of the budget (None: every node; the rounds' costs, not a share, bound n).
    max_arms = None
    #: B of a round (None: the run has a total instead).
    budget = None
    #: Whether a round's cost grows with its clients (the default rule then weighs it).
    per_cost = True

    def __init__(self, total: float | FedAvgSpend, c_min: float | None, aggregation: Any, *,
                 round_cost: str, cost_metric: str | None, cost_scale: float,
                 owner: str = "EEGradStrategy", name: str = "total_budget") -> None:  # fmt: skip
        #: What the total is of, where it is known at the run's start (your FedAvg's spend).
        self.spend_of = total if isinstance(total, FedAvgSpend) else None
        if self.spend_of is not None and cost_metric is not None:
            raise fail("cost_metric", owner, "None with total_budget=FedAvgSpend(...) (a "
                       "FedAvg's spend is counted in client trainings)", cost_metric)  # fmt: skip
        self.c_min = 0.0 if c_min is None else check_real(c_min, "c_min", owner, ge=0)
        self.aggregation = aggregation
        if round_cost not in ROUND_COSTS:
            raise fail("round_cost", owner, f"one of {ROUND_COSTS}", round_cost)
        if round_cost == "slowest" and cost_metric is None:
            raise fail("round_cost", owner, "'sum' when every reply costs cost_scale "
                       "(cost_metric=None: client trainings, which add up; 'slowest' reads the "
                       "clients' seconds, and would charge a straggler's wait as trainings)",
                       round_cost)  # fmt: skip
        self.round_cost = round_cost
        self.cost_metric, self.cost_scale = cost_metric, cost_scale
        self._owner = owner
        #: The run's total (None until :meth:`resolve` where it is your FedAvg's spend).
        self.total = None if self.spend_of is not None else self._checked(total, name)
        #: Whether a node's cost is unknown until it reports one (a cost metric; client
        #: trainings each cost ``cost_scale``, known before any): late nodes are then asked a
        #: few at a time (:mod:`eegrad.flower.newcomers`).
        self.prices_unseen = cost_metric is not None

    def first_round(self) -> float:
        """The least a round can cost: one client (c_min, or ``cost_scale`` where every reply
        costs that) and D(1)."""
        client = self.cost_scale if self.cost_metric is None else self.c_min
        return max(client, self.c_min) + float(self.aggregation(np.array([1.0]))[0])

    def _checked(self, total: Any, name: str) -> float:
        total = check_real(total, name, self._owner, gt=0)
        first = self.first_round()
        if first > total:
            server = float(self.aggregation(np.array([1.0]))[0])
            client = (f"one training, cost_scale = {self.cost_scale:g}" if self.cost_metric is None
                      else f"c_min = {self.c_min:g}")  # fmt: skip
            raise fail(name, self._owner, f"at least one round of n = 1 ({client}, plus the "
                       f"server's D(1) = {server:g}: {first:g} in all)", total)  # fmt: skip
        return total

    def resolve(self, num_rounds: int | None, num_nodes: int) -> None:
        """At the run's start (its first round's nodes connected, or a resume's K): the total
        of your FedAvg's spend in ``num_rounds``, said in one line; and, where every reply
        costs ``cost_scale``, a budget that even every round at all K clients cannot spend in
        ``num_rounds``, said once."""
        spec = self.spend_of
        if spec is not None:
            if num_rounds is None:
                raise fail("num_rounds", self._owner, "given with a budget of your FedAvg's "
                           "spend (the rounds it is counted over)", None)  # fmt: skip
            self.total = self._checked(spec.total(num_rounds, num_nodes) * self.cost_scale,
                                       "budget")  # fmt: skip
            log(INFO, "EE-Grad: budget: %s, the nodes connected at the start; kept for the "
                "run if more join (wait for them with min_available_nodes=, or give budget=)",
                spec.describe(num_rounds, num_nodes))  # fmt: skip
        if num_rounds is not None and self.cost_metric is None:
            most = num_rounds * (num_nodes * self.cost_scale
                                 + float(self.aggregation(np.array([float(num_nodes)]))[0]))
            if most < self.total:
                log(WARNING, "EE-Grad: the budget, %g, cannot be spent in %d rounds: every "
                    "round at all %d nodes connected costs %g in all; %g will be left (give "
                    "more rounds, or a smaller budget)", self.total, num_rounds, num_nodes,
                    most, self.total - most)  # fmt: skip

    def arms(self, num_nodes: int) -> int:
        """N for K = ``num_nodes``: every node."""
        return num_nodes

    def spend(self, N: int) -> np.ndarray:
        """The same spend for every n, shape (N,): the clients train their own way."""
        return np.ones(N)

    def share(self, n: int) -> None:
        """No share: the clients train their own way."""
        return

    def configure(self, config: ConfigRecord, n: int) -> None:
        """Nothing in a round's train config: the clients train their own way."""

    def costs(self, state: RunState) -> RoundCosts:
        """The clients' costs seen so far (the run's, kept in its state) and the expected cost
        of a round of every n."""
        known = self.cost_metric is None  # every reply costs cost_scale: known before any
        return RoundCosts(self.round_cost, self.aggregation,
                          self.cost_scale if known else self.c_min,
                          latest=state.client_costs)  # fmt: skip

    def at_most(self, state: RunState, N: int, least: int, server_round: int,
                baseline: int | None = None) -> int:  # fmt: skip
        """The most clients the budget left affords in the worst case (its clients as costly as
        the costliest seen); raises :class:`BudgetSpent` where it affords not ``least``. Before
        any client has reported a cost there is no worst case to go by (``c_min`` is the least
        a client costs, not the most): the round asks at most what your strategy's own round
        would (``baseline``: its n, whose cost your FedAvg's run would pay first), or where
        that is not known the fewest clients, ``least``, whose costs then bound the next
        rounds' — unless every reply costs ``cost_scale`` (``cost_metric=None``, client
        trainings), known before any."""
        worst = self.costs(state).worst(N)
        left = self.total - state.cost
        affordable = np.flatnonzero(worst <= left)  # never more than the budget left
        if affordable.size == 0 or affordable.max() + 1 < least:
            raise BudgetSpent(
                f"Server round {server_round} could cost {worst[least - 1]:.4g} (n = {least}, "
                f"its clients as costly as the costliest seen), more than the budget left, "
                f"{left:.4g} of {self.total:g}; the run ends after round {server_round - 1}."
            )
        if not state.client_costs and self.cost_metric is not None:
            return max(least, min(int(affordable.max()) + 1, baseline or least))
        return int(affordable.max()) + 1

    def outlook(self, state: RunState, server_round: int, num_rounds: int | None,
                baseline: int | None = None) -> Outlook:  # fmt: skip
        """What the rule is told before it asks: every n's expected cost (where it reads
        them and they are known: a client has reported one, or each reply costs
        ``cost_scale``, or ``c_min`` is given), the budget left, the rounds left of
        ``num_rounds``, this one included, and the n your strategy would ask (``baseline``)."""
        rule = state.rule
        known = self.cost_metric is None or bool(state.client_costs) or self.c_min > 0
        costs = (np.maximum(self.costs(state).expected(rule.N), 1e-12)
                 if "costs" in rule.selector.reads and known else None)  # fmt: skip
        return Outlook(costs=costs, budget_left=self.total - state.cost,
                       rounds_left=rounds_left(server_round, num_rounds), baseline=baseline)

    def check_private(self, owner: str = "EEGradStrategy") -> None:
        """Refuse a total budget counted in a metric the clients report, under central DP: a
        client's cost (its samples, its seconds) is its own data, and it would set n and the
        run's length unnoised and unaccounted."""
        if self.cost_metric is not None:
            raise fail("cost_metric", owner, "None with privacy=CentralDP(...) and a total "
                       "budget: a client's reported cost is its own data, which would choose n "
                       "and end the run outside the accounted release; count the budget in "
                       "client trainings (choose_clients(..., unit='trainings'), each reply "
                       "costing cost_scale)", self.cost_metric)  # fmt: skip

    def round_timeout(self, state: RunState, n: int, timeout: float | None) -> float | None:
        """How long a round of n waits for its replies: Flower's ``timeout``, and with
        ``round_cost="slowest"`` (the budget's unit, ``cost_scale`` a second) no longer than
        the budget left affords after D(n), so that a straggler's wait, charged in full, never
        takes the run past its total."""
        if self.round_cost != "slowest":
            return timeout
        server = float(self.aggregation(np.array([float(n)]))[0])
        affordable = max(self.total - state.cost - server, 0.0) / self.cost_scale
        return affordable if timeout is None else min(float(timeout), affordable)

    def say_arms(self, num_nodes: int) -> None:
        """Nothing to say: every node connected is an arm."""

    def say_left(self, state: RunState) -> None:
        """At a run's end by its rounds: what of the budget is left, and why."""
        records = state.records
        if self.total is None or not records:
            return
        left = self.total - state.cost
        if left <= 1e-9 * self.total:
            return
        last = records[-1]
        why = ("its last round asked every node connected: the rounds could spend no more"
               if last["arm"] >= (last["nodes_connected"] or 0) else
               "no split of it over the rounds left lowered the final model's noise: the "
               "rule's plan kept it")  # fmt: skip
        log(INFO, "EE-Grad: the run's %d rounds are done with %.4g of the budget %g left (%s)",
            state.server_round, left, self.total, why)  # fmt: skip

    def check_replies(self, fold: RoundFold, server_round: int) -> None:
        """Nothing to check: every reply's cost was required as it was read."""

    def note_local_steps(self, state: RunState, fold: RoundFold, steps: float | None,
                         server_round: int) -> None:  # fmt: skip
        """Nothing to say: the clients train their own way, not on a share that differs with
        n, so every n's update goes as far whether or not they report their steps."""

    def spent(self, state: RunState, fold: RoundFold, n: int, timed_out: Sequence[int],
              timeout: float | None) -> float:  # fmt: skip
        """The round's cost: its clients' (summed, or the slowest's) and D(n); with
        ``round_cost="slowest"`` each node that sent no reply before the round's ``timeout``
        cost it that wait (``cost_scale`` × the timeout, the metric read as seconds), and is
        remembered at that cost, so that the rule expects it again."""
        costs = self.costs(state)
        waited = {} if self.round_cost != "slowest" or timeout is None else {
            int(node): self.cost_scale * timeout for node in timed_out}  # fmt: skip
        used = costs.round_cost(fold.costs + list(waited.values()), n)
        self._say_overspent(state, used, costs.latest)
        costs.tell({**fold.node_costs, **waited})
        return used

    def _say_overspent(self, state: RunState, used: float, seen: dict[int, float]) -> None:
        """Where a round cost more than the budget left before it, say why (its clients cost
        more than any seen, or none had reported a cost) and what to give instead."""
        left = self.total - state.cost
        if used <= left:
            return
        rnd = state.pending.server_round if state.pending is not None else state.server_round + 1
        if seen:
            why = (f"its clients cost more than the costliest seen before it, "
                   f"{max(seen.values()):g}, by which the round was capped")  # fmt: skip
        else:
            why = ("no client had reported a cost before it: a first round asks your "
                   "strategy's n (give a budget of several such rounds, or count it in "
                   "client trainings)")  # fmt: skip
        log(WARNING, "EE-Grad: server round %d cost %g, more than the %g left of the budget "
            "(%g): %s; the run ends with the budget spent", rnd, used, left, self.total,
            why)  # fmt: skip

    def charge(self, used: float) -> float:
        """What the round adds to the run's cost: what it used."""
        return used

    def describe(self, state: RunState, n: int) -> str:
        """The budget left before a round, in words for the run's log."""
        return (f"their own training; budget left {self.total - state.cost:.4g} of "
                f"{self.total:g}")

    def record(self, state: RunState) -> dict[str, Any]:
        """The round's record fields of the budget (after it is charged)."""
        return {"budget": "", "budget_left": self.total - state.cost}

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint must share with this budget."""
        n = np.arange(1.0, D_POINTS + 1.0)
        total = repr(self.spend_of) if self.spend_of is not None else self.total
        return {"budget": None, "c_min": self.c_min, "total_budget": total,
                "D(1..N+1)": [float(x) for x in self.aggregation(n)]}  # fmt: skip

    def summary(self) -> None:
        """Log the budget (Strategy API's summary)."""
        each = (f"{self.cost_scale:g} a reply" if self.cost_metric is None else
                f"{self.cost_metric!r} × {self.cost_scale:g}")  # fmt: skip
        total = (f"what {self.spend_of.strategy}(fraction_train="
                 f"{self.spend_of.fraction_train:g}) spends in the run's rounds"
                 if self.total is None else f"{self.total:g}")  # fmt: skip
        log(INFO, "\t├──> EE-Grad: total budget %s, a round's cost the %s of its clients' "
            "(%s)%s", total, self.round_cost, each, _server_cost(self.aggregation))  # fmt: skip


def check_outlook(budgeting: RoundBudget | TotalBudget, rule: Selector,
                  owner: str = "EEGradStrategy") -> None:  # fmt: skip
    """Refuse a rule that reads an outlook the budget cannot tell it (what the rule does not go
    without, :attr:`~eegrad.Selector.goes_without`), rather than let it run on another objective
    than its own: e.g. :class:`~eegrad.BudgetThompson`, which weighs every n's cost and the
    budget left, under B a round, whose clients report no costs."""
    missing = sorted((rule.reads & OUTLOOK) - rule.goes_without - budgeting.supplies)
    if missing:
        kind = "B a round" if budgeting.total is None else "a total budget"
        told = ", ".join(sorted(budgeting.supplies))
        raise fail("selector", owner, f"a rule whose outlook {kind} supplies (it tells {told}); "
                   f"this one reads {', '.join(repr(m) for m in missing)}", rule)


def make_budget(budget: float | None, total_budget: float | None, c_min: float | None,
                aggregation: Any, *, round_cost: str, cost_metric: str | None, cost_scale: float,
                owner: str = "EEGradStrategy") -> RoundBudget | TotalBudget:  # fmt: skip
    """The budget of ``EEGradStrategy``'s arguments: B per round or the run's total (one of
    the two)."""
    if budget is not None and total_budget is not None:
        raise fail("total_budget", owner, "None when budget is given (budget: a round's, "
                   "shared by its clients; total_budget: the run's, spent by clients that "
                   "train their own way)", total_budget)  # fmt: skip
    if budget is None and total_budget is None:
        raise fail("budget", owner, "a round's budget > 0, or total_budget= for the run's",
                   None)  # fmt: skip
    if budget is not None and isinstance(budget, FedAvgSpend):
        raise fail("budget", owner, "a number (FedAvgSpend is a total: total_budget=)", budget)
    if total_budget is None:
        return RoundBudget(budget, c_min, aggregation, cost_metric=cost_metric,
                           cost_scale=cost_scale, round_cost=round_cost, owner=owner)  # fmt: skip
    return TotalBudget(total_budget, c_min, aggregation, round_cost=round_cost,
                       cost_metric=cost_metric, cost_scale=cost_scale, owner=owner)  # fmt: skip
