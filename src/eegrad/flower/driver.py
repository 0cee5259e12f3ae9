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

from ..engines import numba_available
from ..parts import flat_host
from ..recorder import RoundRecorder
from ..selectors.base import ProtocolError, Selector
from ..selectors.evidence import Outlook

__all__ = ["RuleDriver"]


class RuleDriver(RoundRecorder):
    """The rule at work in a federated run (:class:`~eegrad.recorder.RoundRecorder`'s
    protocol: one ask pending, one record a round, T rounds a step).

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

    awaits = "the replies"
    when_done = "the step's estimate is taken, then the next step begins"

    def __init__(self, selector: Selector, N: int, T: int, dim: int, *, rng: Any) -> None:
        super().__init__(selector, N, T, dim, rng=rng, owner="EEGradStrategy")
        self._sum: np.ndarray | None = None  # T > 1: the sum of the rounds' means, flat
        self._estimate: list[Any] | None = None  # T = 1: the round's mean
        self._sizes: list[int] = []  # the model's arrays' sizes (a T-round mean split by them)
        self._begin(first=True)

    def _compiled_choice(self) -> bool:
        return numba_available()

    def _begin(self, first: bool) -> None:
        super()._begin(first)
        self._sum, self._estimate = None, None

    def ask(self, at_least: int = 1, at_most: int | None = None,
            outlook: Outlook | None = None) -> int:  # fmt: skip
        """The round's n, in ``at_least``..``at_most`` (1..N)."""
        return self._ask(at_least, at_most, outlook, "RuleDriver.ask")

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
            fields.update(self._signal(mean))
        self._tell(fields, local_steps)
        self._sizes = [int(np.size(a)) for a in mean]
        if self.T == 1:
            self._estimate = mean
        else:
            flat = flat_host(mean)
            self._sum = flat if self._sum is None else self._sum + flat

    def withdraw(self) -> None:
        """Give up the pending round: nothing is told, the next ask is for the same round."""
        self._withdraw()

    def result(self) -> list[Any]:
        """The step's estimate in the model's arrays: the round's mean (T = 1), or the mean of
        the T rounds' means (float64, each array flat)."""
        if not self.done:
            raise ProtocolError(f"result() after {self.t} of T = {self.T} rounds")
        if self.T == 1:
            return self._estimate
        return np.split(self._sum / self.T, np.cumsum(self._sizes)[:-1])

    def next_iterate(self) -> None:
        """After a step: the next estimate."""
        self._begin(first=False)
