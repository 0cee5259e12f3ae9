r"""Who configures a round's messages and makes its step, as a part
:class:`~eegrad.flower.EEGradStrategy` holds: the built-in step, or the user's own Flower
strategy inside.

Two aggregators, one interface:

* :class:`BuiltInStep` — the strategy's own messages and the step
  :math:`w \leftarrow w - \eta\rho\bar u` (``server_lr`` times FedAvg's aggregate, ρ the round's
  step scale), its own sampled evaluation (``fraction_evaluate``);
* :class:`InnerStrategy` — the user's strategy (:mod:`eegrad.flower.inner`): its messages for
  exactly the n nodes eegrad chose, its aggregate of one synthetic reply (a linear strategy) or
  of every reply (FedMedian, FedTrimmedAvg), its evaluation, and its run state, reset before
  every run and kept in the checkpoint.

A strategy asks its aggregator for the round's messages (:meth:`~BuiltInStep.train_messages`),
whether to keep the replies (:attr:`~BuiltInStep.keeps_replies`), the step
(:meth:`~BuiltInStep.aggregate`), the evaluation, and the state a checkpoint keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from logging import INFO
from typing import Any

import numpy as np
from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords
from flwr.supercore import log

from .._validation import fail
from .inner import (
    REPLIES,
    UnsupportedStrategyError,
    configure_inner,
    inner_hyperparameters,
    inner_kind,
    inner_snapshot,
    inner_state,
    load_inner_state,
    mean_reply,
    restore_snapshot,
)
from .model_arrays import array_of, cast_like
from .replies import RoundFold

__all__ = ["BuiltInStep", "InnerStrategy", "make_aggregator"]


class BuiltInStep:
    """The strategy's own messages and step, ``server_lr`` times FedAvg's aggregate.

    Parameters
    ----------
    server_lr : float
        η of the step, > 0.
    fraction_evaluate : float
        Fraction of the nodes asked to evaluate after each round (0: none).
    keys : dict
        ``arrayrecord_key``, ``configrecord_key`` and ``weighted_by_key``: where a message holds
        the arrays, the config and a reply's weight.
    """

    #: Whether the aggregate needs every reply (the server then keeps them).
    keeps_replies = False

    def __init__(self, server_lr: float, fraction_evaluate: float, keys: dict[str, str]) -> None:
        self.server_lr = server_lr
        self.fraction_evaluate = fraction_evaluate
        self.keys = keys

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint must share with this aggregator."""
        return {"strategy": None}

    def settings(self) -> dict[str, float]:
        """The step's η and the share of nodes that evaluate (a checkpoint's fingerprint)."""
        return {"server_lr": self.server_lr, "fraction_evaluate": self.fraction_evaluate}

    def reset(self) -> None:
        """Before a fresh run: nothing to reset."""

    def summary(self) -> None:
        """Log the step."""
        log(INFO, "\t└──> Aggregate: the built-in step, server lr %g × FedAvg's", self.server_lr)

    def train_messages(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                       grid: Grid, nodes: list[int]) -> list[Message]:  # fmt: skip
        """One train message a node, the model and the round's config."""
        record = RecordDict({self.keys["arrayrecord_key"]: arrays,
                             self.keys["configrecord_key"]: config})  # fmt: skip
        return [Message(content=record, message_type=MessageType.TRAIN, dst_node_id=nid)
                for nid in nodes]  # fmt: skip

    def aggregate(self, server_round: int, rnd: dict[str, Any], G: list[Any], scale: float,
                  fold: RoundFold, kept: Sequence[Message], metrics: dict[str, Any],
                  ) -> tuple[ArrayRecord, dict[str, Any] | None]:  # fmt: skip
        r""":math:`w \leftarrow w - \eta\rho G`, array by array in the model's dtypes (ρ the
        round's ``scale``); the clients' ``metrics`` (their weighted means) as they are."""
        out = {}
        for k, w, g in zip(rnd.keys, rnd.model, G, strict=True):
            # w − ηρg with one temporary (the same values as w − (ηρ)·g)
            new = np.multiply(g.reshape(w.shape), -(self.server_lr * scale),
                              dtype=np.result_type(w, g))  # fmt: skip
            new += w
            out[k] = array_of(new if new.dtype == w.dtype else cast_like(new, w.dtype))
        return ArrayRecord(out), metrics

    def state(self) -> None:
        """The run state a checkpoint keeps: none."""
        return

    def load_state(self, state: Any) -> None:
        """Nothing to load."""

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid, rng: np.random.Generator) -> list[Message]:  # fmt: skip
        """``fraction_evaluate`` of the nodes, drawn from ``rng`` (the run's evaluation
        stream), asked to evaluate the model."""
        if self.fraction_evaluate == 0.0:
            return []
        nodes = sorted(int(i) for i in grid.get_node_ids())
        k = max(1, round(self.fraction_evaluate * len(nodes)))
        pick = rng.choice(len(nodes), size=k, replace=False)
        cfg = ConfigRecord(dict(config))
        cfg["server-round"] = server_round
        record = RecordDict({self.keys["arrayrecord_key"]: arrays,
                             self.keys["configrecord_key"]: cfg})  # fmt: skip
        return [Message(content=record, message_type=MessageType.EVALUATE, dst_node_id=nodes[i])
                for i in sorted(pick)]  # fmt: skip

    def aggregate_evaluate(self, server_round: int,
                           replies: Iterable[Message]) -> MetricRecord | None:  # fmt: skip
        """The weighted mean of the evaluation replies' metrics."""
        good = [m.content for m in replies if not m.has_error()]
        return aggregate_metricrecords(good, self.keys["weighted_by_key"]) if good else None


class InnerStrategy:
    """The user's Flower strategy inside (:mod:`eegrad.flower.inner`).

    Parameters
    ----------
    strategy : flwr.serverapp.strategy.Strategy
        The user's strategy (message API; refused by name where the variance model of n does
        not describe its aggregate).
    keys : dict
        ``arrayrecord_key`` and ``weighted_by_key`` of the synthetic reply.
    checkpoint : bool
        Whether a checkpoint is asked for: an attribute of the strategy that one cannot hold
        is then refused now, naming it.
    """

    def __init__(self, strategy: Strategy, keys: dict[str, str], *, checkpoint: bool) -> None:
        #: The user's strategy.
        self.strategy = strategy
        #: How it aggregates (:func:`~eegrad.flower.inner.inner_kind`).
        self.kind = inner_kind(strategy)
        self.keys = keys
        self._initial = inner_snapshot(strategy)
        if checkpoint:
            inner_state(strategy)  # what a checkpoint cannot hold is refused now, by name

    @property
    def keeps_replies(self) -> bool:
        """Whether its aggregate needs every reply (FedMedian, FedTrimmedAvg)."""
        return self.kind == REPLIES

    def check(self, owner: str, *, steps: str, server_lr: float, fraction_evaluate: float,
              reveals_replies: bool, release_mode: str, damped: bool) -> None:  # fmt: skip
        """Refuse the settings the inner strategy cannot take, naming them."""
        name = type(self.strategy).__name__
        if steps != "every-round":
            raise fail("steps", owner, f"'every-round' with an inner strategy ({name} steps "
                       "every round)", steps)  # fmt: skip
        if server_lr != 1.0:
            raise fail("server_lr", owner, f"1 with an inner strategy ({name}'s own step "
                       "applies, e.g. FedAdam's eta)", server_lr)  # fmt: skip
        if fraction_evaluate != 0.0:
            raise fail("fraction_evaluate", owner, f"0 with an inner strategy (evaluation is "
                       f"{name}'s: set its fraction_evaluate)", fraction_evaluate)  # fmt: skip
        if self.keeps_replies:
            why = (f"{name} aggregates every reply itself, so the round's mean cannot stand for "
                   "them")
            if not reveals_replies:
                raise UnsupportedStrategyError(
                    f"The 'strategy' parameter of {owner} cannot be a {name} with "
                    f"{release_mode}: {why}, and a private release or secure sums reveal only "
                    "the mean. Use a linear strategy (FedAvg, FedAvgM, FedProx, FedAdam, "
                    "FedYogi, FedAdagrad)."
                )
            if damped:
                raise fail("damp_exploration", owner, f"False with {name} ({why}: its step "
                           "cannot be scaled)", True)  # fmt: skip

    def settings(self) -> dict[str, float]:
        """η 1 (its own step applies) and no evaluation of eegrad's (its own evaluates)."""
        return {"server_lr": 1.0, "fraction_evaluate": 0.0}

    def fingerprint(self) -> dict[str, Any]:
        """Its class and its hyperparameters as given."""
        return {"strategy": type(self.strategy).__name__,
                **{f"strategy.{k}": v
                   for k, v in inner_hyperparameters(self.strategy).items()}}  # fmt: skip

    def reset(self) -> None:
        """Before a fresh run: its run state as it was given."""
        restore_snapshot(self.strategy, self._initial)

    def summary(self) -> None:
        """Log it, and its own summary."""
        log(INFO, "\t└──> Inner strategy: %s (%s aggregate)", type(self.strategy).__name__,
            self.kind)  # fmt: skip
        sampled = [f"{k} = {getattr(self.strategy, k)!r}" for k in ("fraction_train",
                   "min_train_nodes") if hasattr(self.strategy, k)]  # fmt: skip
        if sampled:
            log(INFO, "\t    its %s: replaced by eegrad's n each round (its Sampling below is "
                "not used to train)", ", ".join(sampled))  # fmt: skip
        self.strategy.summary()

    def train_messages(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                       grid: Grid, nodes: list[int]) -> list[Message]:  # fmt: skip
        """Its messages for exactly ``nodes``."""
        return configure_inner(self.strategy, server_round, arrays, config, grid, nodes)

    def aggregate(self, server_round: int, rnd: dict[str, Any], G: list[Any], scale: float,
                  fold: RoundFold, kept: Sequence[Message], metrics: dict[str, Any],
                  ) -> tuple[ArrayRecord | None, dict[str, Any] | None]:  # fmt: skip
        """Its aggregate of the round: of one synthetic reply :math:`w - \\rho G` with the
        round's total weight and the clients' ``metrics`` (a linear strategy), or of the
        replies ``kept``."""
        given = list(kept) if self.keeps_replies else [mean_reply(
            rnd.model, rnd.keys, G, scale, fold.total_weight, metrics,
            arrayrecord_key=self.keys["arrayrecord_key"],
            weighted_by_key=self.keys["weighted_by_key"])]  # fmt: skip
        return self.strategy.aggregate_train(server_round, given)

    def state(self) -> dict[str, Any]:
        """Its run state, for the checkpoint (:func:`~eegrad.flower.inner.inner_state`)."""
        return inner_state(self.strategy)

    def load_state(self, state: dict[str, Any] | None) -> None:
        """Its run state from a checkpoint's."""
        if state is not None:
            load_inner_state(self.strategy, state)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid, rng: np.random.Generator) -> Iterable[Message]:  # fmt: skip
        """Its evaluation."""
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int,
                           replies: Iterable[Message]) -> MetricRecord | None:  # fmt: skip
        """Its aggregate of the evaluation."""
        return self.strategy.aggregate_evaluate(server_round, replies)


def make_aggregator(strategy: Strategy | None, *, server_lr: float, fraction_evaluate: float,
                    keys: dict[str, str], checkpoint: bool) -> BuiltInStep | InnerStrategy:  # fmt: skip
    """The aggregator of ``EEGradStrategy``'s arguments: the built-in step, or the user's
    strategy inside."""
    if strategy is None:
        return BuiltInStep(server_lr, fraction_evaluate, keys)
    return InnerStrategy(strategy, keys, checkpoint=checkpoint)
