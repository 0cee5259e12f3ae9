r"""The rule of a federated run, asked and told one round at a time.

:class:`RuleDriver` holds the rule for one realization (R = 1). It asks it each round's n
(with the :class:`~eegrad.selectors.evidence.Outlook` the budget gives) and tells it each
round's one record (:class:`~eegrad.selectors.evidence.RoundEvidence`) through
:meth:`~eegrad.Selector.tell_round`: of what the round's fold computed, what the rule
:attr:`~eegrad.Selector.reads` — the parts' spread (their pair sum and weights, or the sums
secure aggregation reveals), or the round's mean (for a rule that keeps the arms'
statistics; one that keeps none is told the round alone); the squared norm of the mean and its inner
product with the last step's (the signal); the clients' local steps.

The step's estimate is the round's mean (every round a step, ``T = 1``), or the mean of T
rounds' means at one model (the paper's Algorithm 1, :math:`G = \frac1T\sum_t G_t`). The
driver holds O(d): the running sum of T rounds, or the last step's mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._random import RealizationStreams, as_generator
from .._validation import fail
from ..engines import numba_available
from ..parts import flat_host, norm_and_inner
from ..selectors.base import ProtocolError, Selector
from ..selectors.evidence import Outlook, RoundEvidence

__all__ = ["RuleDriver"]


class RuleDriver:
    """The rule at work in a federated run.

    Parameters
    ----------
    selector : Selector
        The rule.
    N : int
        The arms, n = 1..N clients.
    T : int
        Rounds per step (1: every round).
    dim : int
        The model's size d.
    rng : numpy.random.Generator or int
        The rule's draws (laid out as the simulator's for R = 1).

    Attributes
    ----------
    t : int
        Rounds told since the last step.
    """

    def __init__(self, selector: Selector, N: int, T: int, dim: int, *, rng: Any) -> None:
        self.selector, self.N, self.T, self.dim = selector, int(N), int(T), int(dim)
        self._gen = as_generator(rng, "EEGradStrategy")
        self._pending: int | None = None
        self._sum: np.ndarray | None = None  # T > 1: the sum of the rounds' means, flat
        self._estimate: list[Any] | None = None  # T = 1: the round's mean
        self._last_mean: list[Any] | None = None  # the last step's mean (its persistence)
        self._begin(first=True)

    def _begin(self, first: bool) -> None:
        """A new estimate: the rule's streams for T rounds; the rule starts (``first``) or
        moves to the next iterate (a rule with memory keeps its evidence)."""
        self.streams = RealizationStreams(self._gen, 1, rounds=self.T)
        self.selector.compiled_choice = numba_available()
        if first:
            self.selector.init(1, self.N, self.dim, truth=None, streams=self.streams)
        else:
            self.selector.next_iterate(truth=None, streams=self.streams)
        self.t, self._pending, self._sum, self._estimate = 0, None, None, None

    @property
    def done(self) -> bool:
        """Whether the step's T rounds are told."""
        return self.t >= self.T

    def ask(self, at_least: int = 1, at_most: int | None = None,
            outlook: Outlook | None = None) -> int:  # fmt: skip
        """The round's n, in ``at_least``..``at_most`` (1..N)."""
        if self._pending is not None:
            raise ProtocolError(f"ask() twice: round {self.t + 1} of the step is pending")
        top = self.N if at_most is None else int(at_most)
        if not 1 <= at_least <= top <= self.N:
            raise fail("at_most", "RuleDriver.ask", f"in at_least..N = {at_least}..{self.N}",
                       at_most)  # fmt: skip
        arm = int(self.selector.ask(self.t + 1, at_least=int(at_least), at_most=top,
                                    outlook=outlook)[0])  # fmt: skip
        self._pending = arm
        return arm + 1

    def tell(self, mean: list[Any], spread: dict[str, Any],
             local_steps: float | None = None) -> None:  # fmt: skip
        """Tell the pending round: its ``mean`` update (the model's arrays, checked finite by
        the fold), the parts' ``spread`` as record fields (for a rule that reads it) and their
        mean ``local_steps`` (None: not every client reported them)."""
        if self._pending is None:
            raise ProtocolError("tell() without a pending ask()")
        sel, reads = self.selector, self.selector.reads
        if "spread" in reads:
            fields: dict[str, Any] = dict(spread)
        elif sel.uses_statistics:  # the arms' statistics of the T rounds take the round's mean
            fields = {"mean": flat_host(mean)[None]}
        else:  # a rule that keeps none is told the round, not an O(d) copy of its mean
            fields = {"sq_increment": np.zeros(1)}
        if "signal" in reads:
            norm2, persistence = norm_and_inner(mean, self._last_mean)
            fields["mean_norm2"] = np.array([norm2])
            fields["persistence"] = None if persistence is None else np.array([persistence])
            self._last_mean = mean if self.T == 1 else None
        if local_steps is not None and "local_steps" in reads:
            fields["local_steps"] = np.array([float(local_steps)])
        self.selector.tell_round(RoundEvidence(np.array([self._pending]), **fields))
        if self.T == 1:
            self._estimate = mean
        else:
            flat = flat_host(mean)
            self._sum = flat if self._sum is None else self._sum + flat
        self._pending = None
        self.t += 1

    def withdraw(self) -> None:
        """Give up the pending round: nothing is told, the next ask is for the same round."""
        if self._pending is None:
            raise ProtocolError("withdraw() without a pending ask()")
        self.selector.withdraw()
        self._pending = None

    def result(self) -> Any:
        """The step's estimate: the round's mean (T = 1, the model's arrays), or the mean of the
        T rounds' means (flat, float64)."""
        if not self.done:
            raise ProtocolError(f"result() after {self.t} of T = {self.T} rounds")
        return self._estimate if self.T == 1 else self._sum / self.T

    def next_iterate(self) -> None:
        """After a step: the next estimate."""
        self._begin(first=False)
