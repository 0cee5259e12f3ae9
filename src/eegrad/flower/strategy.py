r"""A Flower strategy that learns how many clients to ask under a per-round budget.

At every server round :class:`EEGradStrategy` asks its selector for an arm n — the number of
clients — samples n of the connected nodes, and sends each the model and its share
:math:`(B - D(n))/n` of the round's budget B (the paper's Section 2: D(n) is the server's
aggregation cost). It receives their updated models and folds each, as it comes, into the round's running sums
(:class:`eegrad.parts.PullAccumulator`: one pass over the reply, in the model's dtype, as
FedAvg's server makes; no n × d stack), as an update :math:`u_i = w - w_i` (for one local gradient step, ``lr`` times the client's gradient — FedSGD,
the case the paper's model covers; for several local steps a model delta, a pseudo-gradient),
and tells the selector the pull:

* ``steps="every-round"`` (default): every round is a model step,
  :math:`w \leftarrow w - \eta \sum_i p_i u_i` with :math:`p_i` the clients' shares of the samples
  used — FedAvg's aggregate for :math:`\eta = 1` — and the selector is told the n parts
  (:meth:`eegrad.GradientEstimator.tell_parts`). The default selector (:func:`default_rule`),
  :class:`eegrad.ProgressThompson`, learns the variance of every n from the spread of the updates
  within rounds, and how far each n's update goes from the round means, and picks the n of most
  expected decrease; exploring costs only a noisier step.
* ``steps="t-rounds"``: the paper's Algorithm 1 — T query rounds at one model, then one step with
  the mean of the T round means. The default selector is :func:`eegrad.default_selector`.

The selector is driven through a :class:`eegrad.GradientEstimator`, so its choices are those of
a ``GradientEstimator`` told the same updates from the same stream (tested).

Per-round records (server round, step, arm, clients asked and replied, failed nodes, budget,
budget used, cumulative cost) go to the round's Flower ``MetricRecord`` and to
:attr:`EEGradStrategy.records`, written as a tidy CSV to ``csv_path`` after every round.

**Failures.** A node whose reply is an error, or that does not reply before the timeout, is
dropped from the round and named in its record (``failed_nodes``); the round uses the updates
that came. A round with none is lost: no step, and the selector's pull is withdrawn. An update of
the wrong shape or with NaN/Inf is an error naming the node and the round.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterable
from logging import INFO
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy
from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords
from flwr.supercore import log

from .._random import as_generator
from .._validation import (
    InvalidParameterError,
    InvalidParameterTypeError,
    NonFiniteGradientError,
    check_integer,
    check_real,
    fail,
)
from ..arms import feasible_arms, per_client_spend
from ..costs import AggregationCost, LinearAggregation, as_aggregation
from ..loop import GradientEstimator
from ..parts import PullAccumulator, update_norm2
from ..results import append_row, write_table
from ..selectors import ProgressThompson, Selector, SpreadThompson, default_selector
from ..spread import SpreadSums
from .checkpointing import resume, save_round
from .client import SHARE_KEY, SUMS_KEY, SUMS_METRICS
from .model_arrays import array_view, cast_like
from .privacy import CentralDP, PrivacyBudgetExhausted, PrivateRounds, refuse_fixed_n_wrappers

__all__ = ["DEFAULT_NOISE_ORDER", "RECORD_COLUMNS", "ClientUpdateError", "EEGradStrategy",
           "default_rule"]  # fmt: skip


#: Columns of the per-round records (and of ``csv_path``).
RECORD_COLUMNS = ("server_round", "step", "arm", "clients_asked", "clients_replied",
                  "failed_nodes", "budget", "budget_used", "cost")  # fmt: skip

_STEPS = ("every-round", "t-rounds")
#: The default every-round rule's noise model (its ``noise_order``).
DEFAULT_NOISE_ORDER = 2


def default_rule(population: int, spend: Any, *, release_noise: Any = None,
                 discount: float = 0.9) -> Selector:  # fmt: skip
    r"""The every-round rule :class:`EEGradStrategy` builds when given none, for K =
    ``population`` nodes and the arms' per-client spends ``spend``, shape (N,).

    Without privacy, :class:`~eegrad.ProgressThompson` (``noise_order=2``): n chosen for the
    expected decrease of its round, from the spread (the noise) and the round mean's squared
    norm and persistence (the signal and the curvature), so that clients whose larger shares
    buy more local steps are valued for how far they go. With a private release
    (``release_noise``, the known variance :math:`d(z_nC/n)^2` it adds to arm n's mean),
    :class:`~eegrad.SpreadThompson` (``noise_order=2``) told it: the release's noise buries
    the signal there, and the least noise is the rule's aim (measured on the scorecard of
    federations, ``eegrad example flower-scorecard``; the federated guide).
    """
    extra = {} if release_noise is None else {"release_noise": release_noise}
    return _default_rule_class(release_noise is not None)(
        population=population, spend=spend, noise_order=DEFAULT_NOISE_ORDER, discount=discount,
        **extra)  # fmt: skip


def _default_rule_class(private: bool) -> type[SpreadThompson]:
    """The class of the default every-round rule, with or without a private release."""
    return SpreadThompson if private else ProgressThompson


def default_rule_name(private: bool) -> str:
    """How a checkpoint's fingerprint names the default every-round rule."""
    return (f"default ({_default_rule_class(private).__name__}, "
            f"noise_order={DEFAULT_NOISE_ORDER})")  # fmt: skip


class ClientUpdateError(InvalidParameterError):
    """A client's update cannot be used (wrong arrays or shapes); the message names the node
    and the round."""


class EEGradStrategy(Strategy):
    r"""EE-Grad as a Flower strategy: how many clients to ask, learnt under a real budget.

    Parameters
    ----------
    budget : float
        B, the budget of one round (in the clients' cost units: virtual units, or seconds with
        :class:`~eegrad.flower.WallClock` and ``seconds_per_unit=1``).
    c_min : float
        The least a client's participation can cost (the largest fixed overhead plus one
        sample), > 0: N = max{n : B > n c_min + D(n)} (Section 2), capped at the nodes
        connected. A budget that affords no arm raises the error of :meth:`eegrad.Arms.from_costs`.
    aggregation : AggregationCost or callable, optional
        D(n), the server's cost of a round of n clients (default: none, D = 0). D(1) > 0 is a
        fixed per-round cost (e.g. broadcasting the model), spent whatever n is, e.g.
        ``LinearAggregation(b=0.5, fixed=10.0)``: the clients share B − D(n).
    selector : Selector, optional
        The rule. Default for ``steps="every-round"``: :func:`default_rule`, told the
        population K and the arms' spends — :class:`~eegrad.ProgressThompson`, which picks n
        for the expected decrease of its round (the spread gives the noise, the round mean's
        squared norm the signal, consecutive means the curvature), or with ``privacy``
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
        (``step-scale``). None (default): damped with ``privacy`` (the release adds known noise
        that dominates the rounds of few clients), undamped otherwise, as FedAvg steps: on the
        scorecard of federations (``eegrad example flower-scorecard``) damping cost the
        default 1–9 % of final loss in every setting without privacy (the federated guide).
    rng : int or numpy.random.Generator
        Seed of the selector's stream and of the node sampling (independent children).
    min_available_nodes : int
        Nodes to wait for before the first round.
    fraction_evaluate : float
        Fraction of nodes asked to evaluate after each round, in [0, 1] (0: none).
    csv_path : str or Path, optional
        Where to write the per-round records after every round.
    checkpoint : str or Path, optional
        A file (``.npz``) to which the strategy writes, after every round, everything needed to
        continue: the rule's and the estimator's state, the random streams, the records, the
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
        makes every n cost the same privacy per round), one ``GaussianPrivacyEvent(z, n, K)``
        per round in Flower's RDP accountant; the records gain ``noise_std`` and ``epsilon``, and a round
        that would take ε past ``max_epsilon`` is not run (the run ends there).
    secure_sums : bool
        Read only sums of the replies, as secure aggregation would reveal them: the clients
        (wrapped with :func:`~eegrad.flower.with_spread_sums`) reply ω·u, ω, ω² and ω‖u‖²; the
        server adds them up first and uses nothing but the sums
        (:class:`eegrad.spread.SpreadSums`) — the weighted mean for the step, and the weighted
        spread for a rule that learns from parts. A non-finite reply is then seen only in the
        sum, so the error names the round, not the node.
    """

    def __init__(
        self,
        budget: float,
        c_min: float,
        *,
        aggregation: AggregationCost | Any = None,
        selector: Selector | None = None,
        steps: str = "every-round",
        T: int | None = None,
        server_lr: float = 1.0,
        damp_exploration: bool | None = None,
        rng: Any = 0,
        min_available_nodes: int = 1,
        fraction_evaluate: float = 0.0,
        csv_path: str | Path | None = None,
        checkpoint: str | Path | None = None,
        privacy: CentralDP | None = None,
        secure_sums: bool = False,
        weighted_by_key: str = "num-examples",
        arrayrecord_key: str = "arrays",
        configrecord_key: str = "config",
    ) -> None:
        owner = "EEGradStrategy"
        self.budget = check_real(budget, "budget", owner, gt=0)
        self.c_min = check_real(c_min, "c_min", owner, gt=0)
        aggregation = LinearAggregation(b=0.0) if aggregation is None else as_aggregation(
            aggregation, owner)  # fmt: skip
        self.aggregation = aggregation
        # N before the nodes are known: checks the budget at construction, as Arms.from_costs.
        self.max_arms, _ = feasible_arms(self.c_min, aggregation, self.budget, owner=owner)
        if steps not in _STEPS:
            raise fail("steps", owner, f"one of {_STEPS}", steps)
        self.steps = steps
        if steps == "t-rounds":
            if T is None:
                raise fail("T", owner, "an integer >= 1 when steps='t-rounds'", T)
            self.T = check_integer(T, "T", owner, ge=1)
        else:
            if T not in (None, 1):
                raise fail("T", owner, "None or 1 when steps='every-round'", T)
            self.T = 1
        if selector is not None and not isinstance(selector, Selector):
            raise InvalidParameterTypeError(
                f"The 'selector' parameter of {owner} must be a Selector. Got {selector!r} instead."
            )
        self._given_selector = selector  # as the user gave it: nothing is written into it
        self._rule_given = selector is not None  # else _setup builds the default
        self.server_lr = check_real(server_lr, "server_lr", owner, gt=0)
        if damp_exploration is None:  # damped where a private release adds known noise
            damp_exploration = privacy is not None
        if not isinstance(damp_exploration, bool | np.bool_):
            raise InvalidParameterTypeError(
                f"The 'damp_exploration' parameter of {owner} must be a bool or None. Got "
                f"{damp_exploration!r} instead."
            )
        self.damp_exploration = bool(damp_exploration)
        self.min_available_nodes = check_integer(min_available_nodes, "min_available_nodes",
                                                 owner, ge=1)  # fmt: skip
        self.fraction_evaluate = check_real(fraction_evaluate, "fraction_evaluate", owner,
                                            ge=0, le=1)  # fmt: skip
        self.csv_path = None if csv_path is None else Path(csv_path)
        self.checkpoint = None if checkpoint is None else Path(checkpoint)
        self._offset = 0  # rounds done before a resumed start
        self.weighted_by_key = weighted_by_key
        self.arrayrecord_key = arrayrecord_key
        self.configrecord_key = configrecord_key
        if privacy is not None and not isinstance(privacy, CentralDP):
            raise InvalidParameterTypeError(f"The 'privacy' parameter of {owner} must be a "
                                            f"CentralDP or None. Got {privacy!r} instead.")  # fmt: skip
        self.privacy = privacy
        self.secure_sums = bool(secure_sums)
        if self.secure_sums and privacy is not None:
            raise fail("secure_sums", owner, "False with privacy=CentralDP(...) (central DP "
                       "clips each update on the server, which sums alone do not allow)", True)
        # The first three children are those of spawn(2) and spawn(3): adding a stream changes
        # nothing else. Evaluation samples from its own, so turning it on changes no training.
        (self._selector_rng, self._sampling_rng, self._noise_rng,
         self._evaluate_rng) = as_generator(rng, owner).spawn(4)  # fmt: skip
        #: The records' columns (with ``noise_std`` and ``epsilon`` under ``privacy``).
        self.columns = RECORD_COLUMNS + (("noise_std", "epsilon") if privacy else ())
        # The streams as constructed: every start() begins from them (a fresh run).
        self._initial_streams = copy.deepcopy((self._selector_rng, self._sampling_rng,
                                               self._noise_rng, self._evaluate_rng))  # fmt: skip
        self._fresh_run()

    def _fresh_run(self) -> None:
        """The run state as the constructor leaves it: no records, no cost, no rule set up,
        the random streams at their start (a second :meth:`start` is a new run, not more of
        the last one)."""
        (self._selector_rng, self._sampling_rng, self._noise_rng,
         self._evaluate_rng) = copy.deepcopy(self._initial_streams)  # fmt: skip
        #: One dict per server round (see :data:`RECORD_COLUMNS`).
        self.records: list[dict[str, Any]] = []
        self.selector = self._given_selector  # the rule at work once _setup has run
        self.estimator: GradientEstimator | None = None
        self.N: int | None = None
        self._private: PrivateRounds | None = None  # the release, made when K is known
        self._round: dict[str, Any] | None = None
        self._steps_taken = 0
        self._cost = 0.0
        self._num_nodes: int | None = None
        self._latest: ArrayRecord | None = None  # the model the next round starts from
        self._evaluated: dict[int, MetricRecord] = {}  # federated evaluation, by round
        #: Why the last :meth:`start` ended early (the privacy budget), or None.
        self.stopped: str | None = None
        self._metrics: dict[int, dict[str, Any]] = {}  # each round's train MetricRecord

    # -- set-up ------------------------------------------------------------------------------------
    def spend(self, N: int) -> np.ndarray:
        """The per-client spend (B − D(n))/n of the arms n = 1..N."""
        return per_client_spend(self.budget, self.aggregation, np.arange(1, N + 1))

    def _setup(self, num_nodes: int, dim: int) -> None:
        self._num_nodes = num_nodes
        self.N = min(self.max_arms, num_nodes)
        sel = self._given_selector
        # A private release adds d (z_n C/n)² to arm n's variance, known exactly.
        noise = None
        if self.privacy is not None:
            self._private = PrivateRounds(self.privacy, self.N, num_nodes, self._noise_rng)
            noise = dim * self._private.noise_std(np.arange(1, self.N + 1)) ** 2
            if isinstance(sel, SpreadThompson) and sel.release_noise is None:
                # a copy told the release's noise: the user's rule is left as it was given
                sel = type(sel)(**{**sel.get_params(), "release_noise": noise})
        if sel is None:
            if self.steps == "every-round":
                sel = default_rule(num_nodes, self.spend(self.N), release_noise=noise)
            else:
                sel = default_selector()
        self.selector = sel  # the rule at work: the given one, its private copy, or the default
        self.estimator = GradientEstimator(sel, self.N, T=self.T, dim=dim, rng=self._selector_rng)

    def summary(self) -> None:
        """Log the strategy's settings (budget, c_min, D, steps, rule) at the start (Strategy API).
        """
        log(INFO, "\t├──> EE-Grad: budget B = %g per round, c_min = %g, D = %r",
            self.budget, self.c_min, self.aggregation)  # fmt: skip
        log(INFO, "\t├──> Steps: %s (T = %d), server lr %g, exploration damped: %s", self.steps,
            self.T, self.server_lr, self.damp_exploration)  # fmt: skip
        log(INFO, "\t└──> Selector: %r", self.selector or "default")

    # -- train -------------------------------------------------------------------------------------
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Ask the selector for n, sample n nodes and send each the model and its share (B −
        D(n))/n of the round's budget (Strategy API).
        """
        refuse_fixed_n_wrappers(self)
        server_round += self._offset
        while len(nodes := sorted(int(i) for i in grid.get_node_ids())) < self.min_available_nodes:
            log(INFO, "Waiting for nodes: %d of %d connected", len(nodes), self.min_available_nodes)
            time.sleep(1.0)
        keys = list(arrays.keys())
        model = [array_view(arrays[k]) for k in keys]  # the model's arrays, in their dtypes
        if self.estimator is None:
            self._setup(len(nodes), sum(a.size for a in model))
        n = self.estimator.ask()
        if self.privacy is not None:
            try:
                self._private.charge(server_round, n)
            except PrivacyBudgetExhausted:
                self.estimator.withdraw()
                raise
        pick = self._sampling_rng.choice(len(nodes), size=min(n, len(nodes)), replace=False)
        chosen = [nodes[i] for i in sorted(pick)]
        share = float(per_client_spend(self.budget, self.aggregation, n))
        cfg = ConfigRecord(dict(config))
        cfg["server-round"] = server_round
        cfg[SHARE_KEY] = share
        cfg["eegrad-n"] = n
        if self.secure_sums:
            cfg[SUMS_KEY] = True
        record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: cfg})
        self._round = {"server_round": server_round, "n": n, "nodes": chosen, "model": model,
                       "keys": keys}  # fmt: skip
        log(INFO, "configure_train: n = %d clients (share %.4g each)", n, share)
        return [Message(content=record, message_type=MessageType.TRAIN, dst_node_id=nid)
                for nid in chosen]  # fmt: skip

    def _reply(self, msg: Message, server_round: int) -> tuple[list[Array], float, float]:
        """(arrays, weight, cost) of one reply, its arrays checked against the model's names,
        shapes and dtypes from their metadata (nothing deserialised); raises naming the node
        and the round."""
        rnd = self._round
        node = msg.metadata.src_node_id
        where = f"node {node} at server round {server_round}"
        content = msg.content
        rec = content.get(self.arrayrecord_key)
        if not isinstance(rec, ArrayRecord):
            raise ClientUpdateError(
                f"The reply of {where} has no ArrayRecord under {self.arrayrecord_key!r}."
            )
        if list(rec.keys()) != rnd["keys"]:
            raise ClientUpdateError(
                f"The update of {where} has arrays {list(rec.keys())}, expected {rnd['keys']}."
            )
        arrays = []
        for k, ref in zip(rnd["keys"], rnd["model"], strict=True):
            a = rec[k]
            if tuple(a.shape) != ref.shape:
                raise ClientUpdateError(f"The update of {where} has array {k!r} of shape "
                                        f"{tuple(a.shape)}, expected {ref.shape}.")  # fmt: skip
            if np.dtype(a.dtype) != ref.dtype:
                raise ClientUpdateError(f"The update of {where} has array {k!r} of dtype "
                                        f"{a.dtype}, expected {ref.dtype} (the model's).")  # fmt: skip
            arrays.append(a)
        metrics = next(iter(content.metric_records.values()), None)
        if metrics is None or self.weighted_by_key not in metrics:
            raise ClientUpdateError(
                f"The reply of {where} has no {self.weighted_by_key!r} metric (the samples used)."
            )
        weight = float(metrics[self.weighted_by_key])
        if not np.isfinite(weight) or weight <= 0:
            raise ClientUpdateError(
                f"The reply of {where} reports {self.weighted_by_key} = {weight!r}; it must be > 0."
            )
        return arrays, weight, float(metrics.get("cost", np.nan))

    def _fold(self, pull: PullAccumulator, msg: Message, server_round: int) -> float:
        """Fold one reply into the round's running sums, one array at a time (each
        deserialised, folded and dropped); returns its reported cost."""
        arrays, weight, cost = self._reply(msg, server_round)
        try:
            pull.add((array_view(a) for a in arrays), weight)
        except NonFiniteGradientError:
            raise NonFiniteGradientError(
                f"The update of node {msg.metadata.src_node_id} at server round {server_round} "
                "contains NaN or Inf."
            ) from None
        return cost

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Check the replies (shape, finiteness; failures dropped and recorded), tell the selector
        the parts, step every round or after T rounds, and record the round (Strategy API).
        """
        server_round += self._offset
        rnd = self._round
        if rnd is None or rnd["server_round"] != server_round:
            raise InvalidParameterError(
                f"aggregate_train(server_round={server_round}) without configure_train for it."
            )
        replies = list(replies)
        asked = set(rnd["nodes"])
        good = [m for m in replies if not m.has_error() and m.metadata.src_node_id in asked]
        failed = [m.metadata.src_node_id for m in replies if m.has_error()]
        answered = {m.metadata.src_node_id for m in replies}
        failed += [nid for nid in rnd["nodes"] if nid not in answered]  # timed out
        for m in replies:
            if m.has_error():
                log(INFO, "node %d failed at round %d: %s", m.metadata.src_node_id,
                    server_round, m.error.reason)  # fmt: skip
        n = rnd["n"]
        est = self.estimator
        # One pass over the replies: each folded into running sums (the updates u_i = w − w_i
        # in the model's dtype, float64 scalars), FedAvg's server cost; no n × d stack.
        pull = None if self.secure_sums else PullAccumulator(reference=rnd["model"],
                                                             spread=est.selector.uses_parts)  # fmt: skip
        if self.secure_sums:
            costs, sums = self._sum_replies(good, server_round)
        elif self.privacy is None:
            costs = [self._fold(pull, m, server_round) for m in good]
        else:
            costs, spread_sum = self._fold_private(pull, good, server_round)
        replied = len(costs)
        used = float(self.aggregation(np.array([float(max(replied, 1))]))[0])
        used += float(np.nansum(costs)) if costs else 0.0
        new_arrays = None
        step = 0
        if not replied:
            est.withdraw()
        elif self.secure_sums:
            est.tell_sums(sums)
        elif self.privacy is None:
            est.tell_pull(pull)
        else:
            self._release(pull, spread_sum, n)
        del pull  # nothing of the round is kept past its use
        scale = 1.0
        if replied and est.done:
            scale = self._step_scale(n)
            new_arrays = self._step(est.result(), scale)
            est.next_iterate()
            self._steps_taken += 1
            step = 1
        self._cost += self.budget
        row = {"server_round": server_round, "step": self._steps_taken if step else "",
               "arm": n, "clients_asked": len(rnd["nodes"]), "clients_replied": replied,
               "failed_nodes": " ".join(str(f) for f in sorted(failed)), "budget": self.budget,
               "budget_used": used, "cost": self._cost}  # fmt: skip
        if self.privacy is not None:
            row["noise_std"] = float(self._private.noise_std(n)) if replied else ""
            row["epsilon"] = self._private.epsilon()
        self.records.append(row)
        if self.csv_path is not None:  # the header with the first round, then a line a round
            if len(self.records) == 1:
                write_table(self.csv_path, self.records, self.columns)
            else:
                append_row(self.csv_path, row, self.columns)
        metrics = {"arm": n, "clients-replied": replied, "clients-failed": len(failed),
                   "budget-used": used, "cost": self._cost, "step": step,
                   "step-scale": scale}  # fmt: skip
        self._metrics[server_round] = metrics
        if self.checkpoint is not None:
            save_round(self, server_round, new_arrays)
        if new_arrays is not None:
            self._latest = new_arrays
        self._round = None
        return new_arrays, MetricRecord(metrics)

    # -- sums only (secure aggregation) --------------------------------------------------------
    def _sum_replies(self, good: list[Message],
                     server_round: int) -> tuple[list[float], SpreadSums | None]:  # fmt: skip
        """Add up the replies of clients wrapped with ``with_spread_sums`` — arrays ω·u, metrics
        ω, ω², ω‖u‖², 1/ω — and return the costs and the sums; nothing else of a reply is read."""
        if not good:
            return [], None
        total: list[np.ndarray] | None = None
        scalars = np.zeros(5)  # n, W, W2, Σω‖u‖², Σ1/ω
        costs = []
        for m in good:
            arrays, weight, cost = self._reply(m, server_round)
            metrics = next(iter(m.content.metric_records.values()))
            missing = [k for k in SUMS_METRICS if k not in metrics]
            if missing:
                raise ClientUpdateError(
                    f"The reply of node {m.metadata.src_node_id} at server round {server_round} "
                    f"has no {missing[0]!r}: with secure_sums=True the clients' train function "
                    "must be wrapped with eegrad.flower.with_spread_sums."
                )
            views = [array_view(a) for a in arrays]
            total = [v.astype(v.dtype, copy=True) for v in views] if total is None else \
                [np.add(t, v, out=t) for t, v in zip(total, views, strict=True)]  # fmt: skip
            scalars += [1.0, weight, *(float(metrics[k]) for k in SUMS_METRICS)]
            costs.append(cost)
        sums = SpreadSums(n=int(scalars[0]), total_weight=float(scalars[1]),
                          total_weight2=float(scalars[2]), weighted_sum=total,
                          weighted_squares=float(scalars[3]),
                          inverse_weight_sum=float(scalars[4]))  # fmt: skip
        if not (math.isfinite(sums.weighted_spread()) and all(np.all(np.isfinite(t))
                                                                 for t in total)):  # fmt: skip
            raise NonFiniteGradientError(
                f"The sum of the replies at server round {server_round} contains NaN or Inf "
                "(with secure sums the node cannot be named)."
            )
        return costs, sums

    # -- privacy ---------------------------------------------------------------------------------
    def _fold_private(self, pull: PullAccumulator, good: list[Message],
                      server_round: int) -> tuple[list[float], float]:  # fmt: skip
        """Fold each reply clipped to the update clip rC, with equal weights; returns the costs
        and the sum of the spread coordinates a‖û_i‖²/C (:mod:`eegrad.flower.privacy`)."""
        costs, spread = [], 0.0
        for m in good:
            arrays, _, cost = self._reply(m, server_round)
            views = [array_view(a) for a in arrays]
            norm2 = update_norm2(views, self._round["model"])
            if not math.isfinite(norm2):
                raise NonFiniteGradientError(
                    f"The update of node {m.metadata.src_node_id} at server round "
                    f"{server_round} contains NaN or Inf."
                )
            scale, coordinate = self._private.clip(norm2)
            pull.add(views, 1.0, scale=scale)  # equal weights: DP-FedAvg's sensitivity
            spread += coordinate
            costs.append(cost)
        return costs, spread

    def _release(self, pull: PullAccumulator, spread_sum: float, n: int) -> None:
        """The round's Gaussian release (:meth:`PrivateRounds.release`, on the pull's own
        arrays); the rule is told the released mean and the pair sum from the release alone."""
        released = pull.mean()
        released = released if isinstance(released, list) else [released]
        pair_sum = self._private.release(released, pull.count, pull.size, spread_sum, n)
        self.estimator.tell_pull(pull, pair_sum=pair_sum, weights=np.ones(pull.count), noisy=True)

    def _step_scale(self, n: int) -> float:
        """ρ of ``damp_exploration`` for a round of arm n: the rule's
        :meth:`~eegrad.selectors.Selector.step_scale` (1 when off, with t-rounds, or for a rule
        with no view of it)."""
        if not self.damp_exploration or self.steps != "every-round":
            return 1.0
        rho = self.selector.step_scale(np.array([n - 1]))
        return 1.0 if rho is None else float(rho[0])

    def _step(self, G: Any, scale: float = 1.0) -> ArrayRecord:
        """w ← w − η ρ G, array by array in the model's dtypes (G: the pull's mean in the
        model's arrays with T = 1, the estimator's flat float64 mean of T rounds otherwise;
        ρ the round's ``scale``)."""
        rnd = self._round
        if not isinstance(G, list):
            sizes = np.cumsum([a.size for a in rnd["model"]])[:-1]
            G = np.split(np.asarray(G), sizes)
        out = {}
        for k, w, g in zip(rnd["keys"], rnd["model"], G, strict=True):
            new = w - (self.server_lr * scale) * g.reshape(w.shape)
            out[k] = Array(new if new.dtype == w.dtype else cast_like(new, w.dtype))
        return ArrayRecord(out)

    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Any = None) -> Result:  # fmt: skip
        """Run ``num_rounds`` rounds (Flower's ``Strategy.start``); with a ``checkpoint`` that
        exists, continue the saved run from the round after the saved one, with the saved
        model, to round ``num_rounds``. The result's metrics are indexed by server round.
        Every call begins a fresh run (records, cost and streams as constructed) unless it
        resumes."""
        self._fresh_run()
        self._offset = 0
        arrays = initial_arrays
        if self.checkpoint is not None and self.checkpoint.exists():
            arrays = resume(self, initial_arrays)
            log(INFO, "EE-Grad: resumed from checkpoint %s after server round %d; continuing "
                "at round %d of %d", self.checkpoint, self._offset, self._offset + 1,
                num_rounds)  # fmt: skip
        offset = self._offset
        self._latest = arrays
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
                out = evaluate_fn(rnd + offset, arr)
                if out is not None:
                    seen["evaluate_metrics_serverapp"][rnd + offset] = out
                return out

            try:
                result = super().start(grid, arrays, num_rounds - offset, timeout, train_config,
                                       evaluate_config, None if evaluate_fn is None else evaluate)  # fmt: skip
            except PrivacyBudgetExhausted as stop:
                log(INFO, "EE-Grad: privacy budget reached. %s", stop)
                result = Result()  # what the rounds run released, as Flower's start returns it
                result.arrays = self._latest
                for name, table in seen.items():
                    setattr(result, name, {rnd - offset: m for rnd, m in table.items()})
                self.stopped = str(stop)
        for name in ("train_metrics_clientapp", "evaluate_metrics_clientapp",
                     "evaluate_metrics_serverapp"):  # fmt: skip
            table = getattr(result, name)
            setattr(result, name, {rnd + offset: m for rnd, m in table.items()})
        for rnd, m in self._metrics.items():  # the rounds before the resume, from the checkpoint
            result.train_metrics_clientapp.setdefault(rnd, MetricRecord(m))
        result.train_metrics_clientapp = dict(sorted(result.train_metrics_clientapp.items()))
        self._offset = 0
        return result

    # -- evaluate ----------------------------------------------------------------------------------
    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Sample ``fraction_evaluate`` of the nodes for federated evaluation (Strategy API; none
        by default).
        """
        server_round += self._offset
        if self.fraction_evaluate == 0.0:
            return []
        nodes = sorted(int(i) for i in grid.get_node_ids())
        k = max(1, round(self.fraction_evaluate * len(nodes)))
        pick = self._evaluate_rng.choice(len(nodes), size=k, replace=False)
        cfg = ConfigRecord(dict(config))
        cfg["server-round"] = server_round
        record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: cfg})
        return [Message(content=record, message_type=MessageType.EVALUATE, dst_node_id=nodes[i])
                for i in sorted(pick)]  # fmt: skip

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        """The weighted mean of the evaluation replies' metrics (Strategy API)."""
        good = [m.content for m in replies if not m.has_error()]
        out = aggregate_metricrecords(good, self.weighted_by_key) if good else None
        if out is not None:
            self._evaluated[server_round + self._offset] = out
        return out
