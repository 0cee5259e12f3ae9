r"""The rule of a total budget: the largest decrease of the loss per unit of cost.

With a total budget the clients train their own way and a round of n costs what its clients
report plus D(n), so that rounds of more clients cost more. :class:`BudgetThompson` reads the
fitted models of :class:`~eegrad.selectors.progress_model.ProgressModel` (the noise, the signal and its
level's contraction) and, before each ask, every n's expected cost and the budget left (the
ask's :class:`~eegrad.selectors.evidence.Outlook`). How the rule was chosen, and the
alternatives measured against it, are on the studies page (docs/guide/federated-studies.md,
*How the progress rules were chosen*).

**The rate of a total budget.** With a total budget every client trains as it always does, so
the arms share one per-client update: a round of n makes the same expected step whatever n is,
and differs only in its noise :math:`v_n` and its expected cost :math:`c_n`. On a quadratic
whose excess loss E contracts by :math:`\rho` a round (the signal level's measured contraction,
:meth:`~eegrad.selectors.progress_model.ProgressModel.contraction`), the round's noise adds :math:`q_n = (1-\sqrt\rho)^2 (v_n/s)E` (a step
that shrinks the expected update by :math:`\sqrt\rho` scales the noise alike, s the signal of
the same round), so that :math:`E' = \rho E + q_n`. Spent at the rate of the budget, dE/dB
= :math:`(q_n - (1-\rho)E)/c_n`; the policy that takes, at every E, the n of the steepest
descent :math:`\min_n (q_n - (1-\rho)E)/c_n` ends below every other policy at every budget
(a scalar state: a trajectory whose slope is never below the least one stays above the one
that takes it). The rule's objective is that slope, :meth:`~BudgetThompson.rate_of_decrease`. It needs
no horizon: far from the noise floor the cheapest round wins, and the noise term takes over as
the excess nears :math:`q_n/(1-\rho)`.

**The run's last round.** A round's noise is forgotten by the rounds after it; the last round's is not, and it is the noise
the final model keeps. Where the clients' own training drifts towards their own data (local epochs), a
round of few clients moves the model most of the way to their optimum, and the next round
of few moves it elsewhere: the model's loss is set by its last round's clients, and a round of
many is forgotten within a round or two. The budget tells which round is the last: a round of
n whose expected cost :math:`c_n` fits in the budget left :math:`B` and leaves less than the
cheapest round's, :math:`B - c_n < \min_m c_m`, ends the run. Where one can, the rule asks the
most clients such a round affords, :math:`\max\{n : c_n \le B,\ B - c_n < \min_m c_m\}`
(:meth:`~BudgetThompson.last_round_arm`); its cost is a few of the cheapest rounds, where a
round's gain has fallen to little.

**The rounds left.** Where the run's rounds are a limit too (Flower's ``num_rounds``: the outlook's
``rounds_left``) and the budget left affords more than the cheapest round in each of them, the
rounds, not the budget, bind: the rate would leave the budget unspent at the last round. The
rule then splits the budget left over the rounds left for the least noise in the final model
(:func:`~eegrad.selectors.plan.plan_rounds`: round j's noise reaches the end shrunk by
:math:`\rho^{h-j}`, so that a round's n grows towards the end the more each round forgets of
the last, and is even, your FedAvg's B/h, where nothing is forgotten), and asks the plan's first
n; it plans again each round with what the round cost and showed. :math:`\rho = (1-\hat a)^2`
is what of a round's deviation the next keeps, fitted from the persistence of consecutive round
means and the rounds' own noise (:meth:`~eegrad.selectors.progress_model.ProgressModel.kept`); the noise
of every n is the fitted one at equal weights. Until the noise is fitted (a fit whose n = 1 is
noisier than its largest n) it plans with :math:`v_n \propto 1/n - 1/K`, and until
:math:`\hat a` is, with :math:`\rho = 1` (the even split).

**Choice.** Three warm-up rounds of two clients (the arms share one per-client update, so any
round's spread informs them all), then the n of the largest rate at the fitted noise (not a
draw: with equal weights the noise's split between clients and their samples is not
identified, and a draw along it would swing the choice), two clients until the contraction is
known; a round that can end the run asks the most clients it affords.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import InvalidParameterTypeError
from .evidence import Outlook
from .model_rule import ModelRule, largest_best
from .plan import BudgetAhead
from .progress_model import ProgressModel
from .registry import register_rule
from .spread import leading_arms

__all__ = ["BudgetAhead", "BudgetThompson"]


@register_rule("budget_thompson", label="Thompson on the rate of a total budget")
class BudgetThompson(ModelRule):
    r"""The largest fitted decrease of the excess loss per unit of cost, for a run with a total
    budget (:class:`~eegrad.flower.EEGradStrategy`'s default there).

    On a quadratic whose excess loss contracts by :math:`\rho` a round, a round of n adds the
    noise :math:`q_n/E = (1-\sqrt\rho)^2 v_n/s` and costs :math:`c_n`; the rule pulls

    .. math::

        \arg\max_n\ \bigl(1 - \rho - (1-\sqrt\rho)^2 v_n/s\bigr)/c_n

    (the module's notes, *The rate of a total budget*), with :math:`v_n` the fitted noise,
    s the smoothed signal level and :math:`\rho` its fitted contraction
    (:class:`~eegrad.selectors.progress_model.ProgressModel`); the run's last round asks the most
    clients it affords (:meth:`last_round_arm`). The step scale a driver damping exploration
    applies is the progress model's (:meth:`~eegrad.selectors.progress_model.ProgressModel.step_scale`):
    once a round is paid for, its cost is spent whatever the step, and the step that makes the
    most of it is the one of most expected decrease.

    Parameters
    ----------
    discount, population, spend, seed, release_noise, noise_order, signal_degree, shape_discount
        As :class:`~eegrad.ProgressThompson`.
    last_round : bool
        End the run on the most clients its last round affords (default True;
        :meth:`last_round_arm`), for the model the run delivers. False keeps the rate's choice
        to the end, for a run whose models along the way count too.
    warmup : sequence of int, optional
        The clients of each warm-up round; default three rounds of two.

    Examples
    --------
    >>> import numpy as np
    >>> from eegrad import BudgetThompson
    >>> rule = BudgetThompson(population=20)
    >>> rule.init(1, 20, 3)
    >>> rule.ask(1)  # the warm-up's rounds of two clients
    array([1])
    """

    #: The round's spread, signal and local steps; before an ask, every n's expected cost, the
    #: budget left and (where the run has a last round) the rounds left.
    reads = frozenset({*ProgressModel.reads, "costs", "budget_left", "rounds_left"})
    #: The progress of a round (:class:`~eegrad.selectors.progress_model.ProgressModel`).
    model_type = ProgressModel

    def __init__(self, discount: float = 0.9, population: int | None = None, spend: Any = None,
                 seed: int = 0, release_noise: Any = None, noise_order: int = 1,
                 signal_degree: int = 1, shape_discount: float = 0.99, last_round: bool = True,
                 warmup: Any = None) -> None:  # fmt: skip
        super().__init__(discount, population, spend, seed, release_noise, noise_order, warmup,
                         signal_degree=signal_degree, shape_discount=shape_discount)
        if not isinstance(last_round, bool | np.bool_):
            raise InvalidParameterTypeError(
                f"The 'last_round' parameter of BudgetThompson must be a bool. Got "
                f"{last_round!r} instead.")  # fmt: skip
        self.last_round = bool(last_round)

    def _default_warmup(self, N: int) -> list[int]:
        """Three rounds of the cheapest n with a spread, 2."""
        if N > 1:
            return [1, 1, 1]
        return super()._default_warmup(N)

    def get_params(self) -> dict[str, Any]:
        """The spread rule's parameters, ``signal_degree``, ``shape_discount`` and
        ``last_round``."""
        return {**super().get_params(), "last_round": self.last_round}

    def init(self, R, N, d, truth=None, streams=None) -> None:
        """Start a run: no evidence, no costs or budget told."""
        super().init(R, N, d, truth, streams)
        #: The costs, budget left and rounds left the last ask's outlook told.
        self._ahead = BudgetAhead(N)

    def _look_ahead(self, outlook: Outlook, owner: str) -> None:
        """Take every n's expected cost :math:`c_n > 0`, shape (N,), what the run has left
        to spend (>= 0) and the rounds it has left (:class:`BudgetAhead`)."""
        self._ahead.take(outlook, owner)

    def rounds_bind(self) -> bool:
        """Whether the rounds left, not the budget, end the run: the budget left affords more
        than the cheapest round in each of them (the module's notes, *The rounds left*)."""
        return self._ahead.rounds_bind()

    def plan_contraction(self) -> float:
        r""":math:`\rho = (1-\hat a)^2`, what of a round's noise each later round keeps
        (:meth:`~eegrad.selectors.progress_model.ProgressModel.kept`), for the first realization; 1
        until it is fitted (the even split), and at least a thousandth (a plan of all in one
        round is no plan)."""
        keep = float(self.model.kept()[0])
        return 1.0 if not np.isfinite(keep) else max(keep * keep, 1e-3)

    def planned_arms(self) -> np.ndarray:
        r"""The split of the budget left over the rounds left
        (:func:`~eegrad.selectors.plan.plan_rounds`), the next round first, for the first
        realization, with the fitted noise of every n at equal weights; where the noise or the
        contraction is not yet fitted, :math:`v_n \propto 1/n - 1/K` and :math:`\rho = 1`."""
        N = self._shape[1]
        n = np.arange(1, N + 1, dtype=np.float64)
        noise = self.model.noise_of(self.model.fit()[0], equal=True)[0]
        if not (np.all(np.isfinite(noise)) and noise[0] > noise[-1]):  # no fit that tells n apart
            K = float(self.population) if self.population is not None else float(N)
            noise = 1.0 / n - 1.0 / max(K, float(N))
        return self._ahead.plan(np.maximum(noise, 0.0), self.plan_contraction())

    def _quadratic_round(self, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""The total-budget objectives' quadratic, one round of each arm: the excess's
        contraction :math:`\rho`, shape (R, 1), and what the round's noise adds relative to
        today's excess, :math:`q_n/E = (1-\sqrt\rho)^2 v_n/s`, shape (R, N), with ``noise``
        the arms' :math:`v_n` and s the smoothed signal level (NaN where unknown)."""
        rho = self.model.contraction()[:, None]
        s = np.exp(self.model.level.log_level)[:, None]  # the smoothed level
        with np.errstate(invalid="ignore", divide="ignore"):
            return rho, (1.0 - np.sqrt(rho)) ** 2 * (noise / s)

    def rate_of_decrease(self, noise: np.ndarray) -> np.ndarray:
        r"""The rule's objective, shape (R, N): the decrease of the excess loss that a round
        of n makes per unit of its expected cost, relative to today's excess, on a quadratic
        whose excess contracts by :math:`\rho` a round,
        :math:`\bigl(1 - \rho - (1-\sqrt\rho)^2 v_n/s\bigr)/c_n` (the module's notes, *The rate
        of a total budget*), with ``noise`` the arms' :math:`v_n` and s the smoothed signal
        level (NaN where unknown)."""
        rho, injected = self._quadratic_round(noise)
        return ((1.0 - rho) - injected) / self._ahead.costs[None, :]

    def last_round_arm(self) -> int | None:
        """The arm of the run's last round, or None: the most clients whose round's expected
        cost fits in the budget left and leaves less than the cheapest round's (the module's
        notes, *The run's last round*; :meth:`BudgetAhead.last_round_arm`)."""
        return self._ahead.last_round_arm()

    def _ending_arm(self) -> int | None:
        """:meth:`last_round_arm` where the rule ends the run on it (``last_round``)."""
        return self.last_round_arm() if self.last_round else None

    # -- ask ---------------------------------------------------------------------------------------
    def _objective(self, noise: np.ndarray) -> np.ndarray:
        """The rate of every arm, shape (R, N), larger is better; until the contraction is
        known, the cheapest round with a spread (n = 2); before the costs and the budget left
        are told, the expected decrease of a round
        (:meth:`~eegrad.selectors.progress_model.ProgressModel.progress`)."""
        if not self._ahead.told():
            m = self.model
            return m.progress(m.signal(), noise, m.curvature())
        N = self._shape[1]
        value = self.rate_of_decrease(noise)
        known = np.all(np.isfinite(value), axis=1, keepdims=True)
        cheapest = np.where(np.arange(N) == min(1, N - 1), 1.0, 0.0)[None, :]
        return np.where(known, value, cheapest)

    def estimates(self) -> dict[str, np.ndarray]:
        r"""Besides ``variance`` (:meth:`SpreadThompson.estimates`): ``signal``, the fitted
        :math:`\lVert E\bar u_n\rVert^2` of arm n's round mean, and ``objective``, the rate
        per unit of cost (NaN until the contraction is fitted)."""
        out = super().estimates()
        if out:
            noise = self.predicted()
            value = self.rate_of_decrease(noise) if self._ahead.told() else self._objective(noise)
            out.update(signal=self.model.signal()[0], objective=value[0])
        return out

    def explain(self, top: int = 3) -> str | None:
        """The run's last round, the warm-up, or the arms of most fitted decrease per unit of
        cost, with the loss's fitted contraction a round."""
        N = self._shape[1]
        if self.rounds_bind():
            rho = self.plan_contraction() if np.isfinite(self.model.kept()[0]) else None
            return self._ahead.explain_plan(self.planned_arms(), rho)
        if (last := self._ending_arm()) is not None:
            return (f"the run's last round: the most clients the budget left affords "
                    f"(n = {last + 1}), its noise stays in the final model")
        if N == 1:
            return None
        if self._warming_up():
            return f"warm-up round {self.rounds + 1} of {len(self.warmup_arms)}"
        noise = self.predicted()
        if not self._ahead.told():
            return leading_arms(self._objective(noise)[0], top,
                                "fitted expected decrease of the loss")  # fmt: skip
        value = self.rate_of_decrease(noise)[0]
        if not np.all(np.isfinite(value)):
            return (f"the cheapest round with a spread (n = {min(2, N)}) until the loss's "
                    "contraction is fitted")
        rho = float(self.model.contraction()[0])
        return (leading_arms(value, top, "fitted decrease of the loss per unit of cost")
                + f"; the loss's fitted contraction ρ = {rho:.4g} a round")

    def _select(self, t: int) -> np.ndarray:
        R = self._shape[0]
        if self.rounds_bind():  # the rounds left bind: the plan's next round
            return np.full(R, int(self.planned_arms()[0]), dtype=np.int64)
        if (last := self._ending_arm()) is not None:
            # a round that can end the run, warm-up or not: its noise stays in the final model
            return np.full(R, last, dtype=np.int64)
        return super()._select(t)

    def _choose(self) -> np.ndarray:
        """The largest rate at the fitted noise (ties: largest n)."""
        return largest_best(self._objective(self.predicted()))
