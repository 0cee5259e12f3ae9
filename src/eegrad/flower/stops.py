"""What ends a federated run before its rounds, as a normal end: a budget spent.

A stop is not a misconfiguration: :class:`RunStopped` is no ``ValueError``, so that a user's
``except ValueError`` around a run's set-up never takes "the budget is spent" for bad input.
:class:`~eegrad.flower.EEGradStrategy` ends the run on one, saying why once, and returns what
the rounds run released.
"""

from __future__ import annotations

__all__ = ["RunStopped"]


class RunStopped(Exception):
    """A budget of the run is spent (its cost, :class:`~eegrad.flower.BudgetSpent`, or its
    privacy, :class:`~eegrad.flower.PrivacyBudgetExhausted`): the next round does not run."""

    #: What is spent, in words for the run's last lines.
    what = "the budget is spent"
