r"""Which of the connected nodes a round asks.

A round of n clients draws them uniformly, without replacement, from the run's sampling stream.
Where the rule keeps your strategy's schedule and leaves it only in some rounds (the default:
:class:`~eegrad.selectors.AnchoredPlan`, :class:`~eegrad.selectors.AnchoredProgress`, whose
``draws_among_yours`` is true), a round draws as a round of yours would — :math:`n_b` nodes,
your n — and asks the first n of them where n is fewer, or those and n − n_b more drawn among
the rest where n is more. Each n asked is still a uniform draw; and the stream moves on as it
does in a run of your n every round, so that a round that asks one client fewer leaves every
later round's clients those of the run of yours (common random numbers): the run differs from
yours only where its n does.
"""

from __future__ import annotations

import numpy as np

__all__ = ["draw_nodes"]


def draw_nodes(rng: np.random.Generator, connected: int, n: int,
               yours: int | None = None) -> np.ndarray:  # fmt: skip
    """The indices of the nodes a round asks among ``connected``: n of them (at most all),
    drawn uniformly; with ``yours`` (your strategy's n), drawn among a draw of yours (the
    module's notes)."""
    n = min(int(n), connected)
    if yours is None:
        return rng.choice(connected, size=n, replace=False)
    first = rng.choice(connected, size=min(int(yours), connected), replace=False)
    if n <= first.size:
        return first[:n]
    rest = np.setdiff1d(np.arange(connected), first, assume_unique=True)
    return np.concatenate([first, rng.choice(rest, size=n - first.size, replace=False)])
