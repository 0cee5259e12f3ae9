r"""One realization of a rule, driven a round at a time: the protocol both drivers share.

A round is asked (:meth:`RoundRecorder.ask`: the rule's n, with the run's
:class:`~eegrad.selectors.evidence.Outlook`), then told in one record
(:class:`~eegrad.selectors.evidence.RoundEvidence`, through :meth:`~eegrad.Selector.tell_round`)
or withdrawn; T rounds make an estimate (Algorithm 1's :math:`G = \frac1T\sum_t G_t`), after
which the next iterate begins. The recorder owns what every driver must check the same way —
one ask pending at a time, no round past the T-th, a tell or a withdraw only for a pending
ask — and the parts of a record that depend only on what the rule
:attr:`~eegrad.Selector.reads`: the signal of the round's mean (its squared norm, and its inner
product with the last round's where every round is a step) and the clients' local steps.

:class:`~eegrad.GradientEstimator` (a user's loop, its statistics in the gradients' own
backend) and :class:`~eegrad.flower.driver.RuleDriver` (a federated run's rounds) are its two
drivers; each adds how it makes the round's mean and the rule's statistic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._random import RealizationStreams, as_generator
from ._validation import fail
from .parts import norm_and_inner
from .selectors.base import ProtocolError, Selector
from .selectors.evidence import Outlook, RoundEvidence

__all__ = ["RoundRecorder"]


class RoundRecorder:
    """The rule of one realization (R = 1), asked and told one round at a time.

    Parameters
    ----------
    selector : Selector
        The rule.
    N : int
        The arms, n = 1..N.
    T : int
        Rounds per estimate (1: every round a step).
    dim : int
        The length d of a round's mean.
    rng : numpy.random.Generator or int
        The rule's draws (laid out as the simulator's for R = 1).
    owner : str
        The driver's name, for its errors.

    Attributes
    ----------
    t : int
        Rounds told in the current estimate.
    streams : RealizationStreams
        The rule's random streams of the current estimate.
    """

    #: What a pending round waits for, and what to do once T rounds are told (the driver's
    #: own words, in its errors).
    awaits = "its record"
    when_done = "take the estimate, then begin the next iterate"

    def __init__(self, selector: Selector, N: int, T: int, dim: int, *, rng: Any,
                 owner: str) -> None:  # fmt: skip
        self.selector, self.N, self.T, self.dim = selector, int(N), int(T), int(dim)
        self._gen = as_generator(rng, owner)
        self._pending: int | None = None
        self._last_mean: Any = None  # the last step's mean, where T = 1 (its persistence)
        self.t = 0

    def _compiled_choice(self) -> bool:
        """Whether the rule makes its choice in compiled code (the driver's engine)."""
        raise NotImplementedError

    def _begin(self, first: bool) -> None:
        """A new estimate: the rule's streams for T rounds; the rule starts afresh (``first``:
        no evidence, no last mean) or moves to the next iterate (a rule with memory keeps its
        evidence)."""
        self.streams = RealizationStreams(self._gen, 1, rounds=self.T)
        self.selector.compiled_choice = self._compiled_choice()
        if first:
            self.selector.init(1, self.N, self.dim, truth=None, streams=self.streams)
            self._last_mean = None
        else:
            self.selector.next_iterate(truth=None, streams=self.streams)
        self.t, self._pending = 0, None

    @property
    def done(self) -> bool:
        """Whether all T rounds of the estimate are told."""
        return self.t >= self.T

    def _ask(self, at_least: int, at_most: int | None, outlook: Outlook | None,
             owner: str) -> int:  # fmt: skip
        """The round's n in ``at_least``..``at_most`` (1..N), the rule asked with ``outlook``;
        refused while a round is pending or once the T rounds are told."""
        top = self.N if at_most is None else at_most
        if not isinstance(at_least, int | np.integer) or not 1 <= at_least <= self.N:
            raise fail("at_least", owner, f"an integer in 1..N = {self.N}", at_least)
        if not isinstance(top, int | np.integer) or not at_least <= top <= self.N:
            raise fail("at_most", owner, f"an integer in at_least..N = {at_least}..{self.N}",
                       at_most)  # fmt: skip
        if self._pending is not None:
            raise ProtocolError(
                f"ask() called twice: round {self.t + 1} still waits for {self.awaits} of "
                f"n = {self._pending + 1}"
            )
        if self.done:
            raise ProtocolError(f"all T = {self.T} rounds are told: {self.when_done}")
        arm = int(self.selector.ask(self.t + 1, at_least=int(at_least), at_most=int(top),
                                    outlook=outlook)[0])  # fmt: skip
        self._pending = arm
        return arm + 1

    def _signal(self, mean: Any) -> dict[str, Any]:
        """The signal of the round's mean for a rule that reads it: its squared norm and —
        where every round is a step (T = 1) — its inner product with the last round's mean,
        the persistence (one O(d) reference kept: the last mean)."""
        norm2, persistence = norm_and_inner(mean, self._last_mean)
        self._last_mean = mean if self.T == 1 else None
        return {"mean_norm2": np.array([norm2]),
                "persistence": None if persistence is None else np.array([persistence])}

    def _tell(self, fields: dict[str, Any], local_steps: float | None = None) -> None:
        """Tell the pending round its one record: ``fields`` (the mean or its summary, or the
        parts' statistic and the signal), and the clients' mean ``local_steps`` where the rule
        reads them (None: not told); the round is then told."""
        if local_steps is not None and "local_steps" in self.selector.reads:
            fields["local_steps"] = np.array([float(local_steps)])
        self.selector.tell_round(RoundEvidence(np.array([self._pending]), **fields))
        self._pending = None
        self.t += 1

    def _withdraw(self) -> None:
        """Give up the pending round: nothing is told, the next ask is for the same round (the
        rule's random draws for it are spent)."""
        if self._pending is None:
            raise ProtocolError("withdraw() without a pending ask()")
        self.selector.withdraw()
        self._pending = None
