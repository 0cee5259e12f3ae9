r"""When a federated run steps, as a part :class:`~eegrad.flower.EEGradStrategy` holds: every
round, or once every T rounds (the paper's Algorithm 1).

* :class:`EveryRound` (``steps="every-round"``, the default) — every round with replies is a
  step with its own mean, and the rule learns each arm's variance from the spread of the round's
  parts; the default rule is :func:`~eegrad.flower.strategy.default_rule` (for the budget and the
  release), and a damped step takes the rule's step scale.
* :class:`TRounds` (``steps="t-rounds"``) — the paper's structure: T query rounds at one model,
  then one step with the mean of the T round means; the default rule is
  :func:`eegrad.default_selector`, and no step is damped: one step for T rounds' cost, the
  paper's comparison (the studies page measures it against stepping every round).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._validation import check_integer, fail
from ..selectors import Selector, default_selector

__all__ = ["STEPS", "EveryRound", "TRounds", "make_schedule"]

#: The values of ``EEGradStrategy(steps=...)``.
STEPS = ("every-round", "t-rounds")


class EveryRound:
    """Every round with replies is a step."""

    #: The value of ``steps=``.
    name = "every-round"
    #: Rounds per step.
    T = 1
    #: Whether a step may be damped by the rule's step scale.
    damps = True

    def default_rule(self, build: Callable[[], Selector]) -> Selector:
        """The rule when none is given: the every-round default ``build`` makes."""
        return build()

    def default_rule_name(self, every_round_name: str) -> str:
        """How a checkpoint's fingerprint names the default rule."""
        return every_round_name

    def check(self, owner: str, *, total_budget: Any) -> None:
        """Every budget steps every round."""


class TRounds(EveryRound):
    """T query rounds at one model, then one step with the mean of the T round means.

    Parameters
    ----------
    T : int
        Rounds per step, >= 1 (>= the rule's minimum, 2N for index rules).
    """

    name = "t-rounds"
    damps = False

    def __init__(self, T: int, owner: str = "EEGradStrategy") -> None:
        self.T = check_integer(T, "T", owner, ge=1)

    def default_rule(self, build: Callable[[], Selector]) -> Selector:
        """The paper's rule with its constants' defaults (:func:`eegrad.default_selector`)."""
        return default_selector()

    def default_rule_name(self, every_round_name: str) -> str:
        return "default"

    def check(self, owner: str, *, total_budget: Any) -> None:
        """A total budget's rounds are chosen one by one for their cost: no T-round steps."""
        if total_budget is not None:
            raise fail("steps", owner, "'every-round' with a total budget", self.name)


def make_schedule(steps: str, T: int | None, owner: str = "EEGradStrategy") -> EveryRound:
    """The schedule of ``EEGradStrategy``'s ``steps`` and ``T``."""
    if steps not in STEPS:
        raise fail("steps", owner, f"one of {STEPS}", steps)
    if steps == "t-rounds":
        if T is None:
            raise fail("T", owner, "an integer >= 1 when steps='t-rounds'", T)
        return TRounds(T, owner)
    if T not in (None, 1):
        raise fail("T", owner, "None or 1 when steps='every-round'", T)
    return EveryRound()
