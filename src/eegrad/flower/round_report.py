"""What a run tells a user's code after each round: :class:`RoundReport`, handed to
:class:`~eegrad.flower.EEGradStrategy`'s ``on_round`` callback.

A callback is how a run's numbers reach the tools a practitioner already logs with
(TensorBoard, Weights & Biases, MLflow) without eegrad depending on any of them:

>>> def on_round(report):
...     print(report.server_round, report.record["arm"], sorted(report.estimates))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import InvalidParameterTypeError

__all__ = ["RoundReport", "check_callback"]


@dataclass(frozen=True)
class RoundReport:
    """One training round, as the strategy recorded it.

    Attributes
    ----------
    server_round : int
        Flower's server round (a resumed run's count continues).
    record : dict
        The round's record, the row ``csv_path`` gets (``arm`` is n, ``cost`` the run's cost so
        far, ``budget_left`` with a total budget, …).
    metrics : dict
        The round's train ``MetricRecord`` as Flower's result holds it (the clients' metrics
        aggregated, then eegrad's).
    explanation : str or None
        Why the rule asked n this round, in words (the log line's reason); None for a rule
        with no view (e.g. a fixed n).
    estimates : dict of str to numpy.ndarray
        The rule's fitted view of every arm n = 1..N after the round, each of shape (N,)
        (:meth:`~eegrad.selectors.Selector.estimates`: ``variance`` of a round mean,
        ``signal``, ``objective``); empty for a rule with none.
    """

    server_round: int
    record: dict[str, Any]
    metrics: dict[str, Any]
    explanation: str | None = None
    estimates: dict[str, np.ndarray] = field(default_factory=dict)


def check_callback(on_round: Any, owner: str) -> Callable[[RoundReport], Any] | None:
    """``on_round`` as given: None or a callable of one :class:`RoundReport`."""
    if on_round is not None and not callable(on_round):
        raise InvalidParameterTypeError(
            f"The 'on_round' parameter of {owner} must be a callable of one RoundReport (or "
            f"None). Got {on_round!r} instead."
        )
    return on_round
