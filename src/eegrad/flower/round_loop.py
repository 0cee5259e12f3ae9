r"""The round loop of a federated run over the parts it is given.

:class:`RoundLoop` is a Flower strategy that, each round, asks its rule for n (with the
budget's outlook), samples n of the nodes connected, sends each the model (and its share, with
B a round), folds the replies one at a time (:mod:`eegrad.flower.replies`: O(d), FedAvg's
server cost), tells the rule the round's one record, steps (or has the user's strategy
aggregate) and records and keeps the round. It tests no mode: each part answers for its own
(:mod:`~eegrad.flower.budgets`, :mod:`~eegrad.flower.releases`,
:mod:`~eegrad.flower.aggregators`, :mod:`~eegrad.flower.schedules`,
:mod:`~eegrad.flower.keeping`, :mod:`~eegrad.flower.nodes`), and everything a run changes is
its :class:`~eegrad.flower.state.RunState`. :class:`~eegrad.flower.EEGradStrategy` makes the
parts from its keywords (:mod:`eegrad.flower.factory`).
"""

from __future__ import annotations

import copy
import io
import logging
from collections.abc import Iterable, Sequence
from logging import ERROR, INFO, WARNING
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy
from flwr.supercore import log

from .._validation import InvalidParameterError, check_integer, check_real, fail
from ..selectors import AnchoredPlan, AnchoredProgress, Selector, SpreadThompson
from ..selectors.anchored import DEFAULT_DEPARTURE, LOSS_METRIC
from .budgets import baseline_of
from .draws import draw_nodes
from .driver import RuleDriver
from .factory import RunOptions
from .log_counts import round_counts
from .model_arrays import array_view
from .newcomers import limit_newcomers, note_joined
from .nodes import NodeWaiting
from .privacy import refuse_fixed_n_wrappers
from .pulling import PullingGrid
from .replies import ClientUpdateError, RoundFold
from .round_report import RoundReport
from .state import PendingRound, RunState
from .stops import RunStopped

__all__ = ["DEFAULT_NOISE_ORDER", "RECORD_COLUMNS", "STOPS", "RoundLoop", "default_rule",
           "default_rule_name", "record_metrics"]  # fmt: skip

#: Columns of the per-round records (and of ``csv_path``); a round's ``MetricRecord`` holds
#: their numbers under the same names (:func:`record_metrics`).
RECORD_COLUMNS = ("server_round", "step", "arm", "clients_asked", "clients_replied",
                  "failed_nodes", "budget", "budget_used", "cost", "nodes_connected")  # fmt: skip
#: The default every-round rule's noise model (its ``noise_order``).
DEFAULT_NOISE_ORDER = 2
#: What ends a run before its rounds: a budget of privacy or of cost is spent.
STOPS = (RunStopped,)
#: Flower's logger, which ``flwr.supercore.log`` writes to.
_LOGGER = logging.getLogger("flwr")


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


def default_rule(population: int, spend: Any, *, release_noise: Any = None,
                 discount: float = 0.9, per_cost: bool = False,
                 departure: float = DEFAULT_DEPARTURE) -> Selector:  # fmt: skip
    r"""The every-round rule a run builds when given none, for K = ``population`` nodes and the
    arms' per-client spends ``spend``, shape (N,): your strategy's schedule, left only as far as
    the evidence carries (:mod:`eegrad.selectors.anchored`, ``departure`` its α) —
    :class:`~eegrad.AnchoredPlan` with a total budget (``per_cost``: the budget split over the
    rounds left, the release's noise told where there is one), :class:`~eegrad.AnchoredProgress`
    with B a round (``noise_order=2``); with B a round and a private release
    (``release_noise``, the known variance :math:`d(z_nC/n)^2` it adds to arm n's mean)
    :class:`~eegrad.SpreadThompson` told it."""
    if per_cost:
        return AnchoredPlan(population=population, spend=spend, discount=discount,
                            noise_order=DEFAULT_NOISE_ORDER, release_noise=release_noise,
                            departure=departure)  # fmt: skip
    if release_noise is not None:
        return SpreadThompson(population=population, spend=spend, noise_order=DEFAULT_NOISE_ORDER,
                              discount=discount, release_noise=release_noise)  # fmt: skip
    return AnchoredProgress(population=population, spend=spend, noise_order=DEFAULT_NOISE_ORDER,
                            discount=discount, departure=departure)  # fmt: skip


def default_rule_name(private: bool, per_cost: bool = False,
                      departure: float = DEFAULT_DEPARTURE) -> str:  # fmt: skip
    """How a checkpoint's fingerprint names the default every-round rule (a run saved under
    an earlier default is refused by name, not resumed with another rule)."""
    if per_cost:
        return (f"default (AnchoredPlan, departure={departure:g}, noise_order="
                f"{DEFAULT_NOISE_ORDER}, the budget split over the rounds left)")  # fmt: skip
    if private:
        return f"default (SpreadThompson, noise_order={DEFAULT_NOISE_ORDER})"
    return (f"default (AnchoredProgress, departure={departure:g}, noise_order="
            f"{DEFAULT_NOISE_ORDER})")


def _evaluated(out: Any, server_round: int) -> MetricRecord | None:
    """What ``evaluate_fn`` returned for ``server_round``: a ``MetricRecord`` or None, as
    Flower's ``Strategy.start`` takes; anything else (a float, the earlier API's
    ``(loss, metrics)`` tuple) is refused naming the function and the round."""
    if out is None or isinstance(out, MetricRecord):
        return out
    raise TypeError(
        f"evaluate_fn returned {type(out).__name__} {out!r:.60} at round {server_round}; "
        "it must return a flwr.app.MetricRecord or None (Flower's Strategy.start API: return "
        "MetricRecord({'loss': loss, ...}) where the earlier API returned (loss, metrics))."
    )


def _log_final_results(result: Result, why: str) -> None:
    """Log why the run ended before its rounds (once) and its final results, as Flower's
    ``start`` closes a run."""
    for line in ("", f"EE-Grad: {why}", "", "Final results:", ""):
        log(INFO, "%s", line)
    for line in io.StringIO(str(result)):
        log(INFO, "\t%s", line.strip("\n"))
    log(INFO, "")


class RoundLoop(Strategy):
    """A federated run's rounds over the parts it is given (the module's notes).

    Parameters
    ----------
    budgeting : RoundBudget or TotalBudget
        What a round may ask, is sent, costs, and when the run ends.
    release : PlainRelease, SumsRelease or PrivateRelease
        What the server sees of a round's replies.
    aggregator : BuiltInStep or InnerStrategy
        Who configures the messages and makes the step.
    schedule : EveryRound or TRounds
        When the run steps.
    keeping : RunKeeping
        The records' CSV, the evaluations beside it and the checkpoint.
    nodes : NodeWaiting
        The nodes waited for and asked among.
    options : RunOptions
        The random streams, Flower's keys, damping, the callback and the rule given.
    """

    def __init__(self, budgeting: Any, release: Any, aggregator: Any, schedule: Any,
                 keeping: Any, nodes: NodeWaiting, options: RunOptions) -> None:  # fmt: skip
        self.budgeting, self.release, self.aggregator = budgeting, release, aggregator
        #: Your strategy's own schedule (its n each round), where it samples as FedAvg does.
        self.baseline = baseline_of(getattr(aggregator, "strategy", None))
        self.schedule, self.keeping, self.nodes, self.options = schedule, keeping, nodes, options
        #: The records' columns (with ``noise_std`` and ``epsilon`` under ``privacy``).
        self.columns = RECORD_COLUMNS + release.columns + budgeting.columns
        self._base_columns = self.columns  # a run's driver may add its own (begin_run)
        #: What a checkpoint must share with this run to continue it (the configuration; the
        #: model's arrays are added when it is saved).
        self.fingerprint = self._fingerprint()
        self._fresh_run()

    def _fingerprint(self) -> dict[str, Any]:
        """The configuration a checkpoint must share (:attr:`fingerprint`): every keyword of
        :class:`~eegrad.flower.EEGradStrategy` but where a run's output goes (``csv_path``,
        ``checkpoint``, ``on_round``), which a resumed run may change."""
        o, sel = self.options, self.options.given_rule
        default = self.schedule.default_rule_name(
            default_rule_name(self.release.adds_noise, self.budgeting.per_cost, o.departure))
        b = self.budgeting
        return {**b.fingerprint(), "steps": self.schedule.name, "T": self.schedule.T,
                "round_cost": b.round_cost, "cost_metric": b.cost_metric,
                "cost_scale": b.cost_scale, "rng": o.streams.fingerprint(),
                **self.aggregator.settings(), "damp_exploration": o.damp_exploration,
                "weighted_by_key": o.keys["weighted_by_key"],
                "arrayrecord_key": o.keys["arrayrecord_key"],
                "configrecord_key": o.keys["configrecord_key"],
                "min_available_nodes": self.nodes.min_available_nodes,
                "rule": default if sel is None else type(sel).__name__,
                "rule parameters": None if sel is None else repr(sel.get_params()),
                **self.release.fingerprint(), **self.aggregator.fingerprint()}  # fmt: skip

    def _fresh_run(self) -> None:
        """A fresh run (:class:`~eegrad.flower.state.RunState`): no records, no cost, no rule
        set up, the random streams at their start, the inner strategy's state as given (a
        second :meth:`start` is a new run, not more of the last one)."""
        #: The run's state (:class:`~eegrad.flower.state.RunState`).
        self.state = RunState(streams=self.options.streams.copy())
        self.aggregator.reset()
        self.keeping.fresh()  # the run's evaluations' table empty
        self._said_no_loss = False  # the warning that no clients' loss carries a departure

    # -- set-up ------------------------------------------------------------------------------------
    def _setup(self, num_nodes: int, dim: int) -> None:
        """Build the rule, its driver and the private release for K nodes and a model of
        size d (at the first round, or on resume for the saved K and d)."""
        state = self.state
        state.num_nodes, state.dim = int(num_nodes), int(dim)
        self.budgeting.resolve(state.num_rounds, state.num_nodes)
        N = self.budgeting.arms(state.num_nodes)
        self.budgeting.say_arms(state.num_nodes)
        # the run's own copy: nothing is written into the rule the user gave
        sel = copy.deepcopy(self.options.given_rule)
        # A private release adds d (z_n C/n)² to arm n's variance, known exactly.
        noise = self.release.setup(state, N)
        if noise is not None and sel is not None:
            sel = sel.with_release_noise(noise)
        if sel is None:
            sel = self.schedule.default_rule(lambda: default_rule(
                state.num_nodes, self.budgeting.spend(N), release_noise=noise,
                per_cost=self.budgeting.per_cost, departure=self.options.departure))  # fmt: skip
        T, least = self.schedule.T, sel.min_rounds(N)
        if T < least:  # an index rule's T below 2N: its first pulls alone, round-robin
            fix = "steps='t-rounds' and T" if T == 1 else "T"
            raise fail("T", "EEGradStrategy", f">= {least}, the rounds {type(sel).__name__} "
                       f"needs for a step with N = {N} arms (give {fix} >= {least})", T)
        state.rule = RuleDriver(sel, N, T=T, dim=state.dim, rng=state.streams.selector)

    # -- train -------------------------------------------------------------------------------------
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Ask the rule for n, sample n nodes and send each the model (and its share of B a
        round) (Strategy API); with an inner strategy, its messages for exactly those nodes."""
        refuse_fixed_n_wrappers(self)
        state = self.state
        server_round += state.rounds_done
        nodes = self.nodes.connected(grid, state, server_round)
        note_joined(state, nodes, server_round)
        keys = list(arrays.keys())
        model = [array_view(arrays[k]) for k in keys]  # the model's arrays, in their dtypes
        if state.rule is None:  # K: the nodes connected, or the more the run waited for
            self._setup(self.nodes.planned(len(nodes)), sum(a.size for a in model))
        elif state.first_round and len(nodes) != state.num_nodes:
            log(WARNING, "EE-Grad: %d nodes are connected where the resumed run had K = %d; "
                "the rule keeps its %d arms and each round asks among the nodes connected",
                len(nodes), state.num_nodes, state.rule.N)  # fmt: skip
        state.first_round = False
        rule, budget = state.rule, self.budgeting
        least = min(state.min_clients, rule.N, len(nodes))
        # your strategy's n among the nodes connected, at most the K the rule (and a budget of
        # your FedAvg's spend) was set up for: nodes that join later add no planned rounds' n
        yours = (None if self.baseline is None
                 else self.baseline.per_round(min(len(nodes), state.num_nodes)))  # fmt: skip
        most = budget.at_most(state, rule.N, least, server_round, baseline=yours)
        most = min(rule.N if most is None else most, len(nodes))
        n = rule.ask(least, most, budget.outlook(state, server_round, state.num_rounds,
                                                 baseline=yours))  # fmt: skip
        self.release.charge(state, server_round, n, len(nodes))
        pick = draw_nodes(state.streams.sampling, len(nodes), n,
                          yours if getattr(rule.selector, "draws_among_yours", False) else None)
        if budget.prices_unseen:  # late nodes of unknown cost: a few a round (newcomers.py)
            pick = limit_newcomers(state, nodes, pick, server_round, state.streams.sampling)
        chosen = [nodes[i] for i in sorted(pick)]
        cfg = ConfigRecord(dict(config))
        cfg["server-round"] = server_round
        budget.configure(cfg, n)  # B a round: each client's share; a total budget sends none
        cfg["eegrad-n"] = n
        self.release.configure(cfg)
        # the rule's reason costs a fit: asked only where the line is written or a callback reads it
        why = (rule.selector.explain() if _LOGGER.isEnabledFor(INFO)
               or self.options.on_round is not None else None)  # fmt: skip
        state.pending = PendingRound(server_round, n, chosen, keys, model,
                                     budget.round_timeout(state, n, state.timeout), why)  # fmt: skip
        log(INFO, "EE-Grad: server round %d asks n = %d of %d nodes connected (%s)%s",
            server_round, n, len(nodes), budget.describe(state, n),
            "" if why is None else f"; {why}")  # fmt: skip
        with round_counts(sampled=(len(chosen), len(nodes))):
            return self.aggregator.train_messages(server_round, arrays, cfg, grid, chosen)

    def _next_unaffordable(self, server_round: int) -> RunStopped | None:
        """After a round is charged: why the budget left cannot afford the next round (the
        run then ends after this round's evaluation, with no header of a round that never
        runs), or None (the next can run, or this was the run's last)."""
        state = self.state
        if state.num_rounds is not None and server_round >= state.num_rounds:
            return None
        least = min(state.min_clients, state.rule.N)
        try:
            self.budgeting.at_most(state, state.rule.N, least, server_round + 1)
        except RunStopped as stop:
            return stop
        return None

    def _round_timeout(self, timeout: float | None) -> float | None:
        """The pending round's wait for its replies (its budget's cap on Flower's)."""
        pending = self.state.pending
        return timeout if pending is None else pending.timeout

    def new_fold(self) -> RoundFold:
        """The pending round's reply path: plain, sums only or private
        (:mod:`eegrad.flower.replies`)."""
        p, b = self.state.pending, self.budgeting
        keys = {"arrayrecord_key": self.options.keys["arrayrecord_key"],
                "weighted_by_key": self.options.keys["weighted_by_key"],
                "cost": {"cost_metric": b.cost_metric, "cost_scale": b.cost_scale,
                         "cost_required": b.cost_required}}  # fmt: skip
        return self.release.fold(self.state, (p.server_round, p.keys, p.model), p.n, keys)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Fold the replies one at a time (checked; failures dropped and recorded), then
        finish the round (Strategy API)."""
        state = self.state
        server_round += state.rounds_done
        p = state.pending
        if p is None or p.server_round != server_round:
            raise InvalidParameterError(
                f"aggregate_train(server_round={server_round}) without configure_train for it."
            )
        asked = set(p.nodes)
        fold = self.new_fold()
        kept: list[Message] = []  # the replies, for an inner strategy that needs every one
        failed, answered, folded, strangers = [], set(), set(), []
        try:
            for m in replies:  # each folded into running sums and dropped: O(d), FedAvg's cost
                node = m.metadata.src_node_id
                answered.add(node)
                if m.has_error():
                    failed.append(node)
                    log(INFO, "node %d failed at round %d: %s", node, server_round,
                        m.error.reason)  # fmt: skip
                elif node in asked and node not in folded:
                    fold.add(m)
                    folded.add(node)
                    if self.aggregator.keeps_replies:
                        kept.append(m)
                    else:  # folded: its records go now (Flower's RecordDict is a reference
                        m.content.clear()  # cycle, which waited for the cyclic collector)
                else:  # a node not asked (recorded among the failed), or folded already
                    if node not in asked:
                        strangers.append(node)
                    log(WARNING, "EE-Grad: a reply from node %d, %s at round %d, is not folded",
                        node, "already folded" if node in folded else "not asked",
                        server_round)  # fmt: skip
                del m  # before the next: the fold keeps none (a pull holds at most 8)
        except Exception:  # a reply that cannot be used ends the run; nothing is left pending
            state.rule.withdraw()
            state.pending = None
            raise
        timed_out = [nid for nid in p.nodes if nid not in answered]
        return self.finish_round(fold, failed + timed_out + strangers, kept=kept,
                                 timed_out=timed_out)  # fmt: skip

    def finish_round(self, fold: RoundFold, failed: list[int], *, kept: Sequence[Message] = (),
                     extra: dict[str, Any] | None = None, timed_out: Sequence[int] = (),
                     ) -> tuple[ArrayRecord | None, MetricRecord]:  # fmt: skip
        """Finish the pending round from its replies' ``fold``: tell the rule its one record
        (or withdraw a round with none), step or have the inner strategy aggregate (``kept``:
        the replies, for one that needs every reply), record (``failed`` nodes, of which
        ``timed_out`` sent no reply in time; ``extra``: more fields of the row) and keep it."""
        state = self.state
        p, rule, replied = state.pending, state.rule, fold.replied
        try:
            self.budgeting.check_replies(fold, p.server_round)
        except ClientUpdateError:
            rule.withdraw()
            state.pending = None
            raise
        used = self.budgeting.spent(state, fold, p.n, timed_out, p.timeout)
        # the clients' metrics, weighted means (none where the path may not read them)
        client = fold.client_metrics() if replied else {}
        if replied:  # the round's one record: its mean, the parts' spread, their local steps
            steps = fold.local_steps()
            self.budgeting.note_local_steps(state, fold, steps, p.server_round)
            rule.tell(*fold.evidence(rule.selector.reads), local_steps=steps)
            self._tell_clients_loss(client.get(LOSS_METRIC), p.n)
        else:
            rule.withdraw()
        new_arrays, inner_metrics = None, client
        scale = 1.0
        if replied and rule.done:
            scale = self._step_scale(p.n)
            G = rule.result()
            with round_counts(received=(replied, len(failed))):
                new_arrays, inner_metrics = self.aggregator.aggregate(
                    p.server_round, p, G, scale, fold, kept, client)
            rule.next_iterate()
            state.steps_taken += 1
        del fold, kept  # nothing of the round is kept past its use
        state.cost += self.budgeting.charge(used)
        state.spent = self._next_unaffordable(p.server_round)
        row = {"server_round": p.server_round,
               "step": state.steps_taken if new_arrays is not None else "",
               "arm": p.n, "clients_asked": len(p.nodes), "clients_replied": replied,
               "failed_nodes": " ".join(str(f) for f in sorted(failed)),
               **self.budgeting.record(state), "budget_used": used, "cost": state.cost,
               "nodes_connected": state.nodes_connected, **self.release.record(state, p.n, replied),
               **(extra or {})}  # fmt: skip
        state.records.append(row)
        # the clients' (or the inner strategy's) metrics, then eegrad's, named as the record's
        metrics = {**(inner_metrics or {}), **record_metrics(row), "clients_failed": len(failed),
                   "step_scale": scale}  # fmt: skip
        state.metrics[p.server_round] = metrics
        state.server_round = p.server_round
        if self.options.on_round is not None:  # before the round is saved: a round whose
            # report a kill cut off is run again on resume, and reported again (at least once)
            self.options.on_round(RoundReport(
                server_round=p.server_round, record=dict(row), metrics=dict(metrics),
                explanation=p.why, estimates=rule.selector.estimates()))  # fmt: skip
        self.keeping.after_round(state, self.columns, self.fingerprint,
                                 lambda: self._snapshot(new_arrays))  # fmt: skip
        if new_arrays is not None:
            state.latest = new_arrays
        state.pending = None
        return new_arrays, MetricRecord(metrics)

    def _tell_clients_loss(self, loss: Any, n: int) -> None:
        """Tell a rule that judges its departures by the clients' training loss (the default:
        :class:`~eegrad.selectors.anchored.ClientsLoss`) the round's ``loss``, the weighted mean
        of their ``train_loss`` — None where they report none, or where the path may not read
        their own numbers (central DP and SecAgg+ pass no client metric)."""
        selector = self.state.rule.selector
        hook = getattr(selector, "tell_clients_loss", None)
        if hook is None:
            return
        loss = float(loss) if isinstance(loss, (int, float)) else None
        if loss is None and getattr(selector, "departure", 0.0) > 0 and not self._said_no_loss:
            self._said_no_loss = True
            why = "the replies carry none this path may read (central DP and secure sums never do)"
            log(WARNING, "EE-Grad: departure=%g leaves your n only where the clients' "
                "'%s' shows no harm, and %s: your n every round.", selector.departure,
                LOSS_METRIC, why)  # fmt: skip
        hook(loss, n)

    def _snapshot(self, new_arrays: ArrayRecord | None) -> dict[str, np.ndarray]:
        """For the checkpoint after the round: the inner strategy's state into the run's, and
        the round's model (its step's, or the round's own where it made none)."""
        self.state.inner = self.aggregator.state()
        if new_arrays is not None:
            return {k: array_view(new_arrays[k]) for k in new_arrays}
        p = self.state.pending
        return dict(zip(p.keys, p.model, strict=True))

    def _step_scale(self, n: int) -> float:
        """ρ of ``damp_exploration`` for a round of arm n: the rule's
        :meth:`~eegrad.selectors.Selector.step_scale` (1 when off, with t-rounds, or for a rule
        with no view of it)."""
        if not (self.options.damp_exploration and self.schedule.damps):
            return 1.0
        rho = self.state.rule.selector.step_scale(np.array([n - 1]))
        return 1.0 if rho is None else float(rho[0])

    def lose_pending_round(self, extra: dict[str, Any] | None = None) -> None:
        """Finish the pending round, if any, as one no reply reached (a protocol halted): the
        rule's pull withdrawn, no step, every asked node failed in its record."""
        if self.state.pending is not None:
            self.finish_round(self.new_fold(), list(self.state.pending.nodes), extra=extra)

    # -- a run -------------------------------------------------------------------------------------
    def begin_run(self, initial_arrays: ArrayRecord, num_rounds: int, *, min_clients: int = 1,
                  columns: tuple[str, ...] = (),
                  timeout: float | None = None) -> ArrayRecord:  # fmt: skip
        """A fresh run, or the checkpoint's resumed; returns the model to start from.
        ``min_clients``: the least n a round can run (2 under SecAgg+); ``columns``: record
        columns the run's driver adds; ``timeout``: how long a round waits for its replies, in
        seconds (None: no limit)."""
        check_integer(num_rounds, "num_rounds", "EEGradStrategy.start", ge=1)
        if not isinstance(initial_arrays, ArrayRecord) or not len(initial_arrays):
            raise fail("initial_arrays", "EEGradStrategy.start", "an ArrayRecord of the "
                       "model's arrays, at least one array (the model the clients train)",
                       initial_arrays if not isinstance(initial_arrays, ArrayRecord)
                       else "an empty ArrayRecord")  # fmt: skip
        if timeout is not None:
            check_real(timeout, "timeout", "EEGradStrategy.start", gt=0)
        self._fresh_run()
        self.keeping.check_writable()  # and locks: a second start on these files ends here
        try:
            return self._resumed_or_given(initial_arrays, num_rounds, min_clients, columns,
                                          timeout)  # fmt: skip
        except BaseException:
            self.keeping.unlock()
            raise

    def _resumed_or_given(self, initial_arrays: ArrayRecord, num_rounds: int, min_clients: int,
                          columns: tuple[str, ...], timeout: float | None) -> ArrayRecord:
        """The run's state set for its start, from the checkpoint where one exists; the model
        to start from."""
        state = self.state
        state.timeout = None if timeout is None else float(timeout)
        state.min_clients, state.num_rounds = min_clients, int(num_rounds)
        self.columns = self._base_columns + tuple(c for c in columns
                                                  if c not in self._base_columns)  # fmt: skip
        arrays = initial_arrays
        self.keeping.begin({k: array_view(arrays[k]) for k in arrays})
        if self.keeping.resumes:  # the checkpoint's state, its rule set up for its K and d
            model = self.keeping.resume(state, self.fingerprint,
                                        {k: array_view(arrays[k]) for k in arrays},
                                        self._setup, self.columns)  # fmt: skip
            self.aggregator.load_state(state.inner)
            arrays = ArrayRecord({k: Array(np.ascontiguousarray(a)) for k, a in model.items()})
            if state.server_round < num_rounds:
                log(INFO, "EE-Grad: resumed from checkpoint %s after server round %d; "
                    "continuing at round %d of %d", self.keeping.checkpoint, state.server_round,
                    state.server_round + 1, num_rounds)  # fmt: skip
            else:
                log(WARNING, "EE-Grad: the checkpoint %s holds a run that has done %d rounds, "
                    "num_rounds = %d: its final model is returned and no round runs (give "
                    "another checkpoint, or remove it, to train anew)", self.keeping.checkpoint,
                    state.server_round, num_rounds)  # fmt: skip
        state.rounds_done, state.latest = state.server_round, arrays
        return arrays

    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Any = None) -> Result:  # fmt: skip
        """Run ``num_rounds`` rounds (Flower's ``Strategy.start``); with a ``checkpoint`` that
        exists, continue the saved run from the round after the saved one, with the saved
        model, to round ``num_rounds``. The result's metrics are indexed by server round.
        Every call begins a fresh run unless it resumes."""
        arrays = self.begin_run(initial_arrays, num_rounds, timeout=timeout)
        state = self.state
        offset, state.evaluates = state.rounds_done, evaluate_fn is not None
        seen: dict[str, dict[int, MetricRecord]] = {"evaluate_metrics_serverapp": {},
                                                   "evaluate_metrics_clientapp": state.evaluated}
        if offset >= num_rounds:  # the checkpoint's run is done (said when it was read)
            result = Result()
            result.arrays = arrays
        else:
            def evaluate(rnd: int, arr: ArrayRecord) -> Any:
                if rnd == 0 and offset and self.keeping.evaluations.has(offset, "server"):
                    return None  # the checkpoint's model, evaluated by the run that saved it
                out = _evaluated(evaluate_fn(rnd + offset, arr), rnd + offset)
                if out is not None:
                    seen["evaluate_metrics_serverapp"][rnd + offset] = out
                    self.keeping.evaluations.add(rnd + offset, state.cost, "server", out)
                if rnd > 0 and state.spent is not None:  # the round's model evaluated: end
                    raise state.spent
                return out

            try:  # the replies pulled a few at a time, each folded as it comes: O(d) memory
                result = super().start(PullingGrid(grid, round_timeout=self._round_timeout),
                                       arrays, num_rounds - offset, timeout, train_config,
                                       evaluate_config, None if evaluate_fn is None else evaluate)
            except STOPS as stop:  # what the rounds run released, as Flower's start returns it
                result = Result()
                result.arrays = state.latest
                for name, table in seen.items():
                    setattr(result, name, {rnd - offset: m for rnd, m in table.items()})
                state.stopped = f"{stop.what}: {stop}"
            except BaseException as exc:  # Ctrl-C, a failed round: say what is kept, and go
                why = ("interrupted (KeyboardInterrupt)" if isinstance(exc, KeyboardInterrupt)
                       else f"{type(exc).__name__}: {str(exc).rstrip('.')}")  # fmt: skip
                done = self.keeping.last_kept(state.server_round)
                log(ERROR, "EE-Grad: the run stopped after server round %d: %s; %s", done, why,
                    self.keeping.kept(done))  # fmt: skip
                self.keeping.unlock()
                raise
        for name in ("train_metrics_clientapp", "evaluate_metrics_clientapp",
                     "evaluate_metrics_serverapp"):  # fmt: skip
            setattr(result, name, {rnd + offset: m for rnd, m in getattr(result, name).items()})
        for rnd, m in state.metrics.items():  # the rounds before the resume, saved
            result.train_metrics_clientapp.setdefault(rnd, MetricRecord(m))
        if not len(result.arrays):  # every round run lost: the model the run had
            result.arrays = state.latest
        result.train_metrics_clientapp = dict(sorted(result.train_metrics_clientapp.items()))
        if state.stopped is not None:  # Flower's closing summary, which its loop never reached
            _log_final_results(result, state.stopped)
        else:
            self.budgeting.say_left(state)
        self.end_run()
        return result

    def end_run(self) -> None:
        """End the run :meth:`begin_run` began: server rounds count from 1 again, and its
        files' locks let go."""
        self.state.rounds_done, self.state.num_rounds = 0, None
        self.keeping.unlock()

    # -- evaluate ----------------------------------------------------------------------------------
    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Sample ``fraction_evaluate`` of the nodes for federated evaluation (Strategy API;
        none by default); with an inner strategy, its evaluation."""
        state = self.state
        return self.aggregator.configure_evaluate(server_round + state.rounds_done, arrays,
                                                  config, grid, state.streams.evaluate)  # fmt: skip

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        """The weighted mean of the evaluation replies' metrics (Strategy API); with an inner
        strategy, its aggregate."""
        state = self.state
        server_round += state.rounds_done
        out = self.aggregator.aggregate_evaluate(server_round, replies)
        if out is not None:
            state.evaluated[server_round] = out
            self.keeping.evaluations.add(server_round, state.cost, "clients", out)
        if state.spent is not None and not state.evaluates:  # no server evaluation to wait for
            raise state.spent
        return out
