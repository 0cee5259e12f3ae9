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

from collections.abc import Callable
from pathlib import Path
from typing import Any

from flwr.serverapp.strategy import Strategy

from ..costs import AggregationCost
from ..selectors import Selector
from ..selectors.anchored import DEFAULT_DEPARTURE
from .budgets import BudgetSpent
from .driver import RuleDriver
from .evaluations import EVALUATION_COLUMNS
from .factory import strategy_parts
from .privacy import CentralDP
from .replies import ClientUpdateError
from .round_loop import (
    DEFAULT_NOISE_ORDER,
    RECORD_COLUMNS,
    STOPS,
    RoundLoop,
    default_rule,
    default_rule_name,
    record_metrics,
)
from .round_report import RoundReport
from .state import PendingRound


def _setting(name: str, doc: str) -> property:
    """A read-only view of one of the strategy's settled keywords."""

    def read(self: EEGradStrategy) -> Any:
        return self.settings[name]

    read.__doc__ = doc
    return property(read)


__all__ = ["DEFAULT_NOISE_ORDER", "EVALUATION_COLUMNS", "RECORD_COLUMNS", "STOPS", "BudgetSpent",
           "ClientUpdateError", "EEGradStrategy", "default_rule", "default_rule_name",
           "record_metrics"]  # fmt: skip


class EEGradStrategy(RoundLoop):
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
        (``round_cost``) plus D(n); the budget is split over the rounds (the default rule:
        :class:`~eegrad.AnchoredPlan`, your strategy's n every round, left only as far as the
        evidence carries), among the n the budget left affords even if its clients cost as
        much as the costliest seen; the run ends before a round it cannot afford so, and the
        records gain ``budget_left``. Until a client has reported a cost, a round asks at most
        your strategy's own n (one client where it samples otherwise; two under SecAgg+): no
        worst case is known before. A budget below one round of n = 1 (c_min + D(1)) is
        refused. ``steps`` must be ``"every-round"``.
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
        population K and the arms' spends, anchored on your strategy's n each round
        (:mod:`eegrad.selectors.anchored`: ``departure``) — with a total budget
        :class:`~eegrad.AnchoredPlan`; with B a round :class:`~eegrad.AnchoredProgress`, which
        picks n for the expected decrease of its round within a factor of your n (the spread
        gives the noise, the round mean's squared norm the signal, consecutive means the
        curvature, and the clients' reported ``local-steps`` metric, where every reply of a
        round has it, the prior of how the signal grows with the share), or with ``privacy``
        :class:`~eegrad.SpreadThompson` told the release's noise; all with ``noise_order=2``
        (a client's noise :math:`\tau^2/\omega + \kappa^2/\omega^2`, for clients that run
        several local steps on the samples their share buys). For ``steps="t-rounds"``:
        :func:`~eegrad.default_selector`. :class:`~eegrad.FixedArm` gives FedAvg with a fixed
        client count; :class:`~eegrad.EEGrad` (with numbers for β and P) the paper's rule, with
        the T-round structure. Under ``privacy``, a rule given is told the release's variance of
        every arm, :math:`d(z_n C/n)^2`, by :meth:`~eegrad.Selector.with_release_noise` (a rule
        whose constructor takes ``release_noise`` and was given none is rebuilt with it).
    departure : float
        α in [0, 1], the default rule's one knob: how far a round may leave your strategy's n
        (its ``fraction_train`` of the nodes, at least its ``min_train_nodes``). No round asks
        fewer than ⌈(1 − α)·n⌉ clients (with B a round, none more than n/(1 − α)); 0 runs your
        schedule exactly, 1 leaves it as far as the rule's fits say. Default 0.5. Not used with
        a ``selector`` given.
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
        total_budget: Any = None,
        round_cost: str = "sum",
        cost_metric: str | None = "cost",
        cost_scale: float = 1.0,
        aggregation: AggregationCost | Any = None,
        selector: Selector | None = None,
        departure: float = DEFAULT_DEPARTURE,
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
        parts = strategy_parts(
            budget, c_min, total_budget=total_budget, round_cost=round_cost,
            cost_metric=cost_metric, cost_scale=cost_scale, aggregation=aggregation,
            selector=selector, departure=departure, steps=steps, T=T, server_lr=server_lr,
            damp_exploration=damp_exploration, rng=rng, min_available_nodes=min_available_nodes,
            fraction_evaluate=fraction_evaluate, csv_path=csv_path, checkpoint=checkpoint,
            privacy=privacy, secure_sums=secure_sums, strategy=strategy,
            weighted_by_key=weighted_by_key, arrayrecord_key=arrayrecord_key,
            configrecord_key=configrecord_key, on_round=on_round)  # fmt: skip
        #: The keywords as settled (the parts hold what they mean).
        self.settings = parts.settings
        super().__init__(**parts.loop_arguments())

    # -- the keywords as settled, read ---------------------------------------------------------------
    aggregation = _setting("aggregation", "D(n), the server's cost of a round of n clients.")
    cost_metric = _setting("cost_metric", "The reply's metric of a client's cost (or None).")
    cost_scale = _setting("cost_scale", "What one unit of ``cost_metric`` costs.")
    round_cost = _setting("round_cost", "How a round's cost is made of its clients'.")
    server_lr = _setting("server_lr", "η of the server's step.")
    privacy = _setting("privacy", "The run's central DP (or None).")
    secure_sums = _setting("secure_sums", "Whether only the replies' sums are read.")
    min_available_nodes = _setting("min_available_nodes", "Nodes the first round waits for.")
    fraction_evaluate = _setting("fraction_evaluate", "The share of nodes that evaluate.")
    strategy = _setting("strategy", "The user's inner strategy (or None: the built-in step).")

    @property
    def budget(self) -> float | None:
        """B per round (None with a total budget)."""
        return self.budgeting.budget

    @property
    def total_budget(self) -> float | None:
        """The run's total budget (None with B a round, and, where it is your FedAvg's spend,
        until the run's first round has settled it)."""
        return self.budgeting.total

    @property
    def c_min(self) -> float:
        """The least a client's participation costs."""
        return self.budgeting.c_min

    @property
    def max_arms(self) -> int | None:
        """N of the budget before the nodes are known (None with a total budget)."""
        return self.budgeting.max_arms

    @property
    def steps(self) -> str:
        """``"every-round"`` or ``"t-rounds"``."""
        return self.schedule.name

    @property
    def T(self) -> int:
        """Rounds per step."""
        return self.schedule.T

    @property
    def damp_exploration(self) -> bool:
        """Whether a round's step is scaled by the rule's step scale."""
        return self.options.damp_exploration

    @property
    def weighted_by_key(self) -> str:
        """Where a reply holds its weight."""
        return self.options.keys["weighted_by_key"]

    @property
    def arrayrecord_key(self) -> str:
        """Where a reply holds its arrays."""
        return self.options.keys["arrayrecord_key"]

    @property
    def configrecord_key(self) -> str:
        """Where a message holds its config."""
        return self.options.keys["configrecord_key"]

    @property
    def on_round(self) -> Callable[[RoundReport], Any] | None:
        """The per-round callback."""
        return self.options.on_round

    # -- the run's state, read ---------------------------------------------------------------------
    @property
    def records(self) -> list[dict[str, Any]]:
        """One dict per server round (see :data:`RECORD_COLUMNS`)."""
        return self.state.records

    @property
    def driver(self) -> RuleDriver | None:
        """The rule's driver, once the first round has set it up."""
        return self.state.rule

    @property
    def selector(self) -> Selector | None:
        """The rule at work (the run's copy of the given one, or the default) once set up; the
        given one (or None) before."""
        rule = self.state.rule
        return self.options.given_rule if rule is None else rule.selector

    @property
    def N(self) -> int | None:
        """N, the arms: min(the budget's, the nodes connected), once set up."""
        rule = self.state.rule
        return None if rule is None else rule.N

    @property
    def stopped(self) -> str | None:
        """Why the last :meth:`start` ended before its rounds (a budget spent), or None."""
        return self.state.stopped

    @property
    def pending_round(self) -> PendingRound | None:
        """The round :meth:`configure_train` set up and no reply has finished, or None."""
        return self.state.pending

    @property
    def rounds_done(self) -> int:
        """The rounds a run had done when it began (a resumed run's; 0 for a fresh one)."""
        return self.state.rounds_done

    @property
    def round_timeout_s(self) -> float | None:
        """How long a round of the run waits for its replies, in seconds (None: no limit)."""
        return self.state.timeout

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

    def spend(self, N: int) -> Any:
        """The per-client spend (B − D(n))/n of the arms n = 1..N (with a total budget, the
        same for every n: the clients train their own way)."""
        return self.budgeting.spend(N)

    def summary(self) -> None:
        """Log the strategy's settings at the start (Strategy API)."""
        from logging import DEBUG, INFO

        from flwr.supercore import log

        self.budgeting.summary()
        # internals at INFO only where you set them: every round a step, FedAvg's, undamped
        plain = (self.steps == "every-round" and self.settings["server_lr"] == 1.0
                 and not self.damp_exploration)  # fmt: skip
        log(DEBUG if plain else INFO, "\t├──> Steps: %s (T = %d), server lr %g, exploration "
            "damped: %s", self.steps, self.T, self.settings["server_lr"],
            self.damp_exploration)  # fmt: skip
        if self.selector is None:
            log(INFO, "\t├──> The rule: eegrad's default, your strategy's n each round left "
                "only as far as the evidence carries (never fewer than %g %% of it)",
                100 * (1.0 - self.options.departure))  # fmt: skip
        else:
            log(INFO, "\t├──> Selector: %r", self.selector)
        self.aggregator.summary()
