r"""eegrad's default rules in Flower: your FedAvg's schedule, left only as far as the evidence
carries.

A practitioner's baseline is the schedule their own strategy runs: :math:`n_b` clients every
round (Flower's FedAvg: its ``fraction_train`` of the nodes, at least its ``min_train_nodes``),
for their ``num_rounds``, at their learning rate. The rules here start from it and depart from
it in two ways only, each bounded:

**The floor.** No round asks fewer than :math:`\lceil (1-\alpha)\, n_b\rceil` clients, α the
``departure`` (default 0.5: never fewer than half your clients; 0: your schedule exactly; 1: no
floor). A round of n clients adds noise of variance :math:`v_n \approx v_1/n` to the model, so
the floor bounds every round's noise by :math:`1/(1-\alpha)` times your FedAvg round's: a
round of few clients whose updates pull the model towards their own data (label skew, local
epochs) cannot move it further than that. This is the trust region in which the rule's
linear model of the rounds (below) is taken to hold.

**The evidence, taken against the departure.** Within the floor, a total budget's rule moves
clients from early rounds to the last ones only where the rounds have shown that a round's
noise is forgotten by the rounds after it. The split of the budget over the rounds left
(:func:`~eegrad.selectors.plan.plan_rounds`) weighs round j's noise by :math:`\rho^{h-j}`; the
rule plans with an upper confidence bound of ρ, the fitted persistence of the rounds' deviations
plus ``confidence`` standard errors (:meth:`~eegrad.selectors.progress_model.ProgressModel.
kept_bound`). Until a few rounds have shown it, and wherever it is uncertain, ρ is near 1 and the
plan is your FedAvg's even split; the more surely the rounds forget, the more of the budget goes
to the last rounds, whose noise stays in the final model. The first rounds are your FedAvg's.

In the practitioner's words (the guarantee :func:`eegrad.flower.choose_clients` states): every
round asks at least ⌈(1 − α)·n⌉ of the n clients your FedAvg would; the run spends what your
FedAvg would over your rounds; it asks fewer than your n only once its rounds have shown — with
the uncertainty of its fit counted against it — that early rounds' noise is forgotten, and spends
what that saves on more clients in the last rounds. These are the conservative bandit's terms
(Wu, Shariff, Lattimore and Szepesvári, ICML 2016): the baseline's action unless the evidence's
lower confidence bound shows a departure is no worse, the loss the departure may risk bounded
by the knob.

:class:`AnchoredPlan` is the rule of a total budget (the rounds and the spend both bind: the
clients train their own way; costs may be client trainings, samples or the slowest client's
seconds). :class:`AnchoredProgress` is the rule of B a round (the paper's model: the n clients
share B): the n of most fitted expected decrease (:class:`~eegrad.ProgressThompson`'s objective
at the fitted noise, not a draw) within a factor :math:`1/(1-\alpha)` of :math:`n_b`, your n
until the model has seen its rounds. Both read the n your strategy would ask from the ask's
outlook (``baseline``); where the strategy does not sample as FedAvg does, a total budget's
anchor is its even split over the rounds left, and B a round's is the arms' middle.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import check_real
from .budget import BudgetThompson
from .evidence import Outlook
from .model_rule import largest_best
from .plan import plan_rounds, planned_value
from .progress import ProgressThompson
from .registry import register_rule

__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_DEPARTURE", "AnchoredPlan", "AnchoredProgress",
           "floor_of"]  # fmt: skip

#: α: how far a round may leave your FedAvg's n (the floor is ⌈(1 − α) n_b⌉).
DEFAULT_DEPARTURE = 0.5
#: The standard errors above the fitted persistence that the plan takes (its upper bound).
DEFAULT_CONFIDENCE = 1.0
#: Rounds at your n before B a round's rule may leave it.
BASELINE_ROUNDS = 3
#: The least share of the final model's noise a plan must remove, against the even split,
#: for the plan to leave the even split (both valued at the upper-bound persistence).
MIN_GAIN = 0.1


def floor_of(baseline: int, departure: float) -> int:
    r"""The fewest clients a round may ask, :math:`\max(1, \lceil (1-\alpha)\, n_b\rceil)`."""
    return max(1, math.ceil((1.0 - departure) * baseline - 1e-9))


def _check_knobs(departure: Any, confidence: Any, owner: str) -> tuple[float, float]:
    return (check_real(departure, "departure", owner, ge=0, le=1),
            check_real(confidence, "confidence", owner, ge=0))  # fmt: skip


@register_rule("anchored_plan", label="Your FedAvg's schedule, left as far as the evidence carries")
class AnchoredPlan(BudgetThompson):
    r"""eegrad's default rule of a total budget (:class:`~eegrad.flower.EEGradStrategy`'s and
    :func:`~eegrad.flower.choose_clients`'s): your FedAvg's n every round, left only as far as
    the evidence carries (the module's notes).

    Each round asks the first n of the split of the budget left over the rounds left that
    leaves the least noise in the final model, :math:`\min \sum_j \rho^{h-j} v_{n_j}` subject
    to :math:`\sum_j c_{n_j} \le B` (:func:`~eegrad.selectors.plan.plan_rounds`), over the n of
    at least :math:`\lceil(1-\alpha)\,n_b\rceil` clients, with ρ the upper confidence bound of
    what a round keeps of the last one's noise — the even split (ρ = 1) unless that plan
    leaves at least :data:`MIN_GAIN` less noise than it. Until the rounds have shown ρ, and
    before the costs are known, a round asks your n. Where the budget, not the rounds, ends the
    run (it affords not even the cheapest round in each of the rounds left), a round asks your
    n and the last the most clients the budget left affords; with no schedule of yours told,
    :class:`~eegrad.BudgetThompson`'s rate per unit of cost.

    Parameters
    ----------
    discount, population, spend, seed, release_noise, noise_order, signal_degree, shape_discount
        As :class:`~eegrad.BudgetThompson`.
    departure : float
        α in [0, 1]: no round asks fewer than ⌈(1 − α)·n_b⌉ clients (default 0.5).
    confidence : float
        The standard errors, >= 0, above the fitted persistence the plan takes (default 1).

    Examples
    --------
    >>> import numpy as np
    >>> from eegrad.selectors import AnchoredPlan, Outlook
    >>> rule = AnchoredPlan(population=20)
    >>> rule.init(1, 20, 3)
    >>> costs = np.arange(1.0, 21.0)  # a round of n costs n trainings
    >>> rule.ask(1, outlook=Outlook(costs=costs, budget_left=60.0, rounds_left=10, baseline=6))
    array([5])
    """

    #: Besides the total-budget rule's, the n your strategy would ask.
    reads = frozenset({*BudgetThompson.reads, "baseline"})
    goes_without = frozenset({*BudgetThompson.goes_without, "baseline"})

    def __init__(self, discount: float = 0.9, population: int | None = None, spend: Any = None,
                 seed: int = 0, release_noise: Any = None, noise_order: int = 1,
                 signal_degree: int = 1, shape_discount: float = 0.99,
                 departure: float = DEFAULT_DEPARTURE,
                 confidence: float = DEFAULT_CONFIDENCE) -> None:  # fmt: skip
        super().__init__(discount, population, spend, seed, release_noise, noise_order,
                         signal_degree, shape_discount)  # fmt: skip
        self.departure, self.confidence = _check_knobs(departure, confidence, "AnchoredPlan")

    def get_params(self) -> dict[str, Any]:
        """The total-budget rule's parameters (but ``last_round`` and ``warmup``: the plan
        ends the run itself), ``departure`` and ``confidence``."""
        params = super().get_params()
        params.pop("last_round", None)
        params.pop("warmup", None)
        return {**params, "departure": self.departure, "confidence": self.confidence}

    def init(self, R, N, d, truth=None, streams=None) -> None:
        """Start a run: no evidence, no costs, budget or baseline told."""
        super().init(R, N, d, truth, streams)
        self._baseline: int | None = None

    def _look_ahead(self, outlook: Outlook, owner: str) -> None:
        """Take the costs, the budget and the rounds left, and the n your strategy would ask."""
        super()._look_ahead(outlook, owner)
        if outlook.baseline is not None:
            self._baseline = min(self._shape[1], max(1, int(outlook.baseline)))

    def baseline(self) -> int:
        """:math:`n_b`: the n your strategy would ask, or where it is not told the even split
        (the most clients whose round every round left affords), or before the costs are
        known, 1."""
        if self._baseline is not None:
            return self._baseline
        a = self._ahead
        if not a.told() or a.rounds_left is None:
            return 1
        fits = np.flatnonzero(a.costs * a.rounds_left <= a.budget_left)
        return int(fits.max()) + 1 if fits.size else 1

    def floor(self) -> int:
        r"""The fewest clients a round may ask, :math:`\lceil(1-\alpha)\,n_b\rceil`."""
        return min(self._shape[1], floor_of(self.baseline(), self.departure))

    def plan_contraction(self) -> float:
        r""":math:`\rho` the plan takes: the square of the upper confidence bound of what a round
        keeps of the last one's deviation (``confidence`` standard errors above the fit), 1
        until it is fitted (your even split), at least a thousandth."""
        keep = float(self.model.kept_bound(self.confidence)[0])
        return 1.0 if not np.isfinite(keep) else max(keep * keep, 1e-3)

    def planned_arms(self) -> np.ndarray:
        r"""The split of the budget left over the rounds left over the n of at least
        :meth:`floor` clients (:func:`~eegrad.selectors.plan.plan_rounds`), the next round
        first, with the fitted noise of every n at equal weights (before it tells the n apart,
        :math:`v_n \propto 1/n - 1/K`) and :meth:`plan_contraction`."""
        N = self._shape[1]
        n = np.arange(1, N + 1, dtype=np.float64)
        noise = self.model.noise_of(self.model.fit()[0], equal=True)[0]
        if not (np.all(np.isfinite(noise)) and noise[0] > noise[-1]):
            K = float(self.population) if self.population is not None else float(N)
            noise = 1.0 / n - 1.0 / max(K, float(N))
        lo = self.floor() - 1
        a = self._ahead
        costs, noise, rho = a.costs[lo:], np.maximum(noise[lo:], 0.0), self.plan_contraction()
        plan = plan_rounds(costs, noise, rho, a.rounds_left, a.budget_left)
        even = plan_rounds(costs, noise, 1.0, a.rounds_left, a.budget_left)
        # leave the even split only for a gain the evidence carries (:data:`MIN_GAIN`)
        if planned_value(plan, noise, rho) > (1.0 - MIN_GAIN) * planned_value(even, noise, rho):
            plan = even
        return plan + lo

    def explain(self, top: int = 3) -> str | None:
        """The round's place in the plan, in the practitioner's words."""
        a = self._ahead
        if self._budget_binds():
            if self._baseline is None:
                return super().explain(top)
            if self.last_round_arm() is not None:
                return (f"the run's last round: the most clients the budget left affords "
                        f"(n = {self.last_round_arm() + 1}), its noise stays in the final model")
            return f"your strategy's n ({self._baseline}) while the budget lasts"
        if self._at_baseline():
            return (f"your strategy's n ({self.baseline()}) until the rounds show what of a "
                    "round's noise the next keeps")
        rho = self.plan_contraction() if np.isfinite(self.model.kept()[0]) else None
        return (a.explain_plan(self.planned_arms(), rho)
                + f"; never fewer than {self.floor()} a round (your n, {self.baseline()}, "
                f"less {self.departure:.0%})")

    def _at_baseline(self) -> bool:
        """Whether the round is your strategy's own: before the costs and the rounds left are
        told, and until the rounds have shown what of a round's noise the next keeps (the
        plan's even split, whose costs a few rounds' clients would misprice)."""
        a = self._ahead
        return not a.told() or a.rounds_left is None or not np.isfinite(self.model.kept()[0])

    def _budget_binds(self) -> bool:
        """Whether the budget, not the rounds, ends the run: it affords not even the cheapest
        round in each of the rounds left (a run of many rounds and a budget of a few)."""
        a = self._ahead
        return a.told() and a.rounds_left is not None and not a.rounds_bind()

    def _select(self, t: int) -> np.ndarray:
        R = self._shape[0]
        if self._budget_binds():  # your n each round, the last round the most it affords
            if self._baseline is None:  # no schedule of yours: the rate per unit of cost
                return super()._select(t)
            last = self.last_round_arm()
            return np.full(R, self._baseline - 1 if last is None else last, dtype=np.int64)
        if self._at_baseline():
            return np.full(R, self.baseline() - 1, dtype=np.int64)
        return np.full(R, int(self.planned_arms()[0]), dtype=np.int64)


@register_rule("anchored_progress", label="Your n, left within a factor as the fit carries")
class AnchoredProgress(ProgressThompson):
    r"""eegrad's default rule of B a round (the paper's model: the n clients share B): your
    strategy's n for the first rounds, then the n of most fitted expected decrease
    :math:`D_n^{(h)}` (:class:`~eegrad.ProgressThompson`'s objective, at the fitted noise, not a
    draw) among the n within a factor :math:`1/(1-\alpha)` of yours,
    :math:`\lceil(1-\alpha)\,n_b\rceil \le n \le \lfloor n_b/(1-\alpha)\rfloor`, ties to your n.

    Parameters
    ----------
    discount, population, spend, seed, release_noise, noise_order, signal_degree, shape_discount
        As :class:`~eegrad.ProgressThompson`.
    departure : float
        α in [0, 1] (default 0.5: within a factor 2 of your n; 1: any n).
    """

    #: Besides the per-round rule's, the n your strategy would ask.
    reads = frozenset({*ProgressThompson.reads, "baseline"})
    goes_without = frozenset({*ProgressThompson.goes_without, "baseline"})

    def __init__(self, discount: float = 0.9, population: int | None = None, spend: Any = None,
                 seed: int = 0, release_noise: Any = None, noise_order: int = 1,
                 signal_degree: int = 1, shape_discount: float = 0.99,
                 departure: float = DEFAULT_DEPARTURE) -> None:  # fmt: skip
        super().__init__(discount, population, spend, seed, release_noise, noise_order,
                         signal_degree, shape_discount=shape_discount)  # fmt: skip
        self.departure = check_real(departure, "departure", "AnchoredProgress", ge=0, le=1)

    def get_params(self) -> dict[str, Any]:
        """The per-round rule's parameters (but ``warmup``: the first rounds are yours) and
        ``departure``."""
        params = super().get_params()
        params.pop("warmup", None)
        return {**params, "departure": self.departure}

    def init(self, R, N, d, truth=None, streams=None) -> None:
        """Start a run: no evidence, no baseline told."""
        super().init(R, N, d, truth, streams)
        self._baseline: int | None = None
        self.warmup_arms = []

    def _look_ahead(self, outlook: Outlook, owner: str) -> None:
        """Take the rounds left and the n your strategy would ask."""
        super()._look_ahead(outlook, owner)
        if outlook.baseline is not None:
            self._baseline = min(self._shape[1], max(1, int(outlook.baseline)))

    def baseline(self) -> int:
        """:math:`n_b`: the n your strategy would ask, else the arms' middle."""
        N = self._shape[1]
        return self._baseline if self._baseline is not None else max(1, (N + 1) // 2)

    def bounds(self) -> tuple[int, int]:
        r"""The fewest and the most clients a round may ask:
        :math:`\lceil(1-\alpha)\,n_b\rceil` and :math:`\lfloor n_b/(1-\alpha)\rfloor` (any
        where α = 1)."""
        N, b = self._shape[1], self.baseline()
        hi = N if self.departure >= 1 else min(N, int(b / (1.0 - self.departure) + 1e-9))
        return min(N, floor_of(b, self.departure)), max(hi, b)

    def explain(self, top: int = 3) -> str | None:
        """Your n while the rounds show the model, then the arms of most fitted decrease and
        the bounds they are chosen within."""
        lo, hi = self.bounds()
        if self._at_baseline():
            return f"your strategy's n ({self.baseline()}) while the rounds show the model"
        return (super().explain(top) or "") + f"; n within {lo}..{hi} (your n, {self.baseline()})"

    def _at_baseline(self) -> bool:
        return self.rounds < BASELINE_ROUNDS or not self.model.ready()

    def _select(self, t: int) -> np.ndarray:
        R = self._shape[0]
        if self._at_baseline():
            return np.full(R, self.baseline() - 1, dtype=np.int64)
        return self._choose()

    def _choose(self) -> np.ndarray:
        """The most fitted expected decrease within :meth:`bounds` (ties: your n)."""
        lo, hi = self.bounds()
        value = self._objective(self.predicted())
        N = self._shape[1]
        n = np.arange(1, N + 1)
        allowed = (n >= lo) & (n <= hi)
        value = np.where(allowed[None, :], value, -np.inf)
        b = self.baseline() - 1
        best = largest_best(value)
        ties = value[np.arange(R := value.shape[0]), best] <= value[np.arange(R), b]
        return np.where(ties, b, best).astype(np.int64)
