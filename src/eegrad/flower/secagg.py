r"""EEGradStrategy under Flower's SecAgg+: the server sees only the masked sum of the replies.

Flower 1.41 and 1.42 run SecAgg+ (Bell et al. 2020) in its legacy workflow:
``DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(...))`` drives a legacy
(``flwr.server.strategy``) strategy, and every client runs ``secaggplus_mod``. This module is the
bridge:

* :func:`start_secaggplus` runs an :class:`~eegrad.flower.EEGradStrategy` (``secure_sums=True``)
  through that workflow, with :class:`SecAggPlusStrategy`, the legacy-API adapter, in between;
  call it from your ``ServerApp``'s main with the grid Flower passes;
* :func:`secaggplus_train` wraps a client's train function (e.g. :func:`budgeted_train`) for a
  ``ClientApp(mods=[secaggplus_mod])``.

**What travels.** Each client sends, masked, its update :math:`u_i = w - w_i` (every coordinate
within the workflow's ``clipping_range`` c) and one extra number, :math:`c\|u_i\|^2/B_2` with
:math:`B_2` the public bound ``norm2_bound``; ``secaggplus_mod`` multiplies every array by the
client's weight :math:`\omega_i` (``num_examples``) before quantizing and masking. The server
learns the weighted means :math:`\bar u = \sum\omega_i u_i/W` and
:math:`\sum\omega_i\|u_i\|^2/W`, and nothing of one client's update. A coordinate beyond ±c, a
squared norm beyond :math:`B_2` or a weight beyond ``max_weight`` is an error naming the node
(never a silent clip, which would bias the mean).

**What stays visible.** SecAgg+ hides the arrays, not the rest of the reply: every client's
``num_examples`` (its weight ω, the samples it used) and its metrics (here its ``cost``) reach
the server in plaintext. The server needs the weights anyway: :math:`W = \sum\omega_i`,
:math:`\sum\omega_i^2` and :math:`\sum 1/\omega_i` complete the sums the rule learns from
(:class:`~eegrad.spread.SpreadSums`). The choice of n, and so which nodes are asked, is public.

**Quantization.** The workflow maps :math:`\omega_i u_i/\omega_{max}` to integers with
stochastic rounding on a grid of step :math:`\delta = 2c/T` (T = ``quantization_range``): the
mean it returns is unbiased, with a per-coordinate variance of about
:math:`v_q = n\,\delta^2/6\cdot(\omega_{max}/W)^2` (stochastic rounding of a value whose
fractional part is uniform has variance δ²/6). The weighted spread
:math:`Q = \sum\omega_i\|u_i\|^2 - W\|\bar u\|^2` computed from the returned mean is then biased
down by :math:`W d\, v_q`; :class:`SecAggFold` adds it back. Keep ``max_weight`` near the largest
weight: the error grows as :math:`\omega_{max}/W`.

**Halted rounds.** SecAgg+ needs at least two clients a round, so the rule's choices are raised
to n ≥ 2 (the rule is asked with ``at_least=2``). A round the workflow halts (too few shares to
unmask, after dropouts) never reaches ``aggregate_fit``: it is lost, not the run — the rule's pull
is withdrawn, no step is taken, and its record names it (``secure_aggregation = "halted"``,
every asked node in ``failed_nodes``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from logging import INFO
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.common import (
    Code,
    FitIns,
    FitRes,
    Parameters,
    Status,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.compat.common import recorddict_compat as compat
from flwr.server import ServerConfig
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import Strategy as LegacyStrategy
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_PARAMS_RECORD
from flwr.serverapp.strategy import Result
from flwr.supercore import log

from .._validation import InvalidParameterError, check_real, fail
from ..spread import SpreadSums
from .model_arrays import array_of, cast_like
from .replies import RoundFold, reply_cost, reply_source
from .strategy import STOPS, EEGradStrategy

__all__ = ["CLIP_KEY", "MAX_WEIGHT_KEY", "NORM2_BOUND_KEY", "SecAggFold", "SecAggPlusStrategy",
           "secaggplus_train", "start_secaggplus"]  # fmt: skip

#: The train config's keys of the public bounds a client's reply must keep.
CLIP_KEY = "eegrad-secagg-clip"
NORM2_BOUND_KEY = "eegrad-secagg-norm2-bound"
MAX_WEIGHT_KEY = "eegrad-secagg-max-weight"
#: The record column of a round's SecAgg+ outcome ("completed" or "halted").
OUTCOME_COLUMN = "secure_aggregation"


def secaggplus_train(
    train: Callable[[Message, Context], Message],
    *,
    weighted_by_key: str = "num-examples",
    arrayrecord_key: str = "arrays",
    configrecord_key: str = "config",
) -> Callable[[Message, Context], Message]:
    r"""Wrap a message-API train function for a ``ClientApp(mods=[secaggplus_mod])`` under
    :func:`start_secaggplus`.

    The wrapped function receives the legacy train message the SecAgg+ workflow sends, calls
    ``train`` with the model and config as a message-API message (arrays under
    ``arrayrecord_key``, config under ``configrecord_key``), and replies, for the mod to mask:
    the update :math:`u = w - w_i` array by array and the extra number :math:`c\|u\|^2/B_2`,
    with ``num_examples`` the reply's ``weighted_by_key`` metric and its other (numeric)
    metrics, such as its ``cost``, in plaintext.

    Raises
    ------
    InvalidParameterError
        In the client, naming the node and the round: a coordinate of u beyond ±c (the
        workflow's clipping range), a squared norm beyond :math:`B_2`, a weight beyond
        ``max_weight``, or NaN/Inf; Flower returns it to the server as the node's error reply.

    Examples
    --------
    >>> from flwr.client.mod import secaggplus_mod
    >>> from flwr.clientapp import ClientApp
    >>> from eegrad.flower import DeviceCost, budgeted_train
    >>> from eegrad.flower.secagg import secaggplus_train
    >>> def gradient(arrays, batch_size, context, config):
    ...     return [a * 0.0 for a in arrays]  # the user's code
    >>> app = ClientApp(mods=[secaggplus_mod])
    >>> train = app.train()(secaggplus_train(budgeted_train(gradient, DeviceCost(1.0, 4.0))))
    """

    def wrapped(msg: Message, context: Context) -> Message:
        fitins = compat.recorddict_to_fitins(msg.content, keep_input=True)
        config = dict(fitins.config)
        where = reply_source(context.node_id, config.get("server-round", "?"))
        for key in (CLIP_KEY, NORM2_BOUND_KEY, MAX_WEIGHT_KEY):
            if key not in config:
                raise InvalidParameterError(
                    f"The train message of {where} has no {key!r}: the server must run the "
                    "strategy with eegrad.flower.secagg.start_secaggplus."
                )
        clip, bound = float(config[CLIP_KEY]), float(config[NORM2_BOUND_KEY])
        model = parameters_to_ndarrays(fitins.parameters)
        keys = [str(i) for i in range(len(model))]
        msg.content = RecordDict({arrayrecord_key: ArrayRecord(
            {k: array_of(a) for k, a in zip(keys, model, strict=True)}),
            configrecord_key: ConfigRecord(config)})  # fmt: skip
        reply = train(msg, context).content
        metrics = next(iter(reply.metric_records.values()))
        weight = float(metrics[weighted_by_key])
        if not weight.is_integer() or weight < 1:
            raise InvalidParameterError(
                f"The reply of {where} has weight {weight!r} ({weighted_by_key}); SecAgg+ sends "
                "it as num_examples, a whole number of samples >= 1."
            )
        if weight > float(config[MAX_WEIGHT_KEY]):
            raise InvalidParameterError(
                f"The reply of {where} has weight {weight:g} ({weighted_by_key}), beyond the "
                f"SecAgg+ max_weight {float(config[MAX_WEIGHT_KEY]):g}: raise max_weight."
            )
        record = reply[arrayrecord_key]
        update = [np.asarray(w, np.float64) - record[k].numpy().astype(np.float64)
                  for k, w in zip(keys, model, strict=True)]  # fmt: skip
        norm2 = math.fsum(float(np.sum(np.square(u))) for u in update)
        if not math.isfinite(norm2):
            raise InvalidParameterError(f"The update of {where} contains NaN or Inf.")
        top = max((float(np.max(np.abs(u))) for u in update if u.size), default=0.0)
        if top > clip:
            raise InvalidParameterError(
                f"The update of {where} has a coordinate of {top:g}, beyond the SecAgg+ "
                f"clipping range ±{clip:g} (it would be clipped silently): raise "
                "clipping_range, or lower the client's learning rate."
            )
        if norm2 > bound:
            raise InvalidParameterError(
                f"The update of {where} has a squared norm {norm2:g}, beyond norm2_bound = "
                f"{bound:g}: raise norm2_bound."
            )
        out = [*update, np.array([clip * norm2 / bound])]
        scalars = {k: v for k, v in metrics.items() if isinstance(v, int | float)}  # plaintext
        fitres = FitRes(Status(Code.OK, ""), ndarrays_to_parameters(out), int(weight), scalars)
        return Message(compat.fitres_to_recorddict(fitres, keep_input=True), reply_to=msg)

    return wrapped


class SecAggFold(RoundFold):
    r"""A round as SecAgg+ reveals it: the weighted means of the updates and of
    :math:`c\|u\|^2/B_2`, and the clients' weights and costs by node (plaintext). :meth:`sums`
    gives the
    :class:`~eegrad.spread.SpreadSums` with the quantization's bias on the spread added back
    (the module's notes)."""

    def __init__(self, *args: Any, means: list[np.ndarray], weights: list[float],
                 node_costs: dict[int, float], clip: float, norm2_bound: float,
                 quantization_range: int, max_weight: float, **kw: Any) -> None:  # fmt: skip
        super().__init__(*args, **kw)
        self.node_costs = dict(node_costs)
        self._weights = np.asarray(weights, float)
        self._means = means
        self._clip, self._bound = clip, norm2_bound
        self._T, self._max_weight = quantization_range, max_weight

    @property
    def total_weight(self) -> float:
        return float(self._weights.sum())

    def add(self, msg: Message) -> None:
        raise InvalidParameterError("A SecAgg+ round is told as its masked sum, not reply by reply.")

    def quantization_variance(self) -> float:
        r""":math:`v_q = n\delta^2/6\cdot(\omega_{max}/W)^2`, the per-coordinate variance of the
        returned mean's quantization error (:math:`\delta = 2c/T`)."""
        delta = 2.0 * self._clip / self._T
        n, W = len(self._weights), self.total_weight
        return n * delta * delta / 6.0 * (self._max_weight / W) ** 2

    def sums(self) -> SpreadSums:
        """The round's sums, the quantization's bias on the spread added back."""
        w, W = self._weights, self.total_weight
        mean_u = self._means[:-1]
        d = sum(int(a.size) for a in mean_u)
        squares = W * float(self._means[-1].reshape(-1)[0]) * self._bound / self._clip
        squares += W * d * self.quantization_variance()
        total = [cast_like(W * np.asarray(a, np.float64).reshape(ref.shape), ref.dtype)
                 for a, ref in zip(mean_u, self.model, strict=True)]  # fmt: skip
        return SpreadSums(n=len(w), total_weight=W, total_weight2=float(np.sum(w * w)),
                          weighted_sum=total, weighted_squares=squares,
                          inverse_weight_sum=float(np.sum(1.0 / w)))  # fmt: skip

    def evidence(self, reads: frozenset[str]) -> tuple[list[Any], dict[str, Any]]:
        sums = self.sums()
        return sums.mean(), sums.evidence()

    def client_metrics(self) -> dict[str, Any]:
        return {}


class _NodesOf:
    """A grid-like view of a legacy client manager: the node ids of its registered clients,
    read anew at every call (Flower registers a node that connects late in the client manager
    while a round waits for it)."""

    def __init__(self, client_manager: Any):
        self._manager = client_manager
        self._proxies: dict[int, Any] = {}

    def get_node_ids(self) -> list[int]:
        self._proxies = {int(p.node_id): p for p in self._manager.all().values()}
        return list(self._proxies)

    def proxy(self, node: int) -> Any:
        return self._proxies[int(node)]


class SecAggPlusStrategy(LegacyStrategy):
    """The legacy-API adapter that the SecAgg+ workflow drives: each round's ``configure_fit``
    is the :class:`~eegrad.flower.EEGradStrategy`'s ``configure_train`` (n, the nodes, the
    shares; the public bounds added to the config), and ``aggregate_fit`` tells it the masked
    sum (:class:`SecAggFold`) and returns its step. Made by :func:`start_secaggplus`."""

    def __init__(self, strategy: EEGradStrategy, initial_arrays: ArrayRecord, *, clip: float,
                 norm2_bound: float, quantization_range: int, max_weight: float) -> None:  # fmt: skip
        self.strategy = strategy
        self.keys = list(initial_arrays.keys())
        self.initial = initial_arrays
        self.bounds = {CLIP_KEY: clip, NORM2_BOUND_KEY: norm2_bound, MAX_WEIGHT_KEY: max_weight}
        self.quantization_range = quantization_range
        self._dtypes = [initial_arrays[k].numpy().dtype for k in self.keys]

    def as_record(self, arrays: list[np.ndarray]) -> ArrayRecord:
        """Legacy parameters' arrays as the model's record: its names and dtypes."""
        return ArrayRecord({k: Array(np.asarray(a, dtype=t))
                            for k, a, t in zip(self.keys, arrays, self._dtypes, strict=True)})  # fmt: skip

    def initialize_parameters(self, client_manager: Any) -> Parameters:
        """The model the run starts from (fresh, or the checkpoint's)."""
        return ndarrays_to_parameters([self.initial[k].numpy() for k in self.keys])

    def lose_pending_round(self) -> None:
        """A round the workflow halted before ``aggregate_fit``: withdrawn and recorded."""
        rnd = self.strategy.pending_round
        if rnd is not None:
            log(INFO, "EE-Grad: SecAgg+ halted at server round %d: the round is lost",
                rnd.server_round)  # fmt: skip
            self.strategy.lose_pending_round({OUTCOME_COLUMN: "halted"})

    def configure_fit(self, server_round: int, parameters: Parameters,
                      client_manager: Any) -> list[tuple[Any, FitIns]]:  # fmt: skip
        """EEGradStrategy's choice of n, nodes and shares, as legacy fit instructions."""
        self.lose_pending_round()
        nodes = _NodesOf(client_manager)
        config = ConfigRecord(dict(self.bounds))
        messages = self.strategy.configure_train(
            server_round, self.as_record(parameters_to_ndarrays(parameters)), config, nodes)
        key = self.strategy.configrecord_key
        return [(nodes.proxy(m.metadata.dst_node_id), FitIns(parameters, dict(m.content[key])))
                for m in messages]  # fmt: skip

    def aggregate_fit(self, server_round: int, results: list[tuple[Any, FitRes]],
                      failures: list[Any]) -> tuple[Parameters | None, dict[str, Any]]:  # fmt: skip
        """Tell EEGradStrategy the masked sum and return its step."""
        s = self.strategy
        rnd = s.pending_round
        replied = {int(proxy.node_id) for proxy, _ in results}
        failed = [nid for nid in rnd.nodes if nid not in replied]
        means = parameters_to_ndarrays(results[0][1].parameters) if results else []
        costs = {int(p.node_id): reply_cost(
            r.metrics, reply_source(p.node_id, rnd.server_round),
            cost_metric=s.budgeting.cost_metric, cost_scale=s.budgeting.cost_scale,
            required=s.budgeting.cost_required) for p, r in results}  # fmt: skip
        fold = SecAggFold(rnd.server_round, rnd.keys, rnd.model, means=means,
                          weights=[float(r.num_examples) for _, r in results], node_costs=costs,
                          clip=self.bounds[CLIP_KEY], norm2_bound=self.bounds[NORM2_BOUND_KEY],
                          quantization_range=self.quantization_range,
                          max_weight=self.bounds[MAX_WEIGHT_KEY],
                          arrayrecord_key=s.arrayrecord_key,
                          weighted_by_key=s.weighted_by_key)  # fmt: skip
        # a node that sent no masked reply kept the round waiting for the workflow's timeout
        # (charged with round_cost="slowest", as on the plain path)
        waited = failed if s.round_timeout_s is not None else []
        new, metrics = s.finish_round(fold, failed, extra={OUTCOME_COLUMN: "completed"},
                                      timed_out=waited)
        if new is None:
            return None, dict(metrics)
        return ndarrays_to_parameters([new[k].numpy() for k in self.keys]), dict(metrics)

    def configure_evaluate(self, server_round: int, parameters: Parameters,
                           client_manager: Any) -> list[Any]:  # fmt: skip
        """No federated evaluation in the SecAgg+ workflow's rounds."""
        return []

    def aggregate_evaluate(self, server_round: int, results: list[Any],
                           failures: list[Any]) -> tuple[None, dict[str, Any]]:  # fmt: skip
        """No federated evaluation."""
        return None, {}

    def evaluate(self, server_round: int, parameters: Parameters) -> None:
        """No central evaluation (evaluate the result's arrays after the run)."""
        return


def start_secaggplus(
    strategy: EEGradStrategy,
    grid: Any,
    initial_arrays: ArrayRecord,
    num_rounds: int = 3,
    *,
    num_shares: float,
    reconstruction_threshold: float,
    norm2_bound: float,
    max_weight: float = 1000.0,
    clipping_range: float = 8.0,
    quantization_range: int = 4194304,
    modulus_range: int = 4294967296,
    timeout: float | None = None,
    context: Context | None = None,
) -> Result:
    r"""Run ``num_rounds`` rounds of ``strategy`` under Flower's SecAgg+ workflow.

    Parameters
    ----------
    strategy : EEGradStrategy
        Built with ``secure_sums=True`` (its rule learns from sums; inner strategies as in that
        mode: linear ones only). Its ``checkpoint`` resumes as with :meth:`EEGradStrategy.start`.
    grid : flwr.serverapp.Grid
        The grid Flower passes to the ``ServerApp``'s main (or a
        :class:`~eegrad.flower.LocalGrid`).
    initial_arrays : ArrayRecord
        The model to start from.
    num_rounds : int
        Server rounds in all (a resumed run's included).
    num_shares, reconstruction_threshold, max_weight, clipping_range, quantization_range, modulus_range, timeout
        ``SecAggPlusWorkflow``'s parameters (Flower's documentation): c = ``clipping_range``
        bounds every coordinate of a client's update, and ``max_weight`` its weight.
    norm2_bound : float
        :math:`B_2 > 0`, the public bound on a client's :math:`\|u\|^2`.
    context : flwr.app.Context, optional
        The ``ServerApp``'s context (default: a fresh one).

    Returns
    -------
    flwr.serverapp.strategy.Result
        The final arrays and each round's train metrics (by server round); ``strategy.records``
        holds the rounds, with the column ``secure_aggregation``.
    """
    owner = "start_secaggplus"
    if not isinstance(strategy, EEGradStrategy):
        raise fail("strategy", owner, "an EEGradStrategy", type(strategy).__name__)
    if not strategy.secure_sums:
        raise fail("strategy", owner, "an EEGradStrategy built with secure_sums=True (its rule "
                   "then learns from sums alone, as SecAgg+ reveals them)", "secure_sums=False")
    norm2_bound = check_real(norm2_bound, "norm2_bound", owner, gt=0)
    workflow = SecAggPlusWorkflow(num_shares, reconstruction_threshold, max_weight=max_weight,
                                  clipping_range=clipping_range,
                                  quantization_range=quantization_range,
                                  modulus_range=modulus_range, timeout=timeout)  # fmt: skip
    arrays = strategy.begin_run(initial_arrays, num_rounds, min_clients=2,  # SecAgg+: n >= 2
                                columns=(OUTCOME_COLUMN,), timeout=timeout)  # fmt: skip
    try:
        adapter = SecAggPlusStrategy(strategy, arrays, clip=float(clipping_range),
                                     norm2_bound=norm2_bound,
                                     quantization_range=int(quantization_range),
                                     max_weight=float(max_weight))  # fmt: skip
        offset = strategy.rounds_done
        result = Result()
        result.arrays = arrays
        if offset < num_rounds:
            base = context if context is not None else Context(
                run_id=int(grid.run.run_id), node_id=0, node_config={}, state=RecordDict(),
                run_config={})  # fmt: skip
            legacy = LegacyContext(base, config=ServerConfig(num_rounds=num_rounds - offset,
                                                             round_timeout=timeout),
                                   strategy=adapter)  # fmt: skip
            try:
                DefaultWorkflow(fit_workflow=workflow)(grid, legacy)
            except STOPS as stop:  # a budget of privacy or cost spent: the rounds run stand
                log(INFO, "EE-Grad: budget reached under SecAgg+. %s", stop)
                strategy.state.stopped = f"{stop.what}: {stop}"
            adapter.lose_pending_round()  # a last round that halted
            result.arrays = adapter.as_record(
                legacy.state.array_records[MAIN_PARAMS_RECORD].to_numpy_ndarrays())
        result.train_metrics_clientapp = {r: MetricRecord(m)
                                          for r, m in sorted(strategy.state.metrics.items())}  # fmt: skip
    finally:
        strategy.end_run()  # its files' locks let go, whatever ended it
    return result
