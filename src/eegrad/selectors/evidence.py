r"""What a rule is told: one typed record of a round after it, and one of the run ahead with
each ask.

A driver (the simulator, :class:`~eegrad.GradientEstimator`, a federated strategy) hands a rule
a round's :class:`RoundEvidence` through one method, :meth:`~eegrad.Selector.tell_round`, and
what the run has ahead, a :class:`Outlook`, with :meth:`~eegrad.Selector.ask`. A rule declares
what it reads of them (:attr:`~eegrad.Selector.reads`, a set of the names in :data:`READS`), so
a driver computes only that, and a record that lacks what the rule reads is refused by name.

The names a rule may read:

``"mean"``
    The round's output :math:`G_t` (its mean), or its summary where the driver keeps the
    arms' means itself: the increment of :math:`\sum_i\|G_i - m_n\|^2` (and, for a rule with
    memory in its scalar shape, the pulled arm's Gram row). The paper's rules (Algorithm 1).
``"spread"``
    The spread of the round's parts (clients, workers): their pair sum
    :math:`\sum_{i<j}\|g_i - g_j\|^2` and weights, or the sums secure aggregation reveals
    (:class:`eegrad.spread.SpreadSums`: :math:`Q`, n, :math:`W`, :math:`W_2`,
    :math:`\sum 1/\omega_i`).
``"weighted_spread"``
    Beside the pair sum, the parts' weighted spread :math:`Q = \sum_i\omega_i\|g_i-\bar g\|^2`.
``"signal"``
    The squared norm of the round's mean :math:`\|\bar u_t\|^2`, and where the round stepped
    after another its inner product with the last round's mean (the persistence).
``"local_steps"``
    The mean local steps the round's parts took (optional in every record: a round whose
    clients report none is told without).
``"costs"``, ``"budget_left"``, ``"rounds_left"``
    The :class:`Outlook`: every arm's expected cost of a round, what is left of a total
    budget, the rounds the run has left.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

__all__ = ["READS", "Outlook", "RoundEvidence"]

#: The names a rule's :attr:`~eegrad.Selector.reads` may hold (the module's docstring).
READS = frozenset({"mean", "spread", "weighted_spread", "signal", "local_steps", "costs",
                   "budget_left", "rounds_left"})  # fmt: skip


@dataclass(frozen=True)
class RoundEvidence:
    """One round, as a rule reads it; every field but ``arms`` is optional, each array has one
    row per realization (R rows).

    Attributes
    ----------
    arms : ndarray of shape (R,)
        The arms of the last ask (n − 1).
    mean : ndarray of shape (R, d), optional
        The round's output ("mean").
    sq_increment : ndarray of shape (R,), optional
        The increment of the pulled arm's :math:`\\sum_i\\|G_i - m\\|^2`, for a driver that
        keeps the arms' means itself ("mean").
    gram_row : ndarray of shape (R, N), optional
        With ``sq_increment``: the pulled arm's row of the Gram matrix of the arms' means about
        a fixed reference (a rule with memory, scalar shape).
    pair_sums, weights : ndarrays of shapes (R,) and (R, m), optional
        The parts' pair sum and weights ("spread").
    noisy : bool
        Whether ``pair_sums`` are unbiased estimates from a private release (may be negative).
    weighted_spread : ndarray of shape (R,), optional
        The parts' :math:`Q`: beside ``pair_sums`` ("weighted_spread"), or with the sums below
        ("spread", under secure aggregation).
    parts, total_weight, total_weight2, inverse_weight_sum : ndarrays of shape (R,), optional
        The sums secure aggregation reveals: n, :math:`W`, :math:`W_2`, :math:`\\sum 1/\\omega_i`
        (None where the clients did not send it).
    mean_norm2, persistence : ndarrays of shape (R,), optional
        :math:`\\|\\bar u_t\\|^2` and :math:`\\bar u_t\\cdot\\bar u_{t-1}` ("signal"; the
        persistence None where no earlier round stepped).
    local_steps : ndarray of shape (R,), optional
        The parts' mean local steps ("local_steps").
    """

    arms: np.ndarray
    mean: Any = None
    sq_increment: Any = None
    gram_row: Any = None
    pair_sums: Any = None
    weights: Any = None
    noisy: bool = False
    weighted_spread: Any = None
    parts: Any = None
    total_weight: Any = None
    total_weight2: Any = None
    inverse_weight_sum: Any = None
    mean_norm2: Any = None
    persistence: Any = None
    local_steps: Any = None

    @property
    def has_sums(self) -> bool:
        """Whether the record holds the sums of secure aggregation (not the pair sum)."""
        return self.pair_sums is None and self.total_weight is not None

    def holds(self, name: str) -> bool:
        """Whether the record holds what ``name`` (one of :data:`READS`) stands for."""
        if name == "mean":
            return self.mean is not None or self.sq_increment is not None
        if name == "spread":
            return (self.pair_sums is not None and self.weights is not None) or self.has_sums
        if name == "weighted_spread":
            return self.weighted_spread is not None
        if name == "signal":
            return self.mean_norm2 is not None
        if name == "local_steps":
            return self.local_steps is not None
        return False

    def given(self) -> list[str]:
        """The names of the fields given (not None; ``noisy`` where True), for messages."""
        return [f.name for f in fields(self) if f.name != "arms"
                and getattr(self, f.name) is not None and getattr(self, f.name) is not False]


@dataclass(frozen=True)
class Outlook:
    """What the run has ahead, told with an ask (each None where the driver does not know it).

    Attributes
    ----------
    costs : ndarray of shape (N,), optional
        The expected cost :math:`c_n > 0` of a round of every arm ("costs").
    budget_left : float, optional
        What is left of the run's total budget, >= 0 ("budget_left").
    rounds_left : int, optional
        The rounds the run has left, the next one included, >= 1 ("rounds_left").
    """

    costs: Any = None
    budget_left: float | None = None
    rounds_left: int | None = None
