"""The recommended rule for real training loops, where β, P and c are unknown."""

from __future__ import annotations

from .base import Selector
from .memory_rules import MemoryThompson

__all__ = ["DEFAULT_RULE", "default_selector"]

#: The name of the recommended rule in configurations and on the command line.
DEFAULT_RULE = "memory_thompson"


def default_selector() -> Selector:
    """The recommended selection rule with its defaults: :class:`MemoryThompson`.

    Chosen by ``eegrad reproduce memory`` (see README.md, "Selection with memory"): it needs
    none of β, P, c nor the horizon; it keeps its evidence across SGD iterates (drive it with
    :meth:`GradientEstimator.next_iterate`, not ``reset()``), and in the Figure 1 setting its
    final expected gap is within a small factor of the optimal oracle's at T = 50 and 200 where
    the per-iterate rules pay their exploration at every iterate. Without memory the best rule
    is :class:`ThompsonVariance` (``eegrad reproduce rules``).

    Examples
    --------
    >>> from eegrad import default_selector
    >>> default_selector()
    MemoryThompson(shape='auto', discount=1.0, window=64, seed=0)
    """
    return MemoryThompson()
