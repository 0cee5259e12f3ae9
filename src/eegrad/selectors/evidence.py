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
``"costs"``, ``"budget_left"``, ``"rounds_left"``, ``"baseline"``
    The :class:`Outlook`: every arm's expected cost of a round, what is left of a total
    budget, the rounds the run has left, the n the user's own strategy would ask.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .._validation import fail
from ..spread import check_weights

__all__ = ["OPTIONAL", "OUTLOOK", "READS", "ROUND", "Outlook", "RoundEvidence", "pair_fields"]

#: The names of what a round's record carries (:class:`RoundEvidence`).
ROUND = frozenset({"mean", "spread", "weighted_spread", "signal", "local_steps"})
#: The names of what an ask's outlook carries (:class:`Outlook`).
OUTLOOK = frozenset({"costs", "budget_left", "rounds_left", "baseline"})
#: The names a rule's :attr:`~eegrad.Selector.reads` may hold (the module's docstring).
READS = ROUND | OUTLOOK
#: What a rule reads where it is there and goes without where it is not, by default
#: (:attr:`~eegrad.Selector.goes_without`): a round's local steps (its clients reported none),
#: the weighted spread (a private release gives the pair sum alone), the rounds left (a run of
#: no known end: each round's noise charged in full). A driver must supply every other name a
#: rule reads.
OPTIONAL = frozenset({"local_steps", "weighted_spread", "rounds_left"})


def _per_realization(value: Any, name: str, owner: str, R: int,
                     nonnegative: bool = True) -> np.ndarray:  # fmt: skip
    """One finite number (>= 0 unless ``nonnegative`` is False) per realization, shape (R,),
    else the standard error."""
    x = np.asarray(value, dtype=np.float64)
    if x.shape != (R,) or not np.all(np.isfinite(x)) or (nonnegative and np.any(x < 0)):
        sign = " and >= 0" if nonnegative else ""
        raise fail(name, owner, f"finite{sign}, of shape ({R},)", x)
    return x


def pair_fields(pair_sum: float, weights: Any, *, noisy: bool = False,
                weighted_spread: float | None = None) -> dict[str, Any]:  # fmt: skip
    """The parts' pair sum and weights (and their weighted spread) of one realization's round
    as fields of its :class:`RoundEvidence` (``noisy``: from a private release)."""
    return {"pair_sums": np.array([pair_sum]),
            "weights": np.asarray(weights, dtype=np.float64)[None], "noisy": noisy,
            "weighted_spread": None if weighted_spread is None else np.array([weighted_spread])}


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

    @property
    def statistic(self) -> str | None:
        """Which statistic of the round the record holds: ``"pairs"`` (the parts' pair sums),
        ``"sums"`` (secure aggregation's), ``"mean"``, ``"summary"`` (the mean's increment), in
        that order of precedence; None: none."""
        if self.pair_sums is not None:
            return "pairs"
        if self.has_sums:
            return "sums"
        if self.mean is not None:
            return "mean"
        return "summary" if self.sq_increment is not None else None

    def check_small(self, R: int, N: int, owner: str) -> None:
        """Check the record's statistic where it is small (the pair sums and weights, the sums,
        the summary: O(R m) numbers), so that a bad value is named before anything else of the
        record; a mean (O(R d)) is checked where it is read (:meth:`checked_mean`)."""
        kind = self.statistic
        if kind == "pairs":
            self.checked_pairs(R, owner)
        elif kind == "sums":
            self.checked_sums(R, owner)
        elif kind == "summary":
            self.checked_summary(R, N, owner)

    def lacking(self, reads: frozenset[str], optional: frozenset[str] = OPTIONAL) -> list[str]:
        """What of ``reads`` the record must hold and does not (``optional`` aside)."""
        return [name for name in sorted((reads & ROUND) - optional) if not self.holds(name)]

    def checked_pairs(self, R: int, owner: str) -> tuple[np.ndarray, np.ndarray,
                                                          np.ndarray | None]:  # fmt: skip
        """The pair sums (R,), weights (R, m) and weighted spread (R,) or None, checked."""
        y = _per_realization(self.pair_sums, "pair_sums", owner, R, nonnegative=not self.noisy)
        w = np.asarray(self.weights, dtype=np.float64)
        if w.ndim != 2 or w.shape[0] != R:
            raise fail("weights", owner, f"of shape ({R}, m)", w.shape)
        if self.weighted_spread is not None and self.noisy:
            raise fail("weighted_spread", owner, "None with noisy=True (a private release gives "
                       "the pair sum alone)", "given")  # fmt: skip
        q = None if self.weighted_spread is None else _per_realization(
            self.weighted_spread, "weighted_spread", owner, R)  # fmt: skip
        return y, check_weights(w, owner, w.shape), q

    def checked_sums(self, R: int, owner: str) -> tuple[np.ndarray, ...]:
        """Q, n, W, W₂ (each (R,)) and Σ1/ω ((R,) or None), checked to be sums of n weights."""
        q = _per_realization(self.weighted_spread, "weighted_spread", owner, R)
        count = _per_realization(self.parts, "n", owner, R)
        W = _per_realization(self.total_weight, "total_weight", owner, R)
        W2 = _per_realization(self.total_weight2, "total_weight2", owner, R)
        if np.any(count < 1) or np.any(W <= 0) or np.any(W2 > W * W * (1 + 1e-12)):
            raise fail("total_weight", owner, "W > 0, n >= 1 and W2 <= W² (sums of n weights)",
                       f"W = {W}, W2 = {W2}, n = {count}")  # fmt: skip
        inv = None if self.inverse_weight_sum is None else _per_realization(
            self.inverse_weight_sum, "inverse_weight_sum", owner, R)  # fmt: skip
        if inv is not None and np.any(inv * W < count * count * (1 - 1e-12)):
            raise fail("inverse_weight_sum", owner, "Σ1/ω >= n²/W (sums of n weights > 0)",
                       f"Σ1/ω = {inv}, W = {W}, n = {count}")  # fmt: skip
        return q, count, W, W2, inv

    def checked_mean(self, R: int, d: int, owner: str) -> np.ndarray:
        """The round's output (R, d), checked finite."""
        g = np.asarray(self.mean, dtype=np.float64)
        if g.shape != (R, d):
            raise fail("mean", owner, f"of shape ({R}, {d})", g.shape)
        if not np.all(np.isfinite(g)):
            raise fail("mean", owner, "finite (no NaN or Inf)", g)
        return g

    def checked_summary(self, R: int, N: int, owner: str) -> tuple[np.ndarray, np.ndarray | None]:
        """The increment (R,) and the Gram row (R, N) or None, checked."""
        inc = _per_realization(self.sq_increment, "sq_increment", owner, R)
        if self.gram_row is None:
            return inc, None
        row = np.asarray(self.gram_row, dtype=np.float64)
        if row.shape != (R, N) or not np.all(np.isfinite(row)):
            raise fail("gram_row", owner, f"finite, of shape ({R}, {N})", row)
        return inc, row

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
    baseline : int, optional
        The n your own strategy would ask this round (Flower's FedAvg: its ``fraction_train``
        of the nodes connected, at least its ``min_train_nodes``), >= 1 ("baseline").
    """

    costs: Any = None
    budget_left: float | None = None
    rounds_left: int | None = None
    baseline: int | None = None
