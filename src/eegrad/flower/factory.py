"""The parts of a federated run, made from :class:`~eegrad.flower.EEGradStrategy`'s keywords,
and the one place that refuses the parts that do not fit together.

:func:`strategy_parts` turns the 24 keywords into the parts the round loop
(:class:`~eegrad.flower.round_loop.RoundLoop`) takes: the budget, the release, the aggregator,
the schedule, what the run keeps, the rule, the nodes and the run's options. Each part checks
its own arguments; whether two parts fit is decided here alone, by :data:`FITS`: one row a pair
of parts, each row a check that names the parameter, the value and why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from flwr.serverapp.strategy import Strategy

from .._random import as_generator
from .._validation import InvalidParameterTypeError, check_integer, check_real, fail
from ..costs import LinearAggregation, as_aggregation
from ..selectors import Selector
from ..selectors.anchored import DEFAULT_DEPARTURE
from .aggregators import make_aggregator
from .budgets import RoundBudget, TotalBudget, check_outlook, make_budget
from .client import check_metric_key
from .inner import inner_kind
from .keeping import RunKeeping
from .nodes import NodeWaiting
from .privacy import CentralDP
from .releases import PlainRelease, make_release
from .round_report import RoundReport, check_callback
from .schedules import EveryRound, make_schedule
from .state import Streams

__all__ = ["FITS", "RunOptions", "StrategyParts", "check_fit", "strategy_parts"]

OWNER = "EEGradStrategy"


@dataclass(frozen=True)
class RunOptions:
    """What the round loop reads besides its parts.

    Parameters
    ----------
    streams : Streams
        The run's random streams at their start (children of ``rng``).
    keys : dict
        Where a reply holds its weight, its arrays and its config (Flower's keys).
    damp_exploration : bool
        Whether a round's step is scaled by the rule's step scale.
    on_round : callable or None
        Called with each round's :class:`~eegrad.flower.RoundReport`.
    given_rule : Selector or None
        The rule the user gave (copied for each run), or None for the default.
    departure : float
        The default rule's α (:mod:`eegrad.selectors.anchored`).
    """

    streams: Streams
    keys: dict[str, str]
    damp_exploration: bool
    on_round: Callable[[RoundReport], Any] | None = None
    given_rule: Selector | None = None
    departure: float = DEFAULT_DEPARTURE


@dataclass
class StrategyParts:
    """The parts of a run and what the keywords said (:func:`strategy_parts`)."""

    budgeting: RoundBudget | TotalBudget
    release: PlainRelease
    aggregator: Any
    schedule: EveryRound
    keeping: RunKeeping
    nodes: NodeWaiting
    options: RunOptions
    #: The keywords as given and as settled (the strategy's public view of them).
    settings: dict[str, Any] = field(default_factory=dict)

    def loop_arguments(self) -> dict[str, Any]:
        """The round loop's arguments."""
        return {"budgeting": self.budgeting, "release": self.release,
                "aggregator": self.aggregator, "schedule": self.schedule,
                "keeping": self.keeping, "nodes": self.nodes, "options": self.options}  # fmt: skip


def _schedule_and_budget(p: StrategyParts) -> None:
    """A total budget's rounds are chosen one by one for their cost: no T-round steps."""
    p.schedule.check(OWNER, total_budget=True if p.budgeting.budget is None else None)


def _rule_and_budget(p: StrategyParts) -> None:
    """A rule whose outlook the budget cannot tell it runs on another objective: refused."""
    if p.options.given_rule is not None:
        check_outlook(p.budgeting, p.options.given_rule, OWNER)


def _release_and_budget(p: StrategyParts) -> None:
    """Under central DP no client's reported cost may choose n."""
    if p.release.adds_noise:
        p.budgeting.check_private(OWNER)


def _aggregator_and_the_rest(p: StrategyParts) -> None:
    """An inner strategy steps every round with its own rule, evaluates itself, and needs every
    reply where its aggregate is no mean."""
    s = p.settings
    if s["strategy"] is not None:
        p.aggregator.check(OWNER, steps=p.schedule.name, server_lr=s["server_lr"],
                           fraction_evaluate=s["fraction_evaluate"],
                           reveals_replies=p.release.reveals_replies,
                           release_mode=p.release.mode,
                           damped=p.options.damp_exploration)  # fmt: skip


#: Which parts fit together: (the parts, the check that refuses a pair that does not, naming the
#: parameter, the value and why). Checked in order by :func:`check_fit`; the checks of two
#: arguments of one part (B per round and a total, secure sums and central DP, a cost unit and
#: a round cost) are that part's own, in its constructor.
FITS: tuple[tuple[str, Callable[[StrategyParts], None]], ...] = (
    ("schedule × budget", _schedule_and_budget),
    ("rule × budget", _rule_and_budget),
    ("release × budget", _release_and_budget),
    ("aggregator × schedule, release, step, evaluation", _aggregator_and_the_rest),
)


def check_fit(parts: StrategyParts) -> None:
    """Refuse parts that do not fit together (:data:`FITS`)."""
    for _, check in FITS:
        check(parts)


def _keys(strategy: Strategy | None, given: dict[str, str | None]) -> dict[str, str]:
    """Flower's record keys: each as given, or the inner strategy's, or Flower's default; one
    given that differs from the inner strategy's is refused."""
    defaults = {"weighted_by_key": "num-examples", "arrayrecord_key": "arrays",
                "configrecord_key": "config"}  # fmt: skip
    keys = {}
    for name, default in defaults.items():
        theirs = getattr(strategy, name, None)
        mine = given[name]
        if mine is not None and theirs is not None and mine != theirs:
            raise fail(name, OWNER, f"the inner strategy's {theirs!r} (or None, to take it)",
                       mine)  # fmt: skip
        keys[name] = check_metric_key(mine or theirs or default, name, OWNER)
    return keys


def check_baseline(strategy: Strategy, selector: Selector | None) -> None:
    """Refuse, for the default rule, an inner strategy whose own schedule asks no client a
    round (its ``fraction_train`` 0 and no ``min_train_nodes``): the default is anchored on
    that schedule (:mod:`eegrad.selectors.anchored`)."""
    fraction = getattr(strategy, "fraction_train", None)
    least = getattr(strategy, "min_train_nodes", 0) or 0
    if selector is not None or isinstance(fraction, bool) or not isinstance(fraction, int | float):
        return
    if not 0 < float(fraction) <= 1 and least < 1:
        raise fail("strategy", OWNER, f"a strategy whose own rounds train clients: "
                   f"{type(strategy).__name__}'s fraction_train = {fraction!r} with no "
                   "min_train_nodes asks none, and eegrad's default rule is anchored on your "
                   "strategy's n each round (give the fraction_train your FedAvg runs with, in "
                   "(0, 1], or a selector)", strategy)  # fmt: skip


def strategy_parts(budget: float | None = None, c_min: float | None = None, *,
                   total_budget: Any = None, round_cost: str = "sum",
                   cost_metric: str | None = "cost", cost_scale: float = 1.0,
                   aggregation: Any = None, selector: Selector | None = None,
                   departure: float = DEFAULT_DEPARTURE, steps: str = "every-round", T: int | None = None, server_lr: float = 1.0,
                   damp_exploration: bool | None = None, rng: Any = 0,
                   min_available_nodes: int | None = None, fraction_evaluate: float = 0.0,
                   csv_path: str | Path | None = None, checkpoint: str | Path | None = None,
                   privacy: CentralDP | None = None, secure_sums: bool = False,
                   strategy: Strategy | None = None, weighted_by_key: str | None = None,
                   arrayrecord_key: str | None = None, configrecord_key: str | None = None,
                   on_round: Callable[[RoundReport], Any] | None = None,
                   ) -> StrategyParts:  # fmt: skip
    """The parts of :class:`~eegrad.flower.EEGradStrategy`'s keywords (documented there), each
    checked, then checked to fit together (:func:`check_fit`)."""
    aggregation = LinearAggregation(b=0.0) if aggregation is None else as_aggregation(
        aggregation, OWNER)  # fmt: skip
    if cost_metric is None and total_budget is None:
        raise fail("cost_metric", OWNER, "a metric's name with a per-round budget (the "
                   "clients report what they spent of their share)", None)  # fmt: skip
    cost_metric = None if cost_metric is None else check_metric_key(cost_metric, "cost_metric",
                                                                    OWNER)  # fmt: skip
    cost_scale = check_real(cost_scale, "cost_scale", OWNER, gt=0)
    budgeting = make_budget(budget, total_budget, c_min, aggregation, round_cost=round_cost,
                            cost_metric=cost_metric, cost_scale=cost_scale, owner=OWNER)  # fmt: skip
    schedule = make_schedule(steps, T, OWNER)
    if selector is not None and not isinstance(selector, Selector):
        raise InvalidParameterTypeError(
            f"The 'selector' parameter of {OWNER} must be a Selector. Got {selector!r} instead."
        )
    server_lr = check_real(server_lr, "server_lr", OWNER, gt=0)
    departure = check_real(departure, "departure", OWNER, ge=0, le=1)
    release = make_release(privacy, bool(secure_sums), OWNER)
    if damp_exploration is None:  # damped where the release adds known noise
        damp_exploration = release.adds_noise
    if not isinstance(damp_exploration, bool | np.bool_):
        raise InvalidParameterTypeError(
            f"The 'damp_exploration' parameter of {OWNER} must be a bool or None. Got "
            f"{damp_exploration!r} instead."
        )
    if min_available_nodes is None:  # the wrapped strategy's, as its own start would wait
        min_available_nodes = getattr(strategy, "min_available_nodes", None) or 1
    min_available_nodes = check_integer(min_available_nodes, "min_available_nodes", OWNER, ge=1)
    fraction_evaluate = check_real(fraction_evaluate, "fraction_evaluate", OWNER, ge=0, le=1)
    keeping = RunKeeping(csv_path, checkpoint, OWNER)
    on_round = check_callback(on_round, OWNER)
    if strategy is not None:
        inner_kind(strategy)  # a type that is no message-API strategy, refused first
        check_baseline(strategy, selector)
    keys = _keys(strategy, {"weighted_by_key": weighted_by_key,
                            "arrayrecord_key": arrayrecord_key,
                            "configrecord_key": configrecord_key})  # fmt: skip
    aggregator = make_aggregator(strategy, server_lr=server_lr,
                                 fraction_evaluate=fraction_evaluate, keys=keys,
                                 checkpoint=keeping.checkpoint is not None)  # fmt: skip
    # The first three children are those of spawn(2) and spawn(3): adding a stream changes
    # nothing else. Evaluation samples from its own, so turning it on changes no training.
    streams = Streams(*as_generator(rng, OWNER).spawn(4))
    options = RunOptions(streams=streams, keys=keys, damp_exploration=bool(damp_exploration),
                         on_round=on_round, given_rule=selector, departure=departure)  # fmt: skip
    # the default rule learns from a spread: two clients at the first round
    nodes = NodeWaiting(min_available_nodes, 2 if selector is None else 1)
    settings = {"aggregation": aggregation, "cost_metric": cost_metric,
                "cost_scale": cost_scale, "round_cost": round_cost, "server_lr": server_lr,
                "privacy": privacy, "secure_sums": bool(secure_sums),
                "min_available_nodes": min_available_nodes,
                "fraction_evaluate": fraction_evaluate, "strategy": strategy}  # fmt: skip
    parts = StrategyParts(budgeting, release, aggregator, schedule, keeping, nodes, options,
                          settings)  # fmt: skip
    check_fit(parts)
    return parts
