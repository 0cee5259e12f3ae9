r"""A user's Flower strategy inside :class:`~eegrad.flower.EEGradStrategy`.

``EEGradStrategy(..., strategy=FedAdam(...))`` keeps the user's strategy for what it does —
the server's optimizer, a robust aggregate, the evaluation — and takes over only what eegrad
decides: how many clients a round asks (n), which nodes, and each one's share of the budget.
As Flower's DP wrappers do, it holds the strategy, delegates to it and post-processes.

**Sampling.** The inner strategy samples from a view of the grid that holds only the n nodes
eegrad picked (:class:`NodesGiven`), with its sampling fractions set to take them all for the
call (:func:`configure_inner`): Flower's ``fraction_train`` rounds down (22 nodes at a fraction
15/22 give 14), so a fraction could never ask exactly n. Its messages are checked to go to
exactly those nodes; it never waits for a node it was not given.

**Aggregation.** What the inner strategy is given depends on its aggregate (:func:`inner_kind`):

* ``"linear"`` — a weighted mean of the replies followed by a server step (FedAvg, FedAvgM,
  FedProx, FedAdam, FedYogi, FedAdagrad): one synthetic reply (:func:`mean_reply`), the model
  minus the round's mean update :math:`w - \rho\bar u` with the round's total weight. Its weighted
  mean is the mean of the n replies, so the inner strategy steps as it would with all n of them,
  while the server folds each reply and drops it (memory O(d), whatever n is); the same reply
  carries a private release (``privacy=``) or a mean from sums alone (``secure_sums=True``), and
  the step scale ρ of ``damp_exploration``.
* ``"replies"`` — an aggregate that needs every reply (FedMedian, FedTrimmedAvg, or a user's
  subclass that overrides ``aggregate_train``): the replies themselves, after eegrad has read
  them for the spread (FedMedian pops arrays from the replies it is given). Memory O(n·d), as the
  aggregate needs; not available with privacy or secure sums, which reveal only a mean.

**Refused** (:class:`UnsupportedStrategyError`), because the variance model of n — the round's
update as a mean of n clients' updates, whose noise shrinks with n — does not describe them:

* QFedAvg: its step is a fairness-weighted combination with weights from the clients' losses
  raised to q, not a mean of the updates;
* FedXgbBagging and FedXgbCyclic: they combine or pass on trees, not arrays of one model;
* Krum and MultiKrum: the update is the one (or the m) replies closest to their neighbours, chosen
  by distances that change with n; Krum's step does not average, so its noise does not fall as
  1/n; MultiKrum's averages a number m fixed by the user, not the n asked;
* Bulyan: MultiKrum's selection followed by a trimmed mean of a size set by the number of
  Byzantine nodes, again not the n asked;
* Flower's DP wrappers anywhere in the chain of ``.strategy``: they calibrate their noise to a
  fixed number of clients (use ``privacy=CentralDP(...)``);
* legacy (``flwr.server.strategy``) strategies: only the message API's strategies take part;
* a strategy that overrides ``start``: eegrad runs the rounds and calls the strategy's round
  methods, never its ``start``, which would silently not run.

**State.** What a run may change of the inner strategy is every attribute but its code and the
sampling ones eegrad sets: FedAdam's moments, FedAvgM's momentum, the current arrays, and a
number the strategy counts with (a round counter, a decaying learning rate), nothing guessed
from its type. :func:`inner_snapshot` copies them as the strategy was given, and
:func:`restore_snapshot` sets them back, so that every run starts from the strategy as given.
With a checkpoint they go into it (:func:`inner_state`, checked when the checkpoint is asked
for: an attribute that cannot be written is refused then, naming it) and are loaded back
(:func:`load_inner_state`), a wrapped strategy's (a wrapper's ``.strategy``) within. The
attributes that are numbers, strings or bools as given (:func:`inner_hyperparameters`) go into
the checkpoint's fingerprint, so a checkpoint of another inner strategy, or of other
hyperparameters, is refused naming the difference.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePath
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
from flwr.serverapp.strategy import Strategy

from .._validation import InvalidParameterError, InvalidParameterTypeError
from .model_arrays import array_of
from .privacy import fixed_n_wrappers, strategy_chain

__all__ = ["LINEAR", "REPLIES", "NodesGiven", "UnsupportedStrategyError", "configure_inner",
           "inner_hyperparameters", "inner_kind", "inner_snapshot", "inner_state",
           "load_inner_state", "mean_reply", "restore_snapshot"]  # fmt: skip

#: The aggregate is a weighted mean of the replies, then a server step: one synthetic reply.
LINEAR = "linear"
#: The aggregate needs every reply (a median, a trimmed mean).
REPLIES = "replies"

#: The sampling attributes the inner strategy's configure_train reads, set to take every node
#: it is given (eegrad chooses n): not hyperparameters of the run.
SAMPLING = ("fraction_train", "min_train_nodes", "min_available_nodes")


class UnsupportedStrategyError(InvalidParameterError):
    """An inner strategy whose aggregate the variance model of n does not describe; the message
    names it and says why."""


def _classes() -> tuple[tuple[type, ...], dict[type, str]]:
    """Flower's linear strategies, and those refused with the reason."""
    from flwr.serverapp import strategy as fs

    linear = (fs.FedAvg, fs.FedAvgM, fs.FedProx, fs.FedAdam, fs.FedYogi, fs.FedAdagrad)
    refused = {
        fs.QFedAvg: "its step combines the updates with weights from the clients' losses "
                    "raised to q, not as their mean",
        fs.FedXgbBagging: "it combines trees, not the arrays of one model",
        fs.FedXgbCyclic: "it passes one client's trees on, not a mean of updates",
        fs.Krum: "its update is the single reply closest to its neighbours, so its noise does "
                 "not fall with the n clients asked",
        fs.MultiKrum: "it averages a number of replies fixed by num_nodes_to_select, chosen by "
                      "distances that change with n, not the n clients asked",
        fs.Bulyan: "it trims to a number of replies set by num_malicious_nodes, not the n "
                   "clients asked",
    }  # fmt: skip
    return linear, refused


def inner_kind(strategy: Any) -> str:
    """How an inner strategy aggregates: :data:`LINEAR` or :data:`REPLIES`; raises
    :class:`UnsupportedStrategyError` for one the variance model of n does not describe, and
    :class:`~eegrad.InvalidParameterTypeError` for what is not a message-API strategy."""
    if not isinstance(strategy, Strategy):
        raise InvalidParameterTypeError(
            "The 'strategy' parameter of EEGradStrategy must be a Flower message-API strategy "
            f"(flwr.serverapp.strategy.Strategy) or None. Got {type(strategy).__name__} "
            "instead (strategies of the legacy flwr.server.strategy API cannot take part)."
        )
    name = type(strategy).__name__
    for inner in strategy_chain(strategy):
        if isinstance(inner, fixed_n_wrappers()):
            raise UnsupportedStrategyError(
                f"The 'strategy' parameter of EEGradStrategy holds Flower's "
                f"{type(inner).__name__}, which calibrates its noise to a fixed "
                f"num_sampled_clients; EEGradStrategy asks a different n every round. Pass the "
                "strategy it wraps and privacy=CentralDP(...), which calibrates every round to "
                "its own n."
            )
    linear, refused = _classes()
    for cls, why in refused.items():
        if isinstance(strategy, cls):
            raise UnsupportedStrategyError(
                f"The 'strategy' parameter of EEGradStrategy cannot be a {name}: {why}. The "
                "choice of n models the round's update as a mean of n clients' updates."
            )
    if type(strategy).start is not Strategy.start:
        raise UnsupportedStrategyError(
            f"The 'strategy' parameter of EEGradStrategy cannot be a {name} that overrides "
            "start(): EEGradStrategy runs the rounds itself and calls the strategy's "
            "configure_train, aggregate_train, configure_evaluate and aggregate_evaluate, never "
            "its start, so what that start does would silently not happen. Do it around "
            "EEGradStrategy.start in your ServerApp (e.g. open the experiment tracker before, "
            "log strategy.records after)."
        )
    own = type(strategy).aggregate_train  # a subclass that overrides it is not known linear
    if any(own is cls.aggregate_train for cls in linear):
        return LINEAR
    return REPLIES


class NodesGiven:
    """A view of a Flower ``Grid`` whose ``get_node_ids`` holds only the given nodes; every
    other call goes to the grid."""

    def __init__(self, grid: Any, nodes: Iterable[int]):
        self._grid = grid
        self._nodes = [int(i) for i in nodes]

    def get_node_ids(self) -> list[int]:
        """The nodes given (Grid API)."""
        return list(self._nodes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)


@contextmanager
def _sampling_all(strategy: Any) -> Iterator[None]:
    """Within the block, the strategy's sampling takes every node it sees (the attributes of
    :data:`SAMPLING` it has are restored after)."""
    saved = {k: getattr(strategy, k) for k in SAMPLING if hasattr(strategy, k)}
    try:
        for k in saved:
            setattr(strategy, k, 1.0 if k == "fraction_train" else 0)
        yield
    finally:
        for k, v in saved.items():
            setattr(strategy, k, v)


def configure_inner(strategy: Any, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                    grid: Any, nodes: list[int]) -> list[Message]:  # fmt: skip
    """The inner strategy's train messages for exactly ``nodes`` (its ``configure_train`` on a
    view of the grid that holds them, sampling them all); raises naming the strategy if its
    messages go elsewhere."""
    with _sampling_all(strategy):
        messages = list(strategy.configure_train(server_round, arrays, config,
                                                 NodesGiven(grid, nodes)))  # fmt: skip
    sent = sorted(int(m.metadata.dst_node_id) for m in messages)
    if sent != sorted(nodes):
        raise InvalidParameterError(
            f"The inner strategy {type(strategy).__name__} configured server round "
            f"{server_round} for nodes {sent}, not the {len(nodes)} nodes it was given "
            f"({sorted(nodes)}): its configure_train must send one message to each node the "
            "grid lists."
        )
    # In eegrad's order, not the inner strategy's draw: the replies are then folded in the same
    # order in every run of the same seed (a resumed run's included).
    order = {node: i for i, node in enumerate(nodes)}
    return sorted(messages, key=lambda m: order[int(m.metadata.dst_node_id)])


def mean_reply(model: list[np.ndarray], keys: list[str], mean: list[np.ndarray], scale: float,
               total_weight: float, metrics: dict[str, Any], *, arrayrecord_key: str,
               weighted_by_key: str) -> Message:  # fmt: skip
    r"""One reply that stands for the round: arrays :math:`w - \rho\bar u` (in the model's
    dtypes) and the metric record ``{weighted_by_key: total_weight, **metrics}``. A linear
    inner strategy's weighted mean of it is the mean of the replies it stands for."""
    out = {}
    for k, w, g in zip(keys, model, mean, strict=True):
        new = w - scale * np.asarray(g).reshape(w.shape)
        out[k] = array_of(np.asarray(new, dtype=w.dtype))
    record = RecordDict({arrayrecord_key: ArrayRecord(out),
                         "metrics": MetricRecord({**metrics, weighted_by_key: total_weight})})  # fmt: skip
    return Message(content=record, dst_node_id=0, message_type=MessageType.TRAIN)


def _is_hyperparameter(value: Any) -> bool:
    return isinstance(value, bool | int | float | str | np.generic)


def inner_hyperparameters(strategy: Any) -> dict[str, Any]:
    """The inner strategy's hyperparameters: its attributes that are numbers, strings or bools,
    less the sampling ones eegrad sets (:data:`SAMPLING`); by name, sorted."""
    return {k: (v.item() if isinstance(v, np.generic) else v)
            for k, v in sorted(vars(strategy).items())
            if _is_hyperparameter(v) and k not in SAMPLING}  # fmt: skip


def _plain(value: Any, where: str) -> Any:
    """A copy of ``value`` in checkpointable terms (an ArrayRecord as a tagged dict of arrays, a
    path as its string, a random generator as itself — :mod:`eegrad.checkpoint` writes its
    state —, a wrapped strategy as its own state)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, ArrayRecord):
        return {"__arrayrecord__": {k: np.array(a.numpy()) for k, a in value.items()}}
    if isinstance(value, np.ndarray | np.generic):
        return np.array(value)
    if isinstance(value, PurePath):
        return {"__path__": str(value)}
    if isinstance(value, np.random.Generator):
        return copy.deepcopy(value)
    if isinstance(value, Strategy):
        return {"__strategy__": inner_state(value)}
    if isinstance(value, dict):
        return {k: _plain(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v, f"{where}[{i}]") for i, v in enumerate(value))
    raise InvalidParameterError(
        f"The inner strategy's attribute {where} is a {type(value).__name__}, which eegrad "
        "cannot checkpoint (numbers, strings, arrays, ArrayRecords and lists or dicts of them "
        "can be)."
    )


def _unplain(value: Any, current: Any = None) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__arrayrecord__"}:
            return ArrayRecord({k: Array(np.ascontiguousarray(a))
                                for k, a in value["__arrayrecord__"].items()})  # fmt: skip
        if set(value) == {"__path__"}:
            return type(current)(value["__path__"]) if isinstance(current, PurePath) else \
                Path(value["__path__"])  # fmt: skip
        if set(value) == {"__strategy__"} and isinstance(current, Strategy):
            load_inner_state(current, value["__strategy__"])
            return current
        return {k: _unplain(v) for k, v in value.items()}
    if isinstance(value, np.random.Generator):
        return copy.deepcopy(value)
    if isinstance(value, list | tuple):
        return type(value)(_unplain(v) for v in value)
    if isinstance(value, np.ndarray):
        return np.array(value)
    return value


def _run_attributes(strategy: Any) -> dict[str, Any]:
    """The attributes a run may change: all but code and the sampling ones eegrad sets."""
    return {k: v for k, v in vars(strategy).items()
            if k not in SAMPLING and not (callable(v) and not isinstance(v, Strategy))}  # fmt: skip


def inner_state(strategy: Any) -> dict[str, Any]:
    """A checkpointable copy of the inner strategy's run state (the module's notes: every
    attribute but code and the sampling ones); raises naming an attribute that cannot be
    written."""
    return {k: _plain(v, f"{type(strategy).__name__}.{k}")
            for k, v in _run_attributes(strategy).items()}  # fmt: skip


def load_inner_state(strategy: Any, state: dict[str, Any]) -> None:
    """Set the inner strategy's run state from :func:`inner_state`'s copy (copied again, so the
    state can be loaded twice; a wrapped strategy's in place)."""
    for k, v in state.items():
        setattr(strategy, k, _unplain(v, getattr(strategy, k, None)))


def inner_snapshot(strategy: Any) -> dict[str, Any]:
    """A deep copy of the inner strategy's run attributes as it is now (as given): what
    :func:`restore_snapshot` sets back before every run. An attribute that cannot be copied (a
    lock, a connection) is left out, and so left as the run leaves it."""
    out: dict[str, Any] = {}
    for k, v in _run_attributes(strategy).items():
        if isinstance(v, Strategy):  # a wrapped strategy: its own attributes, kept in place
            out[k] = _Nested(inner_snapshot(v))
            continue
        with contextlib.suppress(Exception):  # what cannot be copied is not reset
            out[k] = copy.deepcopy(v)
    return out


class _Nested(dict):
    """A wrapped strategy's snapshot (restored into the object the wrapper holds)."""


def restore_snapshot(strategy: Any, snapshot: dict[str, Any]) -> None:
    """Set the inner strategy's run attributes back to :func:`inner_snapshot`'s (copied again,
    so a snapshot serves every run; a wrapped strategy's in place, the object the wrapper
    holds kept)."""
    for k, v in snapshot.items():
        if isinstance(v, _Nested):
            restore_snapshot(getattr(strategy, k), v)
        else:
            setattr(strategy, k, copy.deepcopy(v))
