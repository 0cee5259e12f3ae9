"""The recommended rule for real training loops, where β, P and c are unknown."""

from __future__ import annotations

from .base import Selector
from .rules import ThompsonVariance

__all__ = ["DEFAULT_RULE", "default_selector"]

#: The name of the recommended rule in configurations and on the command line.
DEFAULT_RULE = "thompson"


def default_selector() -> Selector:
    """The recommended selection rule with its defaults: :class:`ThompsonVariance`.

    Chosen by ``eegrad reproduce rules`` (see README.md, "Selection rules"): it needs none of
    β, P, c; on the paper's example its normalised regret is a fraction of the paper's rule
    with c = 1 at T = 200 and T = 3000, it is at or below the Lai–Robbins asymptote at
    T = 20000, and its regret vanishes on every profile of the study.

    Examples
    --------
    >>> from eegrad import default_selector
    >>> default_selector()
    ThompsonVariance(dims='d', seed=0)
    """
    return ThompsonVariance()
