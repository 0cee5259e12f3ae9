"""The common case in one call: your Flower strategy, a total budget in a unit you already
count, and nothing changed in your clients.

:func:`choose_clients` is to :class:`~eegrad.flower.EEGradStrategy` what Opacus's
``make_private`` is to its engine: one call in the user's units. It returns an
``EEGradStrategy`` that wraps your strategy (FedAvg, FedAdam, …) and, each round, chooses how
many clients to ask for the most progress per unit of the budget, until the budget is spent.
"""

from __future__ import annotations

from typing import Any

from flwr.serverapp.strategy import Strategy

from .._validation import InvalidParameterTypeError, check_real, fail
from ..costs import LinearAggregation, as_aggregation
from .budgets import FedAvgSpend, TotalBudget
from .client import check_metric_key
from .inner import inner_kind
from .strategy import EEGradStrategy

__all__ = ["UNITS", "choose_clients"]

#: The named units of :func:`choose_clients`'s budget (any other string names a metric).
UNITS = ("trainings", "samples")


def choose_clients(strategy: Strategy, budget: float | None = None, unit: str = "trainings",
                   **options: Any) -> EEGradStrategy:  # fmt: skip
    r"""Let eegrad choose how many clients each round asks, within your rounds and a total
    budget — by default, what your strategy would spend in them.

    Parameters
    ----------
    strategy : flwr.serverapp.strategy.Strategy
        Your strategy (message API): FedAvg, FedAvgM, FedProx, FedAdam, FedYogi, FedAdagrad,
        FedMedian, FedTrimmedAvg. It aggregates, steps and evaluates as it always does; its
        ``fraction_train`` and ``min_train_nodes`` are replaced by eegrad's choice of n each
        round (and, with no ``budget``, set the budget); its ``min_available_nodes`` is waited
        for before the first round.
    budget : float, optional
        What the whole run may spend, > 0, in ``unit``: the clients' trainings (federated
        evaluation and the server's ``evaluate_fn`` are not charged to it; count what they
        cost in ``aggregation``, the server's D(n) of a round). None (default, ``unit=
        "trainings"``): what your strategy would spend in the run's ``num_rounds``,
        :math:`\max(\lfloor K f\rfloor, m)` trainings a round of the K nodes connected at the
        first round (f its ``fraction_train``, m its ``min_train_nodes``), said in the log's
        first lines.
    unit : str
        What a client's round costs: ``"trainings"`` (default; each reply counts 1, so the
        budget is the number of client trainings), ``"samples"`` (each reply counts the
        samples it trained on: its ``num-examples``, or your strategy's ``weighted_by_key``),
        or the name of a metric your clients already report (e.g. ``"seconds"``, ``"energy"``).
    **options
        Any other keyword of :class:`~eegrad.flower.EEGradStrategy`: ``departure`` (the one
        knob of how far the rule leaves your schedule, below), ``aggregation`` for the
        server's cost of a round, ``round_cost="slowest"`` for wall-clock time, ``checkpoint``,
        ``csv_path``, ``rng``, ``privacy``, ….

    Returns
    -------
    EEGradStrategy
        Started as your strategy would be (``strategy.start(grid, initial_arrays, num_rounds,
        ...)``): the rule splits the budget over the ``num_rounds`` rounds (more clients in
        the rounds whose noise stays in the final model), ends the run before a round it cannot
        afford, logging why, and ``records`` (or ``csv_path``) say what each round asked and
        spent.

    Notes
    -----
    **How far it leaves your FedAvg** (:mod:`eegrad.selectors.anchored`). Your schedule is n
    clients every round (your strategy's ``fraction_train`` of the nodes, at least its
    ``min_train_nodes``) for your ``num_rounds``, within what it spends. The default asks your
    n every round. Where your clients' costs vary (samples, seconds) and come out higher than
    your budget foresaw, it asks fewer clients in the earliest rounds — keeping a reserve for
    the spend's noise and for the last rounds at the costliest client seen — never in the last
    three while the budget affords them, whose noise stays in the final model; the last round
    spends what the reserve saved on more clients; a cut deeper than half your n gives up
    that reserve first. A round asks its clients among those your
    round would ask (fewer: a subset; more: those and others), so the run differs from yours
    only where its n does. ``departure`` α (the one knob, default 0) lets a round ask
    down to ⌈(1 − α)·n⌉ clients, to pay for more in the last rounds, once the rounds have shown
    (at the upper confidence bound of its fit) that a round's noise is forgotten — and only
    while the training loss your clients report (``train_loss``) has not risen above the level
    your own rounds left it at; where they report none, your n. ``departure=1``: the plan
    unbounded but for that evidence.

    Examples
    --------
    A server app's few changed lines (the clients are Flower's quickstart clients, unchanged):

    >>> from flwr.serverapp.strategy import FedAvg
    >>> from eegrad.flower import choose_clients
    >>> strategy = choose_clients(FedAvg(fraction_evaluate=0.0), budget=200)
    >>> strategy.total_budget, strategy.cost_metric
    (200.0, None)
    >>> yours = choose_clients(FedAvg(fraction_train=0.5, fraction_evaluate=0.0))
    >>> yours.budgeting.spend_of.describe(num_rounds=10, num_nodes=20)
    '100 client trainings, what FedAvg(fraction_train=0.5, min_train_nodes=2) spends in 10 rounds of 20 nodes (10 a round)'

    >>> choose_clients(FedAvg(fraction_evaluate=0.0), budget=50_000, unit="samples").cost_metric
    'num-examples'
    """
    owner = "choose_clients"
    if not isinstance(strategy, Strategy):
        raise InvalidParameterTypeError(
            f"The 'strategy' parameter of {owner} must be a Flower message-API strategy "
            f"(flwr.serverapp.strategy.Strategy, e.g. FedAvg()). Got {type(strategy).__name__} "
            "instead."
        )
    _check_options(options)
    inner_kind(strategy)  # a strategy that cannot take part (a fixed-n DP wrapper), said first
    if budget is None:
        if unit != "trainings":
            raise fail("budget", owner, f"given with unit={unit!r} (your strategy's spend is "
                       "known before its clients reply only in client trainings)", None)  # fmt: skip
        budget = FedAvgSpend.of(strategy, owner)
    else:
        budget = check_real(budget, "budget", owner, gt=0)
    taken = sorted({"strategy", "total_budget", "budget", "cost_metric"} & set(options))
    if taken:
        raise fail(taken[0], owner, "not given in options (choose_clients sets it from its "
                   "strategy, budget and unit)", options[taken[0]])  # fmt: skip
    if unit == "trainings":
        metric = None
    elif unit == "samples":
        metric = getattr(strategy, "weighted_by_key", None) or "num-examples"
    elif isinstance(unit, str) and unit:
        metric = check_metric_key(unit, "unit", owner)
    else:
        raise fail("unit", owner, f"one of {UNITS} or the name of a metric your clients "
                   "report", unit)  # fmt: skip
    if not isinstance(budget, FedAvgSpend):  # checked as you gave it: choose_clients's budget
        TotalBudget(budget, options.get("c_min"), as_aggregation(options.get("aggregation"),
                    owner) if options.get("aggregation") is not None else LinearAggregation(),
                    round_cost=options.get("round_cost", "sum"), cost_metric=metric,
                    cost_scale=options.get("cost_scale", 1.0), owner=owner, name="budget")  # fmt: skip
    return EEGradStrategy(strategy=strategy, total_budget=budget, cost_metric=metric, **options)


def _check_options(options: dict[str, Any]) -> None:
    """Refuse a keyword that neither choose_clients nor EEGradStrategy takes, as
    choose_clients's, naming the closest known keyword."""
    import difflib
    import inspect

    known = [k for k in inspect.signature(EEGradStrategy.__init__).parameters if k != "self"]
    for key in options:
        if key not in known:
            ours = ["strategy", "budget", "unit"]
            close = difflib.get_close_matches(key, ours + known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidParameterTypeError(
                f"choose_clients() got an unexpected keyword argument {key!r}{hint} It takes "
                f"{', '.join(ours)} and the keywords of EEGradStrategy ({', '.join(known)})."
            )

