r"""eegrad's default rules in Flower: your FedAvg's schedule, left only as far as the evidence
carries.

A practitioner's baseline is the schedule their own strategy runs: :math:`n_b` clients every
round (Flower's FedAvg: its ``fraction_train`` of the nodes, at least its ``min_train_nodes``),
for their ``num_rounds``, at their learning rate, within what it spends. The rules here keep it
and leave it only as far as the run's evidence carries:

**Your spend, kept where it hurts least** (:meth:`AnchoredPlan.even_split`). A total budget of
your FedAvg's expected spend binds where your clients come out costlier than expected (client
costs in samples or seconds vary; your FedAvg would have spent more). The rule then asks fewer
clients in the earliest rounds — as soon as the budget left, less a reserve for the spend's
noise (:data:`RESERVE_Z` standard deviations of the rounds left's spend, :class:`SpendNoise`)
and for the last rounds' worst case (a round never costs more than the budget left at the
costliest client seen), no longer affords your n in every round left — never in the last
:data:`PROTECTED_ROUNDS` while the budget affords them, whose noise the final model keeps; the
last round spends what the reserve saved on more clients. A cut deeper than half your n gives
up the noise's reserve first: rounds of a client or two are what the model feels, the reserve
only a margin. Where the costs do not vary (client trainings), every round is your n.

**Departures, by the knob and the clients' loss.** With ``departure`` α > 0 (default 0: your
schedule), a total budget's rule may also move clients from early rounds to the last ones where
the rounds have shown that a round's noise is forgotten: the split of the budget over the rounds
left (:func:`~eegrad.selectors.plan.plan_rounds`) weighs round j's noise by
:math:`\rho^{h-j}`, ρ taken at the upper confidence bound of its fit (``confidence`` standard
errors above it, :meth:`~eegrad.selectors.progress_model.ProgressModel.kept_bound`), never
below :math:`\lceil (1-\alpha)\, n_b\rceil` clients a round; B a round's rule, the n of most
fitted decrease within a factor :math:`1/(1-\alpha)` of :math:`n_b`. A departure needs the
clients' reported training loss (``train_loss``, as Flower's apps report it) and ends for the
run once that loss rises above the level your own rounds had left it at (:class:`ClientsLoss`):
where the clients report none, nothing can show harm and the rule keeps your n.

**The clients of your rounds.** A round asks its clients among those a round of yours would
ask in the same run (the first n of your :math:`n_b`, or those and more;
:mod:`eegrad.flower.draws`): a round of one client fewer leaves every later round's clients
as yours, so that the run differs from your FedAvg's only where its n does.

In the practitioner's words (the guarantee :func:`eegrad.flower.choose_clients` states): every
round asks your FedAvg's n, within its spend, for your rounds; where your clients cost more than
your budget foresaw, fewer in the earliest rounds, never the last; with ``departure`` α, at
least ⌈(1 − α)·n⌉ a round, and fewer than your n only while the clients' loss shows no harm.
These are the conservative bandit's terms (Wu, Shariff, Lattimore and Szepesvári, ICML 2016):
the baseline's action unless the evidence shows a departure is no worse.

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

__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_DEPARTURE", "LOSS_METRIC", "AnchoredPlan",
           "AnchoredProgress", "ClientsLoss", "SpendNoise", "floor_of"]  # fmt: skip

#: α: how far a round may leave your FedAvg's n (the floor is ⌈(1 − α) n_b⌉); 0, your n.
DEFAULT_DEPARTURE = 0.0
#: The standard errors above the fitted persistence that the plan takes (its upper bound).
DEFAULT_CONFIDENCE = 1.0
#: Rounds at your n before B a round's rule may leave it.
BASELINE_ROUNDS = 3
#: The least share of the final model's noise a plan must remove, against the even split,
#: for the plan to leave the even split (both valued at the upper-bound persistence).
MIN_GAIN = 0.1
#: The rounds at your n just before the first departure whose clients' loss is the reference.
REFERENCE_ROUNDS = 4
#: The last rounds whose clients' loss is the level judged against the reference.
LEVEL_ROUNDS = 3
#: How far the level may rise above the reference before the departures end: this many
#: standard errors of the difference of the two means, and at least :data:`LOSS_MARGIN` of it.
LOSS_Z = 2.0
LOSS_MARGIN = 0.2
#: The run's last rounds, whose noise the final model keeps most of: a shortfall of your
#: budget is taken from the rounds before them (:meth:`AnchoredPlan.even_split`).
PROTECTED_ROUNDS = 3
#: The standard deviations of the spend of the rounds left kept in reserve (:class:`SpendNoise`).
RESERVE_Z = 2.0
#: The standard deviations of one client's cost above its mean taken as the costliest client's
#: price, at which the strategy lets a round cost no more than the budget left.
WORST_Z = 3.0
#: The metric Flower's apps report their clients' training loss under.
LOSS_METRIC = "train_loss"


class ClientsLoss:
    r"""The evidence that rounds away from your n hurt: the training loss the clients report.

    A round's clients' loss :math:`L_t` (the weighted mean of their ``train_loss``, as Flower's
    FedAvg aggregates it) is told after the round (:meth:`note`). The :data:`REFERENCE_ROUNDS`
    rounds at your n just before the first round away from it set the reference, their mean
    :math:`\bar L` and standard deviation :math:`s_L`; from then on, where the mean of the
    last :data:`LEVEL_ROUNDS` rounds' losses exceeds
    :math:`\bar L + \max(z\, s_L \sqrt{1/4 + 1/3},\; m \bar L)` (z = :data:`LOSS_Z` standard
    errors of the difference of the two means, m = :data:`LOSS_MARGIN`), the departures have
    hurt on this federation and end for the rest of the run (:attr:`tripped`). Training lowers
    the loss round by round, so a rise above the level your own rounds had reached is harm, not
    noise, within those bounds.
    Where the clients report no loss, nothing can show harm: :meth:`evidence` is False and the
    rule stays on your n.
    """

    def __init__(self) -> None:
        #: Each round's clients' loss (NaN: not reported), in order.
        self.losses: list[float] = []
        #: The reference (mean, standard deviation), once a round has left your n.
        self.reference: list[float] | None = None
        #: Whether the clients' loss has shown that leaving your n hurt (for the run).
        self.tripped = False

    def note(self, loss: float | None, departed: bool) -> None:
        """Take a round's clients' ``loss`` (None: not reported) and whether the round left your
        n by the rule's choice (``departed``; a round your budget thinned is your n's)."""
        value = float("nan") if loss is None or not math.isfinite(loss) else float(loss)
        if departed and self.reference is None:  # the first departure: the reference
            before = self.losses[-REFERENCE_ROUNDS:]
            if len(before) == REFERENCE_ROUNDS and np.all(np.isfinite(before)):
                self.reference = [float(np.mean(before)), float(np.std(before, ddof=1))]
            else:  # nothing to judge the departure by: it ends
                self.tripped = True
        self.losses.append(value)
        if self.reference is not None and not self.tripped:
            last = self.losses[-LEVEL_ROUNDS:]
            mean, sd = self.reference
            se = sd * math.sqrt(1.0 / REFERENCE_ROUNDS + 1.0 / LEVEL_ROUNDS)
            if not np.all(np.isfinite(last)) or np.mean(last) > mean + max(LOSS_Z * se,
                                                                          LOSS_MARGIN * mean):
                self.tripped = True

    def evidence(self) -> bool:
        """Whether a round may leave your n: the clients have reported their loss in the last
        :data:`REFERENCE_ROUNDS` rounds, and it has not risen since the departures began."""
        if self.tripped:
            return False
        recent = self.losses[-REFERENCE_ROUNDS:]
        return len(recent) == REFERENCE_ROUNDS and bool(np.all(np.isfinite(recent)))

    def explain(self) -> str:
        """Why the rule stays on your n, where it does for the loss."""
        if self.tripped:
            return "the clients' loss rose after rounds away from your n: your n from now on"
        return "no round away from your n until the clients report their loss (train_loss)"


def floor_of(baseline: int, departure: float) -> int:
    r"""The fewest clients a round may ask, :math:`\max(1, \lceil (1-\alpha)\, n_b\rceil)`."""
    return max(1, math.ceil((1.0 - departure) * baseline - 1e-9))


def _may_depart(rule: AnchoredPlan | AnchoredProgress) -> bool:
    """Whether the rule's round may leave your n: a departure asked for, the rounds past your
    own and the clients' loss carrying it."""
    return rule.departure > 0 and not rule._at_baseline() and rule.clients_loss.evidence()


def _check_knobs(departure: Any, confidence: Any, owner: str) -> tuple[float, float]:
    return (check_real(departure, "departure", owner, ge=0, le=1),
            check_real(confidence, "confidence", owner, ge=0))  # fmt: skip


class SpendNoise:
    r"""How far a round's spend strays from its expected cost, per client: the rounds' residuals
    :math:`r_t` (the budget a round took less the expected cost of its n) give
    :math:`\hat\sigma_c^2 = \overline{r_t^2 / n_t}`, the variance of one client's cost about
    its mean. The spend of m rounds of your n is then uncertain by
    :math:`\hat\sigma_c\sqrt{m\,n_b}`: the reserve :meth:`AnchoredPlan.even_split` keeps so
    that a run whose clients come out costlier than expected takes the shortfall from its early
    rounds, not from its last.
    """

    def __init__(self) -> None:
        #: The pending round's (budget left before it, its expected cost, its n).
        self.pending: list[float] | None = None
        self.squares, self.rounds = 0.0, 0

    def asked(self, budget_left: float, expected: float, n: int) -> None:
        """A round asked n clients of ``expected`` cost with ``budget_left`` before it."""
        self.pending = [float(budget_left), float(expected), float(n)]

    def told(self, budget_left: float) -> None:
        """The budget left after the pending round (at the next ask); a budget that grew (a
        resumed run given more rounds) tells no residual."""
        if self.pending is not None:
            before, expected, n = self.pending
            spent = before - float(budget_left)
            r = spent - expected
            if math.isfinite(r) and spent >= 0:
                self.squares += r * r / n
                self.rounds += 1
        self.pending = None

    def client_sd(self) -> float:
        r""":math:`\hat\sigma_c`, 0 until two rounds have shown it."""
        return math.sqrt(self.squares / self.rounds) if self.rounds >= 2 else 0.0


@register_rule("anchored_plan", label="Your FedAvg's schedule, left as far as the evidence carries")
class AnchoredPlan(BudgetThompson):
    r"""eegrad's default rule of a total budget (:class:`~eegrad.flower.EEGradStrategy`'s and
    :func:`~eegrad.flower.choose_clients`'s): your FedAvg's n every round, left only as far as
    the evidence carries (the module's notes).

    Each round asks your n within your spend (:meth:`even_split`). With ``departure`` α > 0,
    where the clients' loss carries it (:class:`ClientsLoss`), a round asks the first n of the
    split of the budget left over the rounds left that leaves the least noise in the final
    model, :math:`\min \sum_j \rho^{h-j} v_{n_j}` subject to :math:`\sum_j c_{n_j} \le B`
    (:func:`~eegrad.selectors.plan.plan_rounds`), over the n of at least
    :math:`\lceil(1-\alpha)\,n_b\rceil` clients, with ρ the upper confidence bound of what a
    round keeps of the last one's noise — the even split (ρ = 1) unless that plan leaves at
    least :data:`MIN_GAIN` less noise than it, and your n until the rounds have shown ρ.
    Where the budget, not the rounds, ends the run (it affords not even the cheapest round in
    each of the rounds left), a round asks your n and the last the most clients the budget left
    affords; with no schedule of yours told, :class:`~eegrad.BudgetThompson`'s rate per unit of
    cost.

    Parameters
    ----------
    discount, population, spend, seed, release_noise, noise_order, signal_degree, shape_discount
        As :class:`~eegrad.BudgetThompson`.
    departure : float
        α in [0, 1]: how far a round may leave your n where the clients' loss carries it, never
        below ⌈(1 − α)·n_b⌉ clients (default 0: your n within your spend).
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
    #: A round draws its clients among those a round of yours would ask
    #: (:mod:`eegrad.flower.draws`): the run differs from yours only where its n does.
    draws_among_yours = True
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
        self.clients_loss = ClientsLoss()
        self.spend_noise = SpendNoise()
        self._departing = False  # whether the pending round is the rule's departure

    def tell_clients_loss(self, loss: float | None, n: int) -> None:
        """Take the round's clients' training loss (None: not reported, or not to be read) and
        the n it asked (:class:`ClientsLoss`), after :meth:`tell_round`."""
        self.clients_loss.note(loss, departed=self._departing and n != self.baseline())

    def withdraw(self) -> None:
        """Give up the pending round: its spend is not a residual."""
        super().withdraw()
        self.spend_noise.pending = None

    def _look_ahead(self, outlook: Outlook, owner: str) -> None:
        """Take the costs, the budget and the rounds left, and the n your strategy would ask."""
        super()._look_ahead(outlook, owner)
        if outlook.baseline is not None:
            self._baseline = min(self._shape[1], max(1, int(outlook.baseline)))
        if outlook.budget_left is not None:
            self.spend_noise.told(outlook.budget_left)

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
        r"""The fewest clients a round may ask, :math:`\lceil(1-\alpha)\,n_b\rceil`, or your n
        where the clients' loss does not carry a departure (:meth:`ClientsLoss.evidence`)."""
        if not self.clients_loss.evidence():
            return min(self._shape[1], self.baseline())
        return min(self._shape[1], floor_of(self.baseline(), self.departure))

    def even_split(self) -> int:
        r"""Your n, but fewer in the next rounds where your budget falls short of your n in
        every round left (your FedAvg's clients came out costlier than its expected spend),
        with a reserve for the spend's noise and for the last rounds' worst case
        (:class:`SpendNoise`): the shortfall taken from the earliest rounds, whose noise the
        rounds after forget, never from the last :data:`PROTECTED_ROUNDS` while the budget
        affords them. A round never costs more than the budget left at the costliest client
        seen, so each of those rounds needs :math:`n_b\,(\bar c + z_w \hat\sigma_c)` before it
        (:data:`WORST_Z`), where its expected cost is :math:`n_b \bar c`. A cut deeper than
        half your n (:math:`\lceil n_b/2\rceil`) gives up the noise's reserve first: half your
        n while the budget left affords it in every round left besides the last rounds' worst
        case. The run's last round asks the most clients the budget left affords (what the
        reserve saved). Your n until a few rounds have shown the costs."""
        a, b = self._ahead, self.baseline()
        if not a.told() or a.rounds_left is None or self.spend_noise.rounds < REFERENCE_ROUNDS:
            return b
        left = int(a.rounds_left)
        if left <= 1:
            fits = np.flatnonzero(a.costs <= a.budget_left)
            return max(b, int(fits.max()) + 1) if fits.size else 1
        sd = self.spend_noise.client_sd()
        n = np.arange(1, b + 1)
        kept = min(PROTECTED_ROUNDS, left)
        if left <= kept:  # a protected round: your n while the budget affords it at the worst
            fits = np.flatnonzero(a.costs[:b] * left + WORST_Z * sd * n <= a.budget_left)
            return int(fits.max()) + 1 if fits.size else 1
        spendable = a.budget_left - RESERVE_Z * sd * math.sqrt(b * (left - 1))
        protected = kept * a.costs[b - 1] + WORST_Z * sd * b
        step = a.costs[b - 1] - (a.costs[b - 2] if b >= 2 else 0.0)
        if b < 2 or a.costs[b - 1] * (left - kept) + protected - spendable < step:
            return b
        share = (spendable - protected) / (left - kept)
        n = max(1, min(b - 1, int(np.argmin(np.abs(a.costs[:b] - share))) + 1))
        half = floor_of(b, 0.5)  # the reserve given up before a cut deeper than half your n
        if n < half and a.costs[half - 1] * (left - kept) + protected <= a.budget_left:
            return half
        return n

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
        if _may_depart(self):
            rho = self.plan_contraction() if np.isfinite(self.model.kept()[0]) else None
            return (a.explain_plan(self.planned_arms(), rho)
                    + f"; never fewer than {self.floor()} a round (your n, {self.baseline()}, "
                    f"less {self.departure:.0%})")
        why = ""
        if self.departure > 0:
            why = ("; " + self.clients_loss.explain() if not self._at_baseline() else
                   "; until the rounds show what of a round's noise the next keeps")  # fmt: skip
        return self._your_n() + why

    def _your_n(self) -> str:
        """The round of :meth:`even_split`, in the practitioner's words."""
        b, n = self.baseline(), self.even_split()
        if n < b:
            return (f"{n}, fewer than your strategy's n ({b}): your clients cost more than your "
                    "budget foresaw, and the last rounds keep your n")
        if n > b:
            return f"the run's last round: {n} clients, your n ({b}) and what the rounds saved"
        return f"your strategy's n ({b})"

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
        self._departing = False
        if self._budget_binds():  # your n each round, the last round the most it affords
            if self._baseline is None:  # no schedule of yours: the rate per unit of cost
                return super()._select(t)
            last = self.last_round_arm()
            return np.full(R, self._baseline - 1 if last is None else last, dtype=np.int64)
        self._departing = _may_depart(self)
        arm = int(self.planned_arms()[0]) if self._departing else self.even_split() - 1
        a = self._ahead
        if a.told():
            self.spend_noise.asked(a.budget_left, a.costs[arm], arm + 1)
        return np.full(R, arm, dtype=np.int64)


@register_rule("anchored_progress", label="Your n, left within a factor as the fit carries")
class AnchoredProgress(ProgressThompson):
    r"""eegrad's default rule of B a round (the paper's model: the n clients share B): your
    strategy's n; with ``departure`` α > 0, after the first rounds and while the clients' loss
    carries it (:class:`ClientsLoss`), the n of most fitted expected decrease
    :math:`D_n^{(h)}` (:class:`~eegrad.ProgressThompson`'s objective, at the fitted noise, not a
    draw) among the n within a factor :math:`1/(1-\alpha)` of yours,
    :math:`\lceil(1-\alpha)\,n_b\rceil \le n \le \lfloor n_b/(1-\alpha)\rfloor`, ties to your n.

    Parameters
    ----------
    discount, population, spend, seed, release_noise, noise_order, signal_degree, shape_discount
        As :class:`~eegrad.ProgressThompson`.
    departure : float
        α in [0, 1] (default 0: your n; 0.5: within a factor 2 of it; 1: any n).
    """

    #: Besides the per-round rule's, the n your strategy would ask.
    reads = frozenset({*ProgressThompson.reads, "baseline"})
    #: As :attr:`AnchoredPlan.draws_among_yours`.
    draws_among_yours = True
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
        self.clients_loss = ClientsLoss()
        self._departing = False  # whether the pending round is the rule's departure

    def tell_clients_loss(self, loss: float | None, n: int) -> None:
        """Take the round's clients' training loss (None: not reported, or not to be read) and
        the n it asked (:class:`ClientsLoss`), after :meth:`tell_round`."""
        self.clients_loss.note(loss, departed=self._departing and n != self.baseline())

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
        """Your n; with a departure, your n while the rounds show the model (or while the
        clients' loss does not carry it), then the arms of most fitted decrease and the bounds
        they are chosen within."""
        lo, hi = self.bounds()
        yours = f"your strategy's n ({self.baseline()})"
        if self.departure == 0:
            return yours
        if self._at_baseline():
            return f"{yours} while the rounds show the model"
        if not self.clients_loss.evidence():
            return f"{yours}; {self.clients_loss.explain()}"
        return (super().explain(top) or "") + f"; n within {lo}..{hi} (your n, {self.baseline()})"

    def _at_baseline(self) -> bool:
        return self.rounds < BASELINE_ROUNDS or not self.model.ready()

    def _select(self, t: int) -> np.ndarray:
        R = self._shape[0]
        self._departing = _may_depart(self)
        if not self._departing:
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
