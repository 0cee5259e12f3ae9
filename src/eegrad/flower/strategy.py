r"""A Flower strategy that learns how many clients to ask under a per-round budget.

At every server round :class:`EEGradStrategy` asks its selector for an arm n — the number of
clients — samples n of the connected nodes, and sends each the model and its share
:math:`(B - D(n))/n` of the round's budget B (the paper's Section 2: D(n) is the server's
aggregation cost); with a user's own Flower strategy inside (``strategy=``,
:mod:`eegrad.flower.inner`), that strategy's messages for exactly those nodes. The replies are
pulled one at a time (:mod:`eegrad.flower.pulling`) and each is folded, as it comes, into the
round's running sums and dropped (:mod:`eegrad.flower.replies`: one pass over the reply, in the
model's dtype, as FedAvg's server makes; no n × d stack), as an update :math:`u_i = w - w_i`
(for one local gradient step, ``lr`` times the client's gradient — FedSGD, the case the paper's
model covers; for several local steps a model delta, a pseudo-gradient), and the selector is
told the pull:

* ``steps="every-round"`` (default): every round is a model step,
  :math:`w \leftarrow w - \eta \sum_i p_i u_i` with :math:`p_i` the clients' shares of the samples
  used — FedAvg's aggregate for :math:`\eta = 1` — and the selector is told the round's record
  (:meth:`eegrad.Selector.tell_round`: the parts' spread, the mean's signal). The default selector (:func:`default_rule`),
  :class:`eegrad.ProgressThompson`, learns the variance of every n from the spread of the updates
  within rounds, and how far each n's update goes from the round means, and picks the n of most
  expected decrease; exploring costs only a noisier step.
* ``steps="t-rounds"``: the paper's Algorithm 1 — T query rounds at one model, then one step with
  the mean of the T round means. The default selector is :func:`eegrad.default_selector`.

The selector is driven by a :class:`~eegrad.flower.driver.RuleDriver` on the same random
stream as a :class:`eegrad.GradientEstimator`, so its choices are those of a
``GradientEstimator`` told the same updates (tested).

Per-round records (server round, step, arm, clients asked and replied, failed nodes, budget,
budget used, cumulative cost) go to the round's Flower ``MetricRecord`` and to
:attr:`EEGradStrategy.records`, written as a tidy CSV to ``csv_path`` after every round. The
run's state is one :class:`~eegrad.flower.state.RunState` (:attr:`EEGradStrategy.state`); the
constructor's arguments are the configuration, and the checkpoint's fingerprint.

**Failures.** A node whose reply is an error, or that does not reply before the timeout, is
dropped from the round and named in its record (``failed_nodes``); the round uses the updates
that came. A round with none is lost: no step, and the selector's pull is withdrawn. An update of
the wrong shape or with NaN/Inf is an error naming the node and the round.
"""

from __future__ import annotations

import copy
import io
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from logging import ERROR, INFO, WARNING
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Message,
    MetricRecord,
)
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy
from flwr.supercore import log

from .._random import as_generator
from .._validation import (
    InvalidParameterError,
    InvalidParameterTypeError,
    check_integer,
    check_real,
    fail,
)
from ..costs import AggregationCost, LinearAggregation, as_aggregation
from ..selectors import BudgetThompson, ProgressThompson, Selector, SpreadThompson
from .aggregators import make_aggregator
from .budgets import BudgetSpent, check_outlook, make_budget
from .client import SHARE_KEY, check_metric_key
from .driver import RuleDriver
from .evaluations import EVALUATION_COLUMNS
from .inner import (
    inner_kind,
)
from .keeping import RunKeeping
from .model_arrays import array_view
from .privacy import CentralDP, PrivacyBudgetExhausted, refuse_fixed_n_wrappers
from .pulling import PullingGrid
from .releases import make_release
from .replies import ClientUpdateError, RoundFold
from .round_report import RoundReport, check_callback
from .schedules import make_schedule
from .state import RunState, Streams
from .stops import RunStopped

__all__ = ["DEFAULT_NOISE_ORDER", "EVALUATION_COLUMNS", "RECORD_COLUMNS", "STOPS", "BudgetSpent",
           "ClientUpdateError", "EEGradStrategy", "default_rule", "record_metrics"]  # fmt: skip


#: Columns of the per-round records (and of ``csv_path``); a round's ``MetricRecord`` holds
#: their numbers under the same names (:func:`record_metrics`).
RECORD_COLUMNS = ("server_round", "step", "arm", "clients_asked", "clients_replied",
                  "failed_nodes", "budget", "budget_used", "cost",
                  "nodes_connected")  # fmt: skip

def record_metrics(row: dict[str, Any]) -> dict[str, int | float]:
    """A round's record as the numbers of its ``MetricRecord``, under the same names: every
    numeric field but ``server_round`` (the result's key) — ``step`` only in a round that
    stepped, ``budget`` only with B a round; ``failed_nodes`` (node ids) becomes the
    MetricRecord's ``clients_failed``, a count, beside ``step_scale`` (ρ)."""
    out: dict[str, int | float] = {}
    for key, value in row.items():
        if key == "server_round" or isinstance(value, bool):
            continue
        if isinstance(value, int | np.integer):
            out[key] = int(value)
        elif isinstance(value, float | np.floating):
            out[key] = float(value)
    return out


#: The default every-round rule's noise model (its ``noise_order``).
DEFAULT_NOISE_ORDER = 2


#: What ends a run before its rounds: a budget of privacy or of cost is spent.
STOPS = (RunStopped,)


def default_rule(population: int, spend: Any, *, release_noise: Any = None,
                 discount: float = 0.9, per_cost: bool = False) -> Selector:  # fmt: skip
    r"""The every-round rule :class:`EEGradStrategy` builds when given none, for K =
    ``population`` nodes and the arms' per-client spends ``spend``, shape (N,).

    Without privacy, :class:`~eegrad.ProgressThompson` (``noise_order=2``): n chosen for the
    expected decrease of its round, from the spread (the noise) and the round mean's squared
    norm and persistence (the signal and the curvature), so that clients whose larger shares
    buy more local steps are valued for how far they go; told the rounds the run has left (of
    the ``num_rounds`` it is started with), it charges a round's noise what of it reaches the
    run's end (:class:`~eegrad.ProgressThompson`'s notes, *The run's end*). With a private release
    (``release_noise``, the known variance :math:`d(z_nC/n)^2` it adds to arm n's mean),
    :class:`~eegrad.SpreadThompson` (``noise_order=2``) told it: the release's noise buries
    the signal there, and the least noise is the rule's aim. ``per_cost`` (a
    total budget, whose rounds cost more with more clients): :class:`~eegrad.BudgetThompson`
    (the largest decrease of the excess loss per unit of cost;
    the run's last round asks the most clients the budget left affords), the release's noise
    told where there is one.
    """
    if per_cost:  # a total budget: the decrease per unit of cost, the release's noise known
        return BudgetThompson(population=population, spend=spend, discount=discount,
                              noise_order=DEFAULT_NOISE_ORDER, release_noise=release_noise)
    extra = {} if release_noise is None else {"release_noise": release_noise}
    return _default_rule_class(release_noise is not None)(
        population=population, spend=spend, noise_order=DEFAULT_NOISE_ORDER, discount=discount,
        **extra)  # fmt: skip


def _default_rule_class(private: bool) -> type[SpreadThompson]:
    """The class of the default every-round rule, with or without a private release."""
    return SpreadThompson if private else ProgressThompson


def default_rule_name(private: bool, per_cost: bool = False) -> str:
    """How a checkpoint's fingerprint names the default every-round rule (a run saved under
    an earlier default is refused by name, not resumed with another rule)."""
    if per_cost:
        return (f"default (BudgetThompson, noise_order={DEFAULT_NOISE_ORDER}, "
                "local-steps curve, last round the most clients affordable)")  # fmt: skip
    cls = _default_rule_class(private)
    curve = (", local-steps curve, curvature over sqrt(rounds left), shrunk by its evidence "
             "where the steps are equal" if cls is ProgressThompson else "")  # fmt: skip
    return f"default ({cls.__name__}, noise_order={DEFAULT_NOISE_ORDER}{curve})"


#: Flower's logger, which ``flwr.supercore.log`` writes to.
_LOGGER = logging.getLogger("flwr")


def _log_final_results(result: Result, why: str) -> None:
    """Log why the run ended before its rounds (once) and its final results, as Flower's
    ``start`` closes a run."""
    log(INFO, "")
    log(INFO, "EE-Grad: %s", why)
    log(INFO, "")
    log(INFO, "Final results:")
    log(INFO, "")
    for line in io.StringIO(str(result)):
        log(INFO, "\t%s", line.strip("\n"))
    log(INFO, "")


class EEGradStrategy(Strategy):
    r"""EE-Grad as a Flower strategy: how many clients to ask, learnt under a real budget.

    Parameters
    ----------
    budget : float, optional
        B, the budget of one round (in the clients' cost units: virtual units, or seconds with
        :class:`~eegrad.flower.WallClock` and ``seconds_per_unit=1``), shared by the round's
        clients (the paper's model). Exclusive with ``total_budget``: give one.
    c_min : float, optional
        The least a client's participation can cost (the largest fixed overhead plus one
        sample), > 0: N = max{n : B > n c_min + D(n)} (Section 2), capped at the nodes
        connected. A budget that affords no arm raises the error of :meth:`eegrad.Arms.from_costs`.
        Required with ``budget``; with ``total_budget``, optional (>= 0, default 0): a
        client's cost before any has reported one.
    total_budget : float, optional
        The run's total budget (client-hours, energy, money, seconds): the clients are sent no
        share and train as they always do; a round of n costs its clients' reported costs
        (``round_cost``) plus D(n); n is chosen for the decrease of the loss per unit of cost,
        and the last round for the final model (the default rule:
        :class:`~eegrad.BudgetThompson`),
        among the n the budget left affords even if its
        clients cost as much as the costliest seen; the run ends before a round it cannot
        afford so (give a ``num_rounds`` large enough to spend the budget), and the records
        gain ``budget_left``. Until a client has reported a cost, a round asks one client (two
        under SecAgg+): no worst case is known before. A budget below one round of
        n = 1 (c_min + D(1)) is refused. ``steps`` must be ``"every-round"``.
    round_cost : {"sum", "slowest"}
        With ``total_budget``: a round costs the sum of its clients' costs (client-hours,
        energy, money) or the slowest client's (wall-clock time, clients in parallel: see
        :mod:`eegrad.flower.round_costs`), plus D(n). With ``"slowest"`` the cost metric is
        read as seconds: a node that sends no reply before Flower's round ``timeout`` cost the
        round that wait (``cost_scale`` × the timeout), and is expected to again.
    cost_metric, cost_scale : str or None, float
        With ``total_budget``: a client's cost is ``cost_scale`` times its reply's metric
        ``cost_metric`` (default ``"cost"``; e.g. ``"num-examples"`` with the cost of a
        sample; None: every reply costs ``cost_scale``, a client's training counting as one).
        A reply without it, or with a negative or non-finite cost, is an error naming the node
        and the round.
    aggregation : AggregationCost or callable, optional
        D(n), the server's cost of a round of n clients (default: none, D = 0). D(1) > 0 is a
        fixed per-round cost (e.g. broadcasting the model), spent whatever n is, e.g.
        ``LinearAggregation(b=0.5, fixed=10.0)``: the clients share B − D(n).
    selector : Selector, optional
        The rule. Default for ``steps="every-round"``: :func:`default_rule`, told the
        population K and the arms' spends — :class:`~eegrad.ProgressThompson`, which picks n
        for the expected decrease of its round (the spread gives the noise, the round mean's
        squared norm the signal, consecutive means the curvature, and the clients' reported
        ``local-steps`` metric, where every reply of a round has it, the prior of how the signal
        grows with the share; told before each round the rounds left of ``num_rounds``, and
        where those steps differ between the arms, it charges a round's noise what of it reaches
        the run's end), or with ``privacy``
        :class:`~eegrad.SpreadThompson` told the release's noise; both with ``noise_order=2``
        (a client's noise :math:`\tau^2/\omega + \kappa^2/\omega^2`, for clients that run
        several local steps on the samples their share buys). For ``steps="t-rounds"``:
        :func:`~eegrad.default_selector`. :class:`~eegrad.FixedArm` gives FedAvg with a fixed
        client count; :class:`~eegrad.EEGrad` (with numbers for β and P) the paper's rule, with
        the T-round structure.
    steps : {"every-round", "t-rounds"}
        Whether every round steps (the default) or the paper's T query rounds make one step.
    T : int, optional
        Rounds per step for ``steps="t-rounds"`` (>= the rule's minimum, 2N for index rules).
    server_lr : float
        η of the server's step, > 0 (1: FedAvg's aggregate for every-round).
    damp_exploration : bool or None
        With ``steps="every-round"``, scale the round's step by :math:`\rho_t \le 1`: for a
        rule with its own model of a step's worth (:class:`~eegrad.ProgressThompson`'s
        ``step_scale``), the scale of most expected decrease; for a rule that fits every arm's
        variance (:meth:`~eegrad.selectors.Selector.predicted` not None, as
        :class:`~eegrad.SpreadThompson`), :math:`\rho_t = \sqrt{\hat v^* / \hat v_{n_t}}`,
        where :math:`\hat v_n` is the rule's fitted variance of arm n's mean (after the round
        is told) and :math:`\hat v^*` the least over the arms, so that a round that explores a
        noisy arm costs a shorter step; ρ = 1 for a rule that fits no variances (e.g.
        :class:`~eegrad.FixedArm`, FedAvg). Each round's ρ is in its ``MetricRecord``
        (``step_scale``). None (default): damped with ``privacy`` (the release adds known noise
        that dominates the rounds of few clients), undamped otherwise, as FedAvg steps (the
        studies page measures what damping costs without privacy).
    rng : int or numpy.random.Generator
        Seed of the selector's stream and of the node sampling (independent children); part
        of the checkpoint's fingerprint, so a checkpoint of another seed is refused.
    min_available_nodes : int, optional
        Nodes to wait for before the run's first round (a resumed run's too), >= 1; None
        (default): the inner strategy's ``min_available_nodes`` (Flower's FedAvg: 2), else 1.
        The first round waits for at least 2 where the rule is the default (it learns from the
        spread of two or more clients). The rule is set up for K = the larger of the nodes
        connected then and this: a node that connects later is asked as any other, but a round
        asks at most K clients (the log says so once); later rounds ask among the nodes
        connected, so a node that dies never stalls the run; each record's
        ``nodes_connected`` says how many there were.
    fraction_evaluate : float
        Fraction of nodes asked to evaluate after each round, in [0, 1] (0: none).
    csv_path : str or Path, optional
        Where to write the per-round records after every round; evaluations (Flower's
        ``evaluate_fn`` on the server, and federated evaluation) go beside it, one line per
        metric, in ``<stem>-evaluation.csv`` (:mod:`eegrad.flower.evaluations`,
        :attr:`evaluation_path`).
        ``eegrad plot`` draws both.
    on_round : callable, optional
        Called after every training round with a :class:`~eegrad.flower.RoundReport` (the
        round's record and metrics, why the rule asked n, the rule's estimates of every n): the
        place to log a run to TensorBoard or Weights & Biases from your own code. It is called
        before the round is checkpointed, so that with ``checkpoint`` every round is reported
        at least once: a round a kill cut off before its checkpoint is run again on resume,
        and reported again.
    checkpoint : str or Path, optional
        A file (``.npz``) to which the strategy writes, after every round, everything needed to
        continue: the rule's and its driver's state, the random streams, the records, the
        round number and the round's model (:mod:`eegrad.checkpoint`; each write replaces the
        last atomically). If the file exists when :meth:`start` is called, the run resumes
        from the round after the saved one, with the saved model, and ends as an uninterrupted
        run would; a checkpoint of another configuration (budget, D, steps, T, rule, the
        model's arrays) is refused with a :class:`~eegrad.checkpoint.CheckpointError` naming
        what differs.
    privacy : CentralDP, optional
        Central differential privacy calibrated to every round's own n
        (:mod:`eegrad.flower.privacy`): updates clipped, averaged with equal weights, Gaussian
        noise of SD zC/n on the mean (:math:`z_n C/n` with ``CentralDP("auto", ...)``, which
        makes every n cost the same privacy per round), one ``GaussianPrivacyEvent(zC/Δ, n, K)``
        per round in Flower's RDP accountant (Δ = 2rC ≈ 1.82 C, the release's replace-one
        sensitivity: :attr:`~eegrad.flower.CentralDP.sensitivity`); the records gain ``noise_std`` and ``epsilon``, and a round
        that would take ε past ``max_epsilon`` is not run (the run ends there).
    secure_sums : bool
        Read only sums of the replies, as secure aggregation would reveal them: the clients
        (wrapped with :func:`~eegrad.flower.with_spread_sums`) reply ω·u, ω, ω² and ω‖u‖²; the
        server adds them up first and uses nothing but the sums
        (:class:`eegrad.spread.SpreadSums`) — the weighted mean for the step, and the weighted
        spread for a rule that learns from parts. A non-finite reply is then seen only in the
        sum, so the error names the round, not the node. Under Flower's SecAgg+ workflow, run
        the strategy with :func:`~eegrad.flower.start_secaggplus`.
    strategy : flwr.serverapp.strategy.Strategy, optional
        The user's own Flower strategy (message API), kept for what it does: FedAvg, FedAvgM,
        FedProx, FedAdam, FedYogi, FedAdagrad (given one synthetic reply, the round's mean:
        server memory O(d), and it takes a private release or secure sums), FedMedian,
        FedTrimmedAvg (given every reply). eegrad chooses n, the nodes and the shares; the inner
        strategy configures the messages for exactly those nodes (its ``fraction_train`` and
        minimum node counts are not used; FedProx's ``proximal-mu`` reaches the clients),
        aggregates and steps with its own rule (``server_lr`` must be 1), is given Flower's
        round number (the run's, a resumed run's included), evaluates (``fraction_evaluate``
        must be 0 here: set it on the inner strategy), and its state (FedAdam's moments,
        FedAvgM's momentum) goes into the checkpoint. Strategies whose aggregate is not a mean of
        the updates are refused (:mod:`eegrad.flower.inner` says which and why). None
        (default): the built-in step, ``server_lr`` times FedAvg's aggregate.
    weighted_by_key, arrayrecord_key, configrecord_key : str, optional
        Where a reply's weight (the samples used), the arrays and the config are kept
        (Flower's keys; None: the inner strategy's, else ``"num-examples"``, ``"arrays"``,
        ``"config"``). A key that differs from the inner strategy's is refused.
    """

    def __init__(
        self,
        budget: float | None = None,
        c_min: float | None = None,
        *,
        total_budget: float | None = None,
        round_cost: str = "sum",
        cost_metric: str = "cost",
        cost_scale: float = 1.0,
        aggregation: AggregationCost | Any = None,
        selector: Selector | None = None,
        steps: str = "every-round",
        T: int | None = None,
        server_lr: float = 1.0,
        damp_exploration: bool | None = None,
        rng: Any = 0,
        min_available_nodes: int | None = None,
        fraction_evaluate: float = 0.0,
        csv_path: str | Path | None = None,
        checkpoint: str | Path | None = None,
        privacy: CentralDP | None = None,
        secure_sums: bool = False,
        strategy: Strategy | None = None,
        weighted_by_key: str | None = None,
        arrayrecord_key: str | None = None,
        configrecord_key: str | None = None,
        on_round: Callable[[RoundReport], Any] | None = None,
    ) -> None:
        owner = "EEGradStrategy"
        aggregation = LinearAggregation(b=0.0) if aggregation is None else as_aggregation(
            aggregation, owner)  # fmt: skip
        self.aggregation = aggregation
        if cost_metric is None and total_budget is None:
            raise fail("cost_metric", owner, "a metric's name with a per-round budget (the "
                       "clients report what they spent of their share)", None)  # fmt: skip
        self.cost_metric = None if cost_metric is None else check_metric_key(
            cost_metric, "cost_metric", owner)  # fmt: skip
        self.cost_scale = check_real(cost_scale, "cost_scale", owner, gt=0)
        #: The run's budget, a part that owns its accounting: B per round
        #: (:class:`~eegrad.flower.budgets.RoundBudget`) or the run's total
        #: (:class:`~eegrad.flower.budgets.TotalBudget`).
        self.budgeting = make_budget(budget, total_budget, c_min, aggregation,
                                     round_cost=round_cost, cost_metric=self.cost_metric,
                                     cost_scale=self.cost_scale, owner=owner)  # fmt: skip
        #: B per round (None with a total budget) and the run's total (None with B per round).
        self.budget = self.budgeting.budget
        total_mode = self.budget is None  # a total budget (the run's), not B a round
        self.c_min = self.budgeting.c_min
        #: N of the budget before the nodes are known (None with a total budget: every node).
        self.max_arms = self.budgeting.max_arms
        self.round_cost = round_cost
        #: When the run steps, a part: every round, or every T rounds (the paper's
        #: Algorithm 1; :mod:`eegrad.flower.schedules`).
        self.schedule = make_schedule(steps, T, owner)
        self.schedule.check(owner, total_budget=True if total_mode else None)
        self.steps, self.T = self.schedule.name, self.schedule.T
        if selector is not None and not isinstance(selector, Selector):
            raise InvalidParameterTypeError(
                f"The 'selector' parameter of {owner} must be a Selector. Got {selector!r} instead."
            )
        if selector is not None:
            check_outlook(self.budgeting, selector, owner)
        self._given_selector = selector  # as the user gave it: nothing is written into it
        self.server_lr = check_real(server_lr, "server_lr", owner, gt=0)
        #: What the server sees of a round's replies, a part that owns what it keeps: each
        #: reply, their sums or a private release (:mod:`eegrad.flower.releases`).
        self.release = make_release(privacy, bool(secure_sums), owner)
        if privacy is not None:
            self.budgeting.check_private(owner)
        self.privacy, self.secure_sums = privacy, bool(secure_sums)
        if damp_exploration is None:  # damped where the release adds known noise
            damp_exploration = self.release.adds_noise
        if not isinstance(damp_exploration, bool | np.bool_):
            raise InvalidParameterTypeError(
                f"The 'damp_exploration' parameter of {owner} must be a bool or None. Got "
                f"{damp_exploration!r} instead."
            )
        self.damp_exploration = bool(damp_exploration)
        if min_available_nodes is None:  # the wrapped strategy's, as its own start would wait
            min_available_nodes = getattr(strategy, "min_available_nodes", None) or 1
        self.min_available_nodes = check_integer(min_available_nodes, "min_available_nodes",
                                                 owner, ge=1)  # fmt: skip
        self.fraction_evaluate = check_real(fraction_evaluate, "fraction_evaluate", owner,
                                            ge=0, le=1)  # fmt: skip
        #: What the run keeps beyond the server's memory, a part: its records' CSV, the
        #: evaluations beside them, its checkpoint (:mod:`eegrad.flower.keeping`).
        self.keeping = RunKeeping(csv_path, checkpoint, owner)
        self.on_round = check_callback(on_round, owner)
        #: The user's inner strategy, or None (the built-in step).
        self.strategy = strategy
        if strategy is not None:
            inner_kind(strategy)  # a type that is no message-API strategy, refused first
        keys = {}
        for name, given, default in (("weighted_by_key", weighted_by_key, "num-examples"),
                                     ("arrayrecord_key", arrayrecord_key, "arrays"),
                                     ("configrecord_key", configrecord_key, "config")):  # fmt: skip
            theirs = getattr(strategy, name, None)
            if given is not None and theirs is not None and given != theirs:
                raise fail(name, owner, f"the inner strategy's {theirs!r} (or None, to take it)",
                           given)  # fmt: skip
            keys[name] = check_metric_key(given or theirs or default, name, owner)
        self.weighted_by_key = keys["weighted_by_key"]
        self.arrayrecord_key = keys["arrayrecord_key"]
        self.configrecord_key = keys["configrecord_key"]
        #: Who configures a round's messages and makes its step, a part: the built-in step or
        #: the user's strategy inside (:mod:`eegrad.flower.aggregators`).
        self.aggregator = make_aggregator(strategy, server_lr=self.server_lr,
                                          fraction_evaluate=self.fraction_evaluate, keys=keys,
                                          checkpoint=self.checkpoint is not None)  # fmt: skip
        if strategy is not None:
            self.aggregator.check(owner, steps=self.steps, server_lr=self.server_lr,
                                  fraction_evaluate=self.fraction_evaluate,
                                  reveals_replies=self.release.reveals_replies,
                                  release_mode=self.release.mode,
                                  damped=self.damp_exploration)  # fmt: skip
        #: The records' columns (with ``noise_std`` and ``epsilon`` under ``privacy``).
        self.columns = RECORD_COLUMNS + self.release.columns + self.budgeting.columns
        self._base_columns = self.columns  # a run's driver may add its own (begin_run)
        # The first three children are those of spawn(2) and spawn(3): adding a stream changes
        # nothing else. Evaluation samples from its own, so turning it on changes no training.
        self._initial_streams = Streams(*as_generator(rng, owner).spawn(4))
        #: What a checkpoint must share with this run to continue it (the constructor's
        #: arguments; the model's arrays are added when it is saved).
        self.fingerprint = self._fingerprint()
        self._fresh_run()

    def _fingerprint(self) -> dict[str, Any]:
        """The fingerprint of the constructor's arguments (:attr:`fingerprint`)."""
        sel = self._given_selector
        default = self.schedule.default_rule_name(
            default_rule_name(self.privacy is not None, self.budget is None))
        out = {**self.budgeting.fingerprint(), "steps": self.steps, "T": self.T,
               "round_cost": self.round_cost,
               "cost_metric": self.cost_metric, "cost_scale": self.cost_scale,
               "rng": self._initial_streams.fingerprint(),
               "server_lr": self.server_lr, "damp_exploration": self.damp_exploration,
               "fraction_evaluate": self.fraction_evaluate,
               "weighted_by_key": self.weighted_by_key,
               "rule": default if sel is None else type(sel).__name__,
               "rule parameters": None if sel is None else repr(sel.get_params()),
               **self.release.fingerprint(), **self.aggregator.fingerprint()}  # fmt: skip
        return out

    def _fresh_run(self) -> None:
        """A fresh run (:class:`~eegrad.flower.state.RunState`): no records, no cost, no rule
        set up, the random streams at their start, the inner strategy's state as given (a
        second :meth:`start` is a new run, not more of the last one)."""
        #: The run's state (:class:`~eegrad.flower.state.RunState`).
        self.state = RunState(streams=self._initial_streams.copy())
        self.aggregator.reset()
        self._offset = 0  # rounds done before a resumed start
        self._num_rounds: int | None = None  # the run's last server round (begin_run)
        self._min_clients = 1  # the least n a round can run (2 under SecAgg+: begin_run)
        self._round: dict[str, Any] | None = None
        self._first_round = True  # the run's first round (a resumed run's) waits for nodes
        self._fewer = False  # fewer nodes than min_available_nodes said once
        self._spent: BudgetSpent | None = None  # the next round unaffordable (finish_round)
        self._evaluates = False  # start() was given an evaluate_fn
        self._more = False  # more nodes than the rule's K said once
        self._nodes_connected: int | None = None  # at the pending round's configure_train
        self._timeout: float | None = None  # Flower's round timeout, in seconds (start)
        self._latest: ArrayRecord | None = None  # the model the next round starts from
        self._evaluated: dict[int, MetricRecord] = {}  # federated evaluation, by round
        #: Why the last :meth:`start` ended early (the privacy budget), or None.
        self.stopped: str | None = None
        self.keeping.fresh()  # the run's evaluations' table empty

    # -- the run's state, read -----------------------------------------------------------------
    @property
    def total_budget(self) -> float | None:
        """The run's total budget (None with B a round, and, where it is your FedAvg's spend,
        until the run's first round has settled it)."""
        return self.budgeting.total

    @property
    def records(self) -> list[dict[str, Any]]:
        """One dict per server round (see :data:`RECORD_COLUMNS`)."""
        return self.state.records

    @property
    def driver(self) -> RuleDriver | None:
        """The rule's driver (:class:`~eegrad.flower.driver.RuleDriver`), once the first round
        has set it up."""
        return self.state.rule

    @property
    def selector(self) -> Selector | None:
        """The rule at work (the given one, its private copy or the default) once set up; the
        given one (or None) before."""
        rule = self.state.rule
        return self._given_selector if rule is None else rule.selector

    @property
    def N(self) -> int | None:
        """N, the arms: min(the budget's, the nodes connected), once set up."""
        rule = self.state.rule
        return None if rule is None else rule.N

    @property
    def csv_path(self) -> Path | None:
        """Where the records are written (``csv_path``), or None."""
        return self.keeping.csv_path

    @property
    def checkpoint(self) -> Path | None:
        """Where the run is checkpointed (``checkpoint``), or None."""
        return self.keeping.checkpoint

    @property
    def evaluation_path(self) -> Path | None:
        """Where the evaluations are written: ``<stem>-evaluation.csv`` beside ``csv_path``."""
        return self.keeping.evaluation_path

    @property
    def evaluations(self) -> list[dict[str, Any]]:
        """The run's evaluations, one dict a metric (:data:`EVALUATION_COLUMNS`)."""
        return self.keeping.evaluations.rows

    # -- set-up ------------------------------------------------------------------------------------
    def spend(self, N: int) -> np.ndarray:
        """The per-client spend (B − D(n))/n of the arms n = 1..N (with a total budget, the
        same for every n: the clients train their own way)."""
        return self.budgeting.spend(N)

    def _setup(self, num_nodes: int, dim: int) -> None:
        """Build the rule, its driver and the private release for K nodes and a model of
        size d (at the first round, or on resume for the saved K and d)."""
        state = self.state
        state.num_nodes, state.dim = int(num_nodes), int(dim)
        self.budgeting.resolve(self._num_rounds, state.num_nodes)
        N = self.budgeting.arms(state.num_nodes)
        if self.max_arms is not None and state.num_nodes < self.max_arms:
            log(WARNING, "EE-Grad: %d nodes are connected, so a round asks 1 to %d clients, where "
                "the budget affords up to N = %d: connect more nodes to let the rule choose "
                "among them (in Flower's local simulation: flwr federation simulation-config "
                "@none/default local --num-supernodes N)",
                state.num_nodes, state.num_nodes, self.max_arms)  # fmt: skip
        # the run's own copy: nothing is written into the rule the user gave
        sel = copy.deepcopy(self._given_selector)
        # A private release adds d (z_n C/n)² to arm n's variance, known exactly.
        noise = self.release.setup(state, N)
        if noise is not None and isinstance(sel, SpreadThompson) and sel.release_noise is None:
            sel = type(sel)(**{**sel.get_params(), "release_noise": noise})
        if sel is None:
            sel = self.schedule.default_rule(lambda: default_rule(
                state.num_nodes, self.spend(N), release_noise=noise,
                per_cost=self.budget is None))  # fmt: skip
        least = sel.min_rounds(N)
        if self.T < least:  # an index rule's T below 2N: its first pulls alone, round-robin
            fix = "steps='t-rounds' and T" if self.T == 1 else "T"
            raise fail("T", "EEGradStrategy", f">= {least}, the rounds {type(sel).__name__} "
                       f"needs for a step with N = {N} arms (give {fix} >= {least})", self.T)
        state.rule = RuleDriver(sel, N, T=self.T, dim=state.dim, rng=state.streams.selector)

    def summary(self) -> None:
        """Log the strategy's settings (budget, c_min, D, steps, rule, inner strategy) at the
        start (Strategy API)."""
        self.budgeting.summary()
        log(INFO, "\t├──> Steps: %s (T = %d), server lr %g, exploration damped: %s", self.steps,
            self.T, self.server_lr, self.damp_exploration)  # fmt: skip
        log(INFO, "\t├──> Selector: %r",
            self.selector or "default")  # fmt: skip
        self.aggregator.summary()

    # -- train -------------------------------------------------------------------------------------
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Ask the selector for n, sample n nodes and send each the model and its share (B −
        D(n))/n of the round's budget (Strategy API); with an inner strategy, its messages for
        exactly those nodes.
        """
        refuse_fixed_n_wrappers(self)
        server_round += self._offset
        nodes = self._connected_nodes(grid, server_round)
        keys = list(arrays.keys())
        model = [array_view(arrays[k]) for k in keys]  # the model's arrays, in their dtypes
        state = self.state
        if state.rule is None:  # K: the nodes connected, or the more the run waited for
            self._setup(max(len(nodes), self.min_available_nodes), sum(a.size for a in model))
        elif self._first_round and len(nodes) != state.num_nodes:
            log(WARNING, "EE-Grad: %d nodes are connected where the resumed run had K = %d; "
                "the rule keeps its %d arms and each round asks among the nodes connected",
                len(nodes), state.num_nodes, state.rule.N)  # fmt: skip
        self._first_round = False
        if len(nodes) > state.num_nodes and not self._more:
            log(WARNING, "EE-Grad: server round %d: %d nodes connected, more than the K = %d "
                "the rule was set up for at the run's start; each may be asked, a round at most "
                "%d of them (start with min_available_nodes=%d for the rule to plan for them "
                "all)", server_round, len(nodes), state.num_nodes, state.rule.N,
                len(nodes))  # fmt: skip
            self._more = True
        least = min(self._min_clients, state.rule.N, len(nodes))
        most = self.budgeting.at_most(state, state.rule.N, least, server_round)
        most = min(state.rule.N if most is None else most, len(nodes))
        n = state.rule.ask(least, most, self.budgeting.outlook(state, server_round, self._num_rounds))
        self.release.charge(state, server_round, n, len(nodes))
        pick = state.streams.sampling.choice(len(nodes), size=min(n, len(nodes)), replace=False)
        chosen = [nodes[i] for i in sorted(pick)]
        cfg = ConfigRecord(dict(config))
        cfg["server-round"] = server_round
        share = self.budgeting.share(n)
        if share is not None:  # with a total budget the clients are sent no share
            cfg[SHARE_KEY] = share
        cfg["eegrad-n"] = n
        self.release.configure(cfg)
        self._round = {"server_round": server_round, "n": n, "nodes": chosen, "model": model,
                       "keys": keys,
                       "timeout": self.budgeting.round_timeout(state, n, self._timeout)}  # fmt: skip
        # the rule's reason costs a fit: asked only where the line is written or a callback reads it
        why = (state.rule.selector.explain() if _LOGGER.isEnabledFor(INFO)
               or self.on_round is not None else None)  # fmt: skip
        self._round["why"] = why
        log(INFO, "EE-Grad: server round %d asks n = %d of %d nodes connected (%s)%s",
            server_round, n, len(nodes), self.budgeting.describe(state, n),
            "" if why is None else f"; {why}")  # fmt: skip
        return self.aggregator.train_messages(server_round, arrays, cfg, grid, chosen)

    def _connected_nodes(self, grid: Grid, server_round: int) -> list[int]:
        """The nodes connected now, sorted. Before the run's first round (a resumed run's
        included) it waits for ``min_available_nodes``; later rounds ask among the nodes
        connected, so that a node that died never stalls the run: a round with fewer says so
        in the log once, and its record's ``nodes_connected``. At least the fewest clients a
        round can run (1, or 2 under SecAgg+) are waited for."""
        wait_for = (max(self.min_available_nodes, self._rule_needs()) if self._first_round
                    else self._min_clients)  # fmt: skip
        waited = 0.0
        while len(nodes := sorted(int(i) for i in grid.get_node_ids())) < wait_for:
            if waited % 10.0 == 0.0:  # every 10 s, not every poll
                log(INFO, "Waiting for nodes: %d of %d connected", len(nodes), wait_for)
            time.sleep(1.0)
            waited += 1.0
        if not self._first_round and len(nodes) < self.min_available_nodes and not self._fewer:
            log(WARNING, "EE-Grad: server round %d: %d nodes connected, fewer than "
                "min_available_nodes = %d; the rounds go on among the nodes connected (a round "
                "asks at most that many; each record's nodes_connected says how many)",
                server_round, len(nodes), self.min_available_nodes)  # fmt: skip
            self._fewer = True
        self._nodes_connected = len(nodes)
        return nodes

    def _next_unaffordable(self, server_round: int) -> BudgetSpent | None:
        """After a round is charged: why the budget left cannot afford the next round (the
        run then ends after this round's evaluation, with no header of a round that never
        runs), or None (the next can run, or this was the run's last)."""
        rule = self.state.rule
        if rule is None or (self._num_rounds is not None and server_round >= self._num_rounds):
            return None
        least = min(self._min_clients, rule.N)
        try:
            self.budgeting.at_most(self.state, rule.N, least, server_round + 1)
        except BudgetSpent as stop:
            return stop
        return None

    def _round_timeout(self, timeout: float | None) -> float | None:
        """The pending round's wait for its replies (its budget's cap on Flower's ``timeout``:
        :meth:`~eegrad.flower.budgets.TotalBudget.round_timeout`)."""
        rnd = self._round
        return timeout if rnd is None else rnd.get("timeout", timeout)

    def _rule_needs(self) -> int:
        """The nodes the rule needs at the run's first round: 2 for the default (it learns from
        the spread of two or more clients; a given rule is the user's), or the fewest a round
        can run (2 under SecAgg+)."""
        return max(self._min_clients, 2 if self._given_selector is None else 1)

    def _new_fold(self) -> RoundFold:
        """The round's reply path: plain, sums only or private (:mod:`eegrad.flower.replies`)."""
        rnd = self._round
        args = (rnd["server_round"], rnd["keys"], rnd["model"])
        keys = {"arrayrecord_key": self.arrayrecord_key, "weighted_by_key": self.weighted_by_key,
                "cost": {"cost_metric": self.cost_metric, "cost_scale": self.cost_scale,
                         "cost_required": self.budgeting.cost_required}}  # fmt: skip
        return self.release.fold(self.state, args, rnd["n"], keys)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Fold the replies one at a time (checked for shape and finiteness; failures dropped
        and recorded), tell the rule the round, step (every round, or after T rounds) or have
        the inner strategy aggregate, and record the round (Strategy API).
        """
        server_round += self._offset
        rnd = self._round
        if rnd is None or rnd["server_round"] != server_round:
            raise InvalidParameterError(
                f"aggregate_train(server_round={server_round}) without configure_train for it."
            )
        asked = set(rnd["nodes"])
        fold = self._new_fold()
        kept: list[Message] = []  # the replies, for an inner strategy that needs every one
        failed, answered = [], set()
        try:
            for m in replies:  # each folded into running sums and dropped: O(d), FedAvg's cost
                node = m.metadata.src_node_id
                answered.add(node)
                if m.has_error():
                    failed.append(node)
                    log(INFO, "node %d failed at round %d: %s", node, server_round,
                        m.error.reason)  # fmt: skip
                elif node in asked:
                    fold.add(m)
                    if self.aggregator.keeps_replies:
                        kept.append(m)
                del m  # before the next reply is pulled: one reply in memory at a time
        except Exception:  # a reply that cannot be used ends the run; nothing is left pending
            self.state.rule.withdraw()
            self._round = None
            raise
        timed_out = [nid for nid in rnd["nodes"] if nid not in answered]
        return self.finish_round(fold, failed + timed_out, kept=kept, timed_out=timed_out)

    # -- a round driven by another loop (Flower's legacy SecAgg+ workflow) -------------------
    @property
    def pending_round(self) -> dict[str, Any] | None:
        """The round :meth:`configure_train` set up and no reply has finished: its
        ``server_round``, ``n``, ``nodes``, the model's ``keys`` and arrays (``model``); None
        when there is none."""
        return self._round

    def finish_round(self, fold: RoundFold, failed: list[int], *, kept: Sequence[Message] = (),
                     extra: dict[str, Any] | None = None, timed_out: Sequence[int] = (),
                     ) -> tuple[ArrayRecord | None, MetricRecord]:  # fmt: skip
        """Finish the pending round from its replies' ``fold`` (:mod:`eegrad.flower.replies`):
        tell the rule (or withdraw a round with none), step or have the inner strategy
        aggregate (``kept``: the replies, for one that needs every reply), record (``failed``
        nodes, of which ``timed_out`` sent no reply before the round's timeout; ``extra``: more
        fields of the row) and save."""
        rnd, state = self._round, self.state
        server_round, n = rnd["server_round"], rnd["n"]
        rule = state.rule
        replied = fold.replied
        try:
            self.budgeting.check_replies(fold, server_round)
        except ClientUpdateError:
            rule.withdraw()
            self._round = None
            raise
        used = self.budgeting.spent(state, fold, n, timed_out, rnd.get("timeout", self._timeout))
        if replied:  # the round's one record: its mean, the parts' spread, their local steps
            rule.tell(*fold.evidence(rule.selector.reads), local_steps=fold.local_steps())
        else:
            rule.withdraw()
        new_arrays, inner_metrics = None, fold.client_metrics() if replied else {}
        step, scale = 0, 1.0
        if replied and rule.done:
            scale = self._step_scale(n)
            G = self._as_arrays(rule.result())
            new_arrays, inner_metrics = self.aggregator.aggregate(server_round, rnd, G, scale,
                                                                  fold, kept)  # fmt: skip
            rule.next_iterate()
            state.steps_taken += 1
            step = 1
        del fold, kept  # nothing of the round is kept past its use
        state.cost += self.budgeting.charge(used)
        self._spent = self._next_unaffordable(server_round)
        row = {"server_round": server_round, "step": state.steps_taken if step else "",
               "arm": n, "clients_asked": len(rnd["nodes"]), "clients_replied": replied,
               "failed_nodes": " ".join(str(f) for f in sorted(failed)),
               **self.budgeting.record(state), "budget_used": used, "cost": state.cost,
               "nodes_connected": self._nodes_connected}  # fmt: skip
        row.update(self.release.record(state, n, replied))
        row.update(extra or {})
        state.records.append(row)
        # the clients' (or the inner strategy's) metrics, then eegrad's, named as the record's
        metrics = {**(inner_metrics or {}), **record_metrics(row), "clients_failed": len(failed),
                   "step_scale": scale}  # fmt: skip
        state.metrics[server_round] = metrics
        state.server_round = server_round
        if self.on_round is not None:  # before the round is saved: a round whose report a
            # kill cut off is run again on resume, and reported again (at least once)
            self.on_round(RoundReport(server_round=server_round, record=dict(row),
                                      metrics=dict(metrics), explanation=rnd.get("why"),
                                      estimates=rule.selector.estimates()))  # fmt: skip
        self.keeping.after_round(state, self.columns, self.fingerprint,
                                 lambda: self._snapshot(new_arrays))  # fmt: skip
        if new_arrays is not None:
            self._latest = new_arrays
        self._round = None
        return new_arrays, MetricRecord(metrics)

    def _snapshot(self, new_arrays: ArrayRecord | None) -> dict[str, np.ndarray]:
        """For the checkpoint after the round: the inner strategy's state into the run's, and
        the round's model (its step's, or the round's own where it made none)."""
        self.state.inner = self.aggregator.state()
        if new_arrays is not None:
            return {k: array_view(new_arrays[k]) for k in new_arrays}
        rnd = self._round
        return dict(zip(rnd["keys"], rnd["model"], strict=True))

    def _resume(self, initial_arrays: ArrayRecord) -> ArrayRecord:
        """Load the checkpoint into a fresh state; returns the model to continue from."""
        model = self.keeping.resume(self.state, self.fingerprint,
                                    {k: array_view(initial_arrays[k]) for k in initial_arrays},
                                    self._setup, self.columns)  # fmt: skip
        self.aggregator.load_state(self.state.inner)
        return ArrayRecord({k: Array(np.ascontiguousarray(a)) for k, a in model.items()})

    def _step_scale(self, n: int) -> float:
        """ρ of ``damp_exploration`` for a round of arm n: the rule's
        :meth:`~eegrad.selectors.Selector.step_scale` (1 when off, with t-rounds, or for a rule
        with no view of it)."""
        if not (self.damp_exploration and self.schedule.damps):
            return 1.0
        rho = self.selector.step_scale(np.array([n - 1]))
        return 1.0 if rho is None else float(rho[0])

    def _as_arrays(self, G: Any) -> list[Any]:
        """The estimate G in the model's arrays (the pull's mean already is with T = 1; the
        driver's flat float64 mean of T rounds is split)."""
        if isinstance(G, list):
            return G
        sizes = np.cumsum([a.size for a in self._round["model"]])[:-1]
        return np.split(np.asarray(G), sizes)

    def lose_pending_round(self, extra: dict[str, Any] | None = None) -> None:
        """Finish the pending round, if any, as one no reply reached (a protocol halted): the
        rule's pull withdrawn, no step, every asked node failed in its record."""
        if self._round is not None:
            self.finish_round(self._new_fold(), list(self._round["nodes"]), extra=extra)

    def begin_run(self, initial_arrays: ArrayRecord, num_rounds: int, *, min_clients: int = 1,
                  columns: tuple[str, ...] = (),
                  timeout: float | None = None) -> ArrayRecord:  # fmt: skip
        """A fresh run, or the checkpoint's resumed (:attr:`rounds_done` rounds done); returns
        the model to start from. ``min_clients``: the least n a round can run (2 under SecAgg+);
        ``columns``: record columns the run's driver adds; ``timeout``: how long a round waits
        for its replies, in seconds (None: no limit)."""
        check_integer(num_rounds, "num_rounds", "EEGradStrategy.start", ge=1)
        if timeout is not None:
            check_real(timeout, "timeout", "EEGradStrategy.start", gt=0)
        self._fresh_run()
        self._timeout = None if timeout is None else float(timeout)
        self.keeping.check_writable()
        self._min_clients = min_clients
        self.columns = self._base_columns + tuple(c for c in columns
                                                  if c not in self._base_columns)  # fmt: skip
        arrays = initial_arrays
        self._num_rounds = int(num_rounds)  # before a resume sets the rule up for its rounds
        if self.keeping.resumes:
            arrays = self._resume(initial_arrays)
            log(INFO, "EE-Grad: resumed from checkpoint %s after server round %d; continuing "
                "at round %d of %d", self.checkpoint, self.state.server_round,
                self.state.server_round + 1, num_rounds)  # fmt: skip
        self._offset = self.state.server_round
        self._num_rounds = int(num_rounds)
        self._latest = arrays
        return arrays

    @property
    def round_timeout_s(self) -> float | None:
        """How long a round of the run waits for its replies, in seconds (None: no limit)."""
        return self._timeout

    @property
    def rounds_done(self) -> int:
        """The rounds a run had done when it began (a resumed run's; 0 for a fresh one)."""
        return self._offset

    def end_run(self) -> None:
        """End the run :meth:`begin_run` began: server rounds count from 1 again."""
        self._offset = 0
        self._num_rounds = None

    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Any = None) -> Result:  # fmt: skip
        """Run ``num_rounds`` rounds (Flower's ``Strategy.start``); with a ``checkpoint`` that
        exists, continue the saved run from the round after the saved one, with the saved
        model, to round ``num_rounds``. The result's metrics are indexed by server round.
        Every call begins a fresh run (records, cost, streams and the inner strategy's state as
        constructed) unless it resumes."""
        arrays = self.begin_run(initial_arrays, num_rounds, timeout=timeout)
        self._evaluates = evaluate_fn is not None
        offset = self.rounds_done
        seen: dict[str, dict[int, MetricRecord]] = {"evaluate_metrics_serverapp": {},
                                                   "evaluate_metrics_clientapp": {}}  # fmt: skip
        self._evaluated = seen["evaluate_metrics_clientapp"]
        if offset >= num_rounds:
            log(INFO, "EE-Grad: the checkpoint is at round %d >= num_rounds = %d: nothing to run",
                offset, num_rounds)  # fmt: skip
            result = Result()
            result.arrays = arrays
        else:
            def evaluate(rnd: int, arr: ArrayRecord) -> Any:
                if rnd == 0 and offset and self.keeping.evaluations.has(offset, "server"):
                    return None  # the checkpoint's model, evaluated by the run that saved it
                out = evaluate_fn(rnd + offset, arr)
                if out is not None:
                    seen["evaluate_metrics_serverapp"][rnd + offset] = out
                    self.keeping.evaluations.add(rnd + offset, self.state.cost, "server", out)
                if rnd > 0 and self._spent is not None:  # the round's model is evaluated: end
                    raise self._spent
                return out

            try:
                # The replies pulled one at a time and each folded as it comes: O(d) memory.
                result = super().start(PullingGrid(grid, round_timeout=self._round_timeout),
                                       arrays, num_rounds - offset, timeout,
                                       train_config, evaluate_config,
                                       None if evaluate_fn is None else evaluate)  # fmt: skip
            except STOPS as stop:
                result = Result()  # what the rounds run released, as Flower's start returns it
                result.arrays = self._latest
                for name, table in seen.items():
                    setattr(result, name, {rnd - offset: m for rnd, m in table.items()})
                self.stopped = ("the privacy budget is spent: " if isinstance(
                    stop, PrivacyBudgetExhausted) else "the budget is spent: ") + str(stop)
            except BaseException as exc:  # Ctrl-C, a failed round: say what is kept, and go
                self._log_interrupted(exc)
                raise
        for name in ("train_metrics_clientapp", "evaluate_metrics_clientapp",
                     "evaluate_metrics_serverapp"):  # fmt: skip
            table = getattr(result, name)
            setattr(result, name, {rnd + offset: m for rnd, m in table.items()})

        for rnd, m in self.state.metrics.items():  # the rounds before the resume, saved
            result.train_metrics_clientapp.setdefault(rnd, MetricRecord(m))
        if not len(result.arrays):  # every round run lost: the model the run had
            result.arrays = self._latest
        result.train_metrics_clientapp = dict(sorted(result.train_metrics_clientapp.items()))
        if self.stopped is not None:  # Flower's closing summary, which its loop never reached
            _log_final_results(result, self.stopped)
        else:
            self._say_budget_left()
        self.end_run()
        return result

    def _say_budget_left(self) -> None:
        """At a run's end by its rounds, with a total budget: what of it is left, and why."""
        total, records = self.budgeting.total, self.state.records
        if total is None or not records:
            return
        left = total - self.state.cost
        if left <= 1e-9 * total:
            return
        last = records[-1]
        why = ("its last round asked every node connected: the rounds could spend no more"
               if last["arm"] >= (last["nodes_connected"] or 0) else
               "no split of it over the rounds left lowered the final model's noise: the "
               "rule's plan kept it")  # fmt: skip
        log(INFO, "EE-Grad: the run's %d rounds are done with %.4g of the budget %g left (%s)",
            self.state.server_round, left, total, why)  # fmt: skip

    def _log_interrupted(self, exc: BaseException) -> None:
        """Log why a run stopped before its end and what it keeps (records, checkpoint)."""
        why = ("interrupted (KeyboardInterrupt)" if isinstance(exc, KeyboardInterrupt) else
               f"{type(exc).__name__}: {str(exc).rstrip('.')}")  # fmt: skip
        done = self.keeping.last_kept(self.state.server_round)
        log(ERROR, "EE-Grad: the run stopped after server round %d: %s; %s", done, why,
            self.keeping.kept(done))  # fmt: skip

    # -- evaluate ----------------------------------------------------------------------------------
    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Sample ``fraction_evaluate`` of the nodes for federated evaluation (Strategy API; none
        by default); with an inner strategy, its evaluation.
        """
        return self.aggregator.configure_evaluate(server_round + self._offset, arrays, config,
                                                  grid, self.state.streams.evaluate)  # fmt: skip

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        """The weighted mean of the evaluation replies' metrics (Strategy API); with an inner
        strategy, its aggregate."""
        server_round += self._offset
        out = self.aggregator.aggregate_evaluate(server_round, replies)
        if out is not None:
            self._evaluated[server_round] = out
            self.keeping.evaluations.add(server_round, self.state.cost, "clients", out)
        if self._spent is not None and not self._evaluates:  # no server evaluation to wait for
            raise self._spent
        return out
