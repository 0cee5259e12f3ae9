r"""The benchmark's methods besides eegrad's default, each a rule or a Flower strategy.

``guess``        your FedAvg: Flower's ``FedAvg`` at the n a practitioner would guess, 10 % of K
                 (:func:`guess_n`), for the R rounds whose spend is the budget
``fedavg-<n>``   the same at every n below the guess (their rounds spend less), each n's
                 clients' learning rate tuned for it (:class:`~eegrad.FixedArm` inside
                 :class:`~eegrad.flower.EEGradStrategy`, which only counts the budget)
``fedavg-<n>-last``  the same, its last round asking the most clients the budget left affords,
                 the default's ending (:class:`FixedThenLast`)
``grow``         growing cohorts (Charles et al., NeurIPS 2021): n doubles at each quarter of
                 the rounds, g/4, g/2, g, 2g for the guess g (:class:`BudgetSchedule`)
``decay``        decaying n (Ji et al., arXiv 2003.09603): the same phases reversed
``bara``         BARA-style (Bayesian optimisation of the budget's split over rounds, after Zhang
                 et al., IJCAI 2023): each round's n by GP-UCB over (log n, the round's share of
                 the run), the reward of a round the fall of the validation loss it made (the
                 pooled validation splits, ISP's trust set), within what leaves every later
                 round one client, the last round the most the budget left affords
                 (:func:`make_bara`)
``isp``          ISP (Skorik et al., arXiv 2508.13803; its public code), re-implemented as a
                 Flower strategy (:func:`make_isp`): its probe rounds charged as any round, its
                 trust set the clients' validation splits pooled (a tenth of each client's
                 rows, left in its training data too), its server evaluations not charged (no
                 method's server computation is); its code's warm-up (12 rounds at 2m,
                 made for runs of 150 to 2,000 rounds) and EMA span (20) as they are

The ablation of eegrad's default, ``noise-scale``, is :mod:`eegrad.bench.ablations` (it reads
the default's fits, so that a change of the default reruns it and not these).

Every method runs the same R rounds (those of your FedAvg) within the same total budget, by the
same accounting: a round costs its clients' reported costs plus D(n), and a run ends at its R-th
round or before a round it cannot afford were its clients as costly as the costliest seen (a
fixed n then asks fewer clients in its last rounds, as the budget left affords).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from .._validation import check_integer, fail
from ..selectors.base import Selector
from ..selectors.evidence import OPTIONAL, Outlook

__all__ = ["PHASES", "BudgetSchedule", "FixedThenLast", "ema", "gp_ucb_choice", "guess_n",
           "isp_choice", "make_bara", "make_isp", "phase_counts"]  # fmt: skip

#: The budget's phases of ``grow`` and ``decay``: n changes at each quarter spent.
PHASES = 4


def guess_n(K: int, fraction: float = 0.1) -> int:
    """The n a practitioner guesses: ``fraction`` (10 %) of K, at least 1."""
    return max(1, round(fraction * K))


def phase_counts(K: int, N: int, kind: str, g: int | None = None) -> list[int]:
    """The n of each budget phase: ``grow`` g/4, g/2, g, 2g (g: your FedAvg's n, default
    :func:`guess_n`), each rounded and kept in 1..N; ``decay`` the same reversed."""
    g = guess_n(K) if g is None else g
    counts = [min(N, max(1, round(g * 2.0 ** (j - 2)))) for j in range(PHASES)]
    if kind == "grow":
        return counts
    if kind == "decay":
        return counts[::-1]
    raise fail("kind", "phase_counts", "'grow' or 'decay'", kind)


class BudgetSchedule(Selector):
    """n by the share of the rounds run: phase j = ⌊4 · run / total⌋ asks ``counts[j]``; told
    before every round the rounds left (or, in a run with no last round, the budget left).

    Parameters
    ----------
    counts : sequence of int
        The n of each of the :data:`PHASES` phases.
    """

    uses_statistics = False
    keeps_memory = True
    #: What the run has spent: the budget left, or with B a round the rounds left.
    reads = frozenset({"mean", "budget_left", "rounds_left"})
    goes_without = OPTIONAL | {"budget_left"}

    def __init__(self, counts: Iterable[int]) -> None:
        super().__init__()
        self.phase_n = [check_integer(c, "counts", "BudgetSchedule", ge=1) for c in counts]
        if len(self.phase_n) != PHASES:
            raise fail("counts", "BudgetSchedule", f"{PHASES} counts", self.phase_n)
        self.total: float | None = None
        self.left: float | None = None

    def get_params(self) -> dict[str, Any]:
        """``{'counts': counts}``."""
        return {"counts": list(self.phase_n)}

    def _look_ahead(self, outlook: Outlook, owner: str) -> None:
        """Keep the rounds left, this one included (the round r of R has run (r − 1)/R of
        them), or where the run has no last round the budget left (the first told is the
        total)."""
        left = outlook.rounds_left if outlook.rounds_left is not None else outlook.budget_left
        if left is not None:
            self.left = float(left)
            self.total = self.left if self.total is None else self.total

    def phase(self) -> int:
        """The phase of the budget spent so far (0 before any is told)."""
        if not self.total:
            return 0
        return min(PHASES - 1, int(PHASES * (1.0 - self.left / self.total)))

    def _select(self, t: int) -> np.ndarray:
        arm = min(self.phase_n[self.phase()], self._shape[1]) - 1
        return np.full(self._shape[0], arm, dtype=np.int64)


class FixedThenLast(Selector):
    """n clients every round but the run's last, which asks the most clients the budget left
    affords: the ending of eegrad's default, given to a fixed n.

    Parameters
    ----------
    n : int
        The clients of every round but the last, >= 1.
    """

    uses_statistics = False
    #: Before each ask, every n's expected cost, the budget left and the rounds left.
    reads = frozenset({"mean", "costs", "budget_left", "rounds_left"})

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = check_integer(n, "n", "FixedThenLast", ge=1)
        self.outlook: Outlook | None = None

    def get_params(self) -> dict[str, Any]:
        """``{'n': n}``."""
        return {"n": self.n}

    def _look_ahead(self, outlook: Outlook, owner: str) -> None:
        self.outlook = outlook

    def _select(self, t: int) -> np.ndarray:
        R, N = self._shape[:2]
        arm = min(self.n, N) - 1
        o = self.outlook
        if o is not None and o.rounds_left == 1 and o.costs is not None and \
                o.budget_left is not None:  # fmt: skip
            fits = np.flatnonzero(np.asarray(o.costs) <= o.budget_left)
            arm = int(fits.max()) if fits.size else arm
        return np.full(R, arm, dtype=np.int64)


def isp_choice(mean_losses: dict[int, float], reference: float, history: list[int],
               momentum: float = 0.5) -> int | None:
    """ISP's choice of n from its probe (its public code's ``find_optimal`` and
    ``choose_optimal``): the smallest k whose mean validation loss over the random subsets of
    k updates is below ``reference`` (the EMA of the past validation losses); smoothed as
    ⌊(1 − momentum) · previous + momentum · k⌋ once there is a previous choice; None where no
    k beats the reference (the caller keeps its n)."""
    for k in sorted(mean_losses):
        if reference - mean_losses[k] > 0:
            if not history:
                return k
            return int((1 - momentum) * history[-1] + momentum * k)
    return None


def ema(values: list[float], span: int) -> float:
    """The last value of the exponential moving average of span ``span`` (pandas'
    ``ewm(span, adjust=False)``: weight 2/(span + 1) on each new value)."""
    alpha = 2.0 / (span + 1.0)
    out = values[0]
    for v in values[1:]:
        out = alpha * v + (1 - alpha) * out
    return out


class _Spent(Exception):
    """The budget affords no more round."""


def _budgeted_fedavg(K: int, aggregation: Any, cost_metric: str, cost_scale: float,
                     round_cost: str) -> type:  # fmt: skip
    """Flower's ``FedAvg`` with the benchmark's total-budget accounting, the base of the
    baselines that choose their own n (:func:`make_isp`, :func:`make_bara`; made here, so that
    importing this module needs no Flower): a round asks the n it is given (:meth:`ask`), its
    replies' costs are read as the bench's strategy reads them (:meth:`round_cost`: their sum
    or the slowest's, scaled, plus D(n)), each round is recorded as EEGradStrategy records it,
    and a run the budget ends (:class:`_Spent`) returns the last model."""
    from flwr.serverapp.strategy import FedAvg, Result

    class BudgetedFedAvg(FedAvg):
        def __init__(self) -> None:
            super().__init__(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=1,
                             min_available_nodes=K)  # fmt: skip
            self.cost, self.costliest, self.rounds, self.n = 0.0, 0.0, 0, 1
            self.num_rounds = 1
            self.records: list[dict[str, Any]] = []
            self.latest: Any = None  # the last model (ArrayRecord)

        def ask(self, n: int, grid: Any) -> None:
            """The round asks n of the nodes connected."""
            self.n = n
            self.fraction_train = n / len(list(grid.get_node_ids()))
            self.min_train_nodes = n

        def round_cost(self, replies: Any) -> tuple[list[Any], float]:
            """The replies that came and what their round used; the costliest client seen."""
            replies = [m for m in replies if not m.has_error()]
            costs = [cost_scale * float(m.content["metrics"][cost_metric]) for m in replies]
            self.costliest = max([self.costliest, *costs])
            used = (max(costs, default=0.0) if round_cost == "slowest" else sum(costs)) + \
                float(aggregation(self.n))  # fmt: skip
            return replies, used

        def record(self, server_round: int) -> None:
            """The round done, recorded (its n and the run's cost)."""
            self.rounds += 1
            self.records.append({"server_round": server_round, "arm": self.n, "cost": self.cost})

        def start(self, grid: Any, initial_arrays: Any, num_rounds: int = 3,
                  timeout: float = 3600, train_config: Any = None,
                  evaluate_config: Any = None, evaluate_fn: Any = None) -> Any:  # fmt: skip
            self.num_rounds = int(num_rounds)
            try:
                return super().start(grid, initial_arrays, num_rounds, timeout, train_config,
                                     evaluate_config, evaluate_fn)  # fmt: skip
            except _Spent:
                result = Result()
                result.arrays = self.latest
                return result

        @property
        def state(self) -> Any:  # the harness reads the cost as it reads EEGradStrategy's
            return self

    return BudgetedFedAvg


def make_isp(*, K: int, total_budget: float, aggregation: Any, cost_metric: str,
             cost_scale: float, round_cost: str, validate: Any, validation_cost: float,
             m0: int, seed: int, warmup: int = 12, every: int = 20, draws: int = 10,
             momentum: float = 0.5, span: int = 20) -> Any:  # fmt: skip
    """ISP on Flower's ``FedAvg`` (a subclass made here, so that importing this module needs no
    Flower), with the benchmark's total-budget accounting. ``validate(w_arrays) -> loss`` is the
    server's validation loss of a model (its ArrayRecord); each call costs ``validation_cost``.
    ISP's schedule (its public code's defaults): ``warmup`` rounds at ⌈2 m⌉ clients (m = ``m0``
    first), then every ``every`` rounds a probe round at ⌈2 m⌉ whose updates are re-aggregated
    over ``draws`` random subsets of each size k = 1..⌈2 m⌉ and scored on the validation
    data (:func:`isp_choice`); between probes m clients. The validation loss of the global
    model is taken before every round (ISP's trust loss)."""
    from flwr.app import ArrayRecord

    class ISPStrategy(_budgeted_fedavg(K, aggregation, cost_metric, cost_scale, round_cost)):
        def __init__(self) -> None:
            super().__init__()
            self.m = m0
            self.history: list[int] = []
            self.losses: list[float] = []
            self.rng = np.random.default_rng([seed, 29])
            self.probe = False

        def _n(self) -> int:
            r = self.rounds  # 0-based, as ISP counts
            self.probe = r < warmup or (r - warmup) % every == 0
            return min(K, math.ceil(2 * self.m)) if self.probe else min(K, self.m)

        def _affordable(self, n: int) -> int:
            left = total_budget - self.cost - validation_cost  # the trust loss, every round
            if self.costliest == 0.0:  # no cost known: one client, as the default's first round
                n = 1
            while n >= 1:
                worst = n * self.costliest + float(aggregation(n))
                if self.probe:
                    worst += draws * n * validation_cost
                if worst <= left:
                    return n
                n -= 1
            raise _Spent

        def configure_train(self, server_round: int, arrays: ArrayRecord, config: Any,
                            grid: Any) -> Any:  # fmt: skip
            self.latest = arrays
            self.losses.append(validate(arrays))
            self.ask(self._affordable(self._n()), grid)
            self.cost += validation_cost
            self.saved = arrays
            return super().configure_train(server_round, arrays, config, grid)

        def aggregate_train(self, server_round: int, replies: Any) -> Any:
            replies, used = self.round_cost(replies)
            arrays, metrics = super().aggregate_train(server_round, replies)
            if self.probe and self.rounds >= warmup and len(replies) > 1:
                used += self._find(replies)
            self.cost += used
            self.record(server_round)
            if arrays is not None:
                self.latest = arrays
            return arrays, metrics

        def _find(self, replies: list[Any]) -> float:
            """Score subsets of the probe's updates; returns their validation cost."""
            base = {k: np.asarray(v.numpy(), np.float64) for k, v in self.saved.items()}
            deltas = [{k: np.asarray(m.content["arrays"][k].numpy(), np.float64) - base[k]
                       for k in base} for m in replies]  # fmt: skip
            reference = ema(self.losses[:-1] or self.losses, span)
            means, spent = {}, 0.0
            for k in range(1, len(deltas) + 1):
                losses = []
                for _ in range(draws):
                    pick = self.rng.choice(len(deltas), size=k, replace=False)
                    model = {key: base[key] + sum(deltas[i][key] for i in pick) / k
                             for key in base}  # fmt: skip
                    losses.append(validate(model))
                    spent += validation_cost
                means[k] = float(np.mean(losses))
                if reference - means[k] > 0:
                    break
            choice = isp_choice(means, reference, self.history, momentum)
            if choice is not None:
                self.m = max(1, min(K, choice))
                self.history.append(self.m)
            return spent

    return ISPStrategy()


def gp_ucb_choice(points: list[tuple[float, float]], rewards: list[float], candidates: list[int],
                  progress: float, beta: float = 2.0) -> int:  # fmt: skip
    r"""The n of ``candidates`` of largest upper confidence bound :math:`\mu + \beta\sigma` of a
    Gaussian process fitted to the rounds seen (``points``: (ln n, the run's share done);
    ``rewards``: what each round's loss fell), at the run's share ``progress`` done
    (scikit-learn's ``GaussianProcessRegressor``: a constant times an RBF kernel plus white
    noise, the targets normalised, its hyperparameters fitted, no random restarts)."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    kernel = ConstantKernel(1.0) * RBF(length_scale=[1.0, 0.3]) + WhiteKernel(0.1)
    gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True, random_state=0)
    import warnings

    with warnings.catch_warnings():  # a few points: the fit's bounds warnings say nothing new
        warnings.simplefilter("ignore")
        gp.fit(np.asarray(points, dtype=np.float64), np.asarray(rewards, dtype=np.float64))
    grid = np.array([[math.log(n), progress] for n in candidates])
    mu, sd = gp.predict(grid, return_std=True)
    return int(candidates[int(np.argmax(mu + beta * sd))])


def make_bara(*, K: int, total_budget: float, aggregation: Any, cost_metric: str,
              cost_scale: float, round_cost: str, validate: Any, m0: int,
              beta: float = 2.0, warmup: int = 3) -> Any:  # fmt: skip
    """BARA-style GP-UCB on Flower's ``FedAvg`` (a subclass made here), with the benchmark's
    total-budget accounting (as :func:`make_isp`'s): ``warmup`` rounds at the even split of
    the budget over the rounds (``m0`` clients before any cost is known: one), then the n of
    :func:`gp_ucb_choice` among those that leave every later round one client at the costliest
    client seen; the run's last round asks the most clients the budget left affords.
    ``validate(w_arrays) -> loss`` is the server's validation loss (not charged)."""
    from flwr.app import ArrayRecord

    class BARAStrategy(_budgeted_fedavg(K, aggregation, cost_metric, cost_scale, round_cost)):
        def __init__(self) -> None:
            super().__init__()
            self.points: list[tuple[float, float]] = []
            self.rewards: list[float] = []
            self.before = math.nan

        def _worst(self, n: int) -> float:
            return n * self.costliest + float(aggregation(n))

        def _choose(self) -> int:
            if self.costliest == 0.0:  # no cost known: one client, as the default's first round
                return 1
            h = max(self.num_rounds - self.rounds, 1)  # the rounds left, this one included
            left = total_budget - self.cost
            fits = [n for n in range(1, K + 1) if self._worst(n) <= left]
            if not fits:
                raise _Spent
            if h == 1:  # the last round: the most the budget left affords
                return fits[-1]
            reserve = (h - 1) * self._worst(1)  # every later round one client
            room = [n for n in fits if self._worst(n) <= left - reserve] or [1]
            if self.rounds < warmup or len(self.rewards) < 2:
                even = max(1, int((left / h - float(aggregation(1))) / self.costliest))
                return min(even, room[-1])
            return gp_ucb_choice(self.points, self.rewards, room, self.rounds / self.num_rounds,
                                 beta)  # fmt: skip

        def configure_train(self, server_round: int, arrays: ArrayRecord, config: Any,
                            grid: Any) -> Any:  # fmt: skip
            self.latest = arrays
            self.before = validate(arrays)
            self.ask(self._choose(), grid)  # the first round: one client (no cost known)
            return super().configure_train(server_round, arrays, config, grid)

        def aggregate_train(self, server_round: int, replies: Any) -> Any:
            replies, used = self.round_cost(replies)
            self.cost += used
            arrays, metrics = super().aggregate_train(server_round, replies)
            if arrays is not None:
                self.latest = arrays
                self.points.append((math.log(self.n), self.rounds / self.num_rounds))
                self.rewards.append(self.before - validate(arrays))
            self.record(server_round)
            return arrays, metrics

    return BARAStrategy()
