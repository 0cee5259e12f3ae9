r"""The T-round estimate of Algorithm 1 at one SGD iterate.

On rounds t = 1..T the selector picks n_t, the oracle MBO(n_t) returns G_t(w), and the estimate
is the plain mean

.. math:: G(w) = \frac1T \sum_{t=1}^T G_t(w, n_t).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._random import RealizationStreams, as_generator
from ._validation import (
    InvalidParameterError,
    InvalidParameterTypeError,
    NonFiniteGradientError,
    check_array,
    check_integer,
    fail,
)
from .engines import check_engine, resolve_engine
from .selectors.base import Selector

__all__ = ["GradientEstimate", "estimate_gradient"]


@dataclass(frozen=True)
class GradientEstimate:
    """Result of :func:`estimate_gradient`.

    Attributes
    ----------
    gradient : ndarray, shape (R, d)
        The T-round estimate G(w) of each realization.
    counts : ndarray of int64, shape (R, N)
        γ_T(n): pulls of each arm; each row sums to T.
    """

    gradient: np.ndarray
    counts: np.ndarray


def check_w(oracle: Any, w: Any, owner: str, name: str = "w") -> np.ndarray:
    """Iterates as a finite (R, d) array matching the oracle's dimension."""
    objective = getattr(oracle, "objective", None)
    if objective is not None:
        return objective.check_iterate(w, owner, name)
    arr = check_array(w, name, owner)
    if arr.ndim != 2 or arr.shape[1] != oracle.d:
        raise fail(name, owner, f"an array of shape (R, {oracle.d}) (R realizations)", arr.shape)
    return arr


def check_T(T: Any, selector: Selector, N: int, owner: str) -> int:
    """T as an integer >= the selector's minimum (2N for the index rules, Algorithm 1)."""
    T = check_integer(T, "T", owner, ge=1)
    need = selector.min_rounds(N)
    if T < need:
        raise fail(
            "T",
            owner,
            f"an integer >= {need} for {type(selector).__name__} with N = {N} arms "
            "(Algorithm 1 pulls every arm twice first: T >= 2N)",
            T,
        )
    return T


def check_selector(selector: Any, owner: str) -> Selector:
    """A selector the simulator can drive: one that learns from whole pulls (the simulated
    oracles return each pull's mean, never its n parts)."""
    if not isinstance(selector, Selector):
        raise InvalidParameterTypeError(
            f"The 'selector' parameter of {owner} must be a Selector (e.g. EEGrad). "
            f"Got {selector!r} instead."
        )
    if selector.uses_parts:
        raise InvalidParameterError(
            f"The 'selector' parameter of {owner} must be a rule that learns from whole pulls: "
            f"the simulated oracles return each pull's mean, not its parts. Got {selector!r}, "
            "which learns from the parts of each pull; drive it with "
            "GradientEstimator.tell_parts or eegrad.flower instead."
        )
    return selector


def check_threads(threads: Any, owner: str) -> int | None:
    return None if threads is None else check_integer(threads, "threads", owner, ge=1)


def estimate_gradient(
    oracle: Any,
    selector: Selector,
    w: Any,
    T: int,
    rng: Any,
    *,
    engine: str = "auto",
    threads: int | None = None,
    new_iterate: bool = False,
) -> GradientEstimate:
    r"""Run Algorithm 1's T rounds at iterates ``w`` and return the mean of the T outputs.

    Parameters
    ----------
    oracle : MiniBatchOracle or CallableOracle
        The mini-batch oracles MBO(n), n = 1..N.
    selector : Selector
        The rule that picks n_t (e.g. :class:`~eegrad.EEGrad`); its state is re-initialised.
    w : array_like, shape (R, d)
        One iterate per realization.
    T : int
        Rounds per estimate; at least 2N for the index rules.
    rng : numpy.random.Generator or int
        Randomness; realizations are drawn in blocks, each from its own spawned stream.
    engine : {"auto", "numpy", "numba"}
        Execution engine. ``"auto"``: Numba when installed and the case is supported (Gaussian
        noise drawn directly, the built-in selectors), else NumPy. Both give the same numbers
        for a seed (to rounding).
    threads : int, optional
        Threads of the compiled engine (default: all cores). Results do not depend on it.
    new_iterate : bool
        False (default): the selector starts afresh (``init``). True: the estimate is the next
        iterate of the same run (``next_iterate``), so rules with memory keep their evidence;
        it needs a selector already initialised for the same R, N and d.

    Returns
    -------
    GradientEstimate
        ``gradient`` (R, d) and ``counts`` (R, N).

    Raises
    ------
    InvalidParameterError
        For a bad ``w`` or ``T``, or when the oracle returns a gradient of the wrong shape or
        with NaN/Inf (the message names the round and the arm).
    """
    owner = "estimate_gradient"
    check_engine(engine, owner)
    threads = check_threads(threads, owner)
    selector = check_selector(selector, owner)
    w = check_w(oracle, w, owner)
    N = oracle.arms.N
    T = check_T(T, selector, N, owner)
    gen = as_generator(rng, owner)
    R, d = w.shape
    at = oracle.at(w)
    streams = RealizationStreams(gen, R, rounds=T)
    compiled = resolve_engine(engine, at, selector, owner) == "numba"
    selector.compiled_choice = compiled  # this estimate's, whatever an earlier run set
    if new_iterate and selector.sizes == (R, N, d):
        selector.next_iterate(truth=at.truth(), streams=streams)
    elif new_iterate and selector.keeps_memory and selector.sizes is not None:
        raise fail("oracle", owner, f"of the same R, N, d as the last iterate, {selector.sizes}, "
                   f"for {type(selector).__name__}, which keeps its evidence across iterates",
                   f"R, N, d = {(R, N, d)}")  # fmt: skip
    else:
        selector.init(R, N, d, truth=at.truth(), streams=streams)
    counts = selector.oblivious_counts(T)
    if counts is not None and hasattr(at, "sample_mean"):
        mean = at.sample_mean(counts, T, streams)
        if mean is not None:  # the same draw whatever the engine
            _check_output(mean, T, np.full(R, int(np.argmax(counts))), R, d)
            selector.absorb(np.broadcast_to(counts, (R, counts.size)), T)
            return GradientEstimate(gradient=mean, counts=selector.counts.copy())
    if compiled:
        from .engines.numba_engine import run_rounds

        total, _ = run_rounds(at, selector, T, streams, threads)
        _check_output(total, T, selector.counts.argmax(axis=1), R, d)
        return GradientEstimate(gradient=total / T, counts=selector.counts.copy())
    total = numpy_rounds(at, selector, T, streams)
    return GradientEstimate(gradient=total / T, counts=selector.counts.copy())


def numpy_rounds(
    at: Any,
    selector: Selector,
    T: int,
    streams: RealizationStreams,
    after_round: Any = None,
) -> np.ndarray:
    """The NumPy engine: T rounds of ask, sample, tell; returns Σ_t G_t of shape (R, d).

    ``after_round(t)``, if given, is called after each round (e.g. to read the counts).
    """
    R, _, d = selector.sizes
    total = np.zeros((R, d))
    for t in range(1, T + 1):
        arms = selector.ask(t)
        g = at.sample(arms, streams)
        _check_output(g, t, arms, R, d)
        selector.tell(arms, g, check=False)  # checked just above
        total += g
        if after_round is not None:
            after_round(t)
    return total


def _check_output(g: np.ndarray, t: int, arms: np.ndarray, R: int, d: int) -> None:
    if g.shape != (R, d):
        raise fail(
            "oracle",
            "estimate_gradient",
            f"returning gradients of shape ({R}, {d})",
            f"shape {g.shape} at round t={t}",
        )
    finite = np.isfinite(g).all(axis=1)
    if not finite.all():
        r = int(np.argmin(finite))
        raise NonFiniteGradientError(
            f"The oracle returned a non-finite gradient at round t={t} for arm n={arms[r] + 1} "
            f"(realization {r}): {g[r]!r}. Gradients must be finite."
        )


def counts_at_checkpoints(
    at: Any,
    selector: Selector,
    checkpoints: Any,
    streams: RealizationStreams,
    engine: str = "auto",
) -> dict[int, np.ndarray]:
    """Run max(checkpoints) rounds of an initialised selector and return its pull counts
    (R, N) after each round in ``checkpoints`` — for anytime rules, the counts of a T-round
    estimate for every T of the grid from one run."""
    grid = sorted({int(t) for t in checkpoints})
    if resolve_engine(engine, at, selector, "counts_at_checkpoints") == "numba":
        from .engines.numba_engine import run_rounds

        _, counts = run_rounds(at, selector, grid[-1], streams, checkpoints=np.array(grid))
        return {t: counts[i] for i, t in enumerate(grid)}
    wanted = set(grid)
    snapshots: dict[int, np.ndarray] = {}

    def keep(t: int) -> None:
        if t in wanted:
            snapshots[t] = selector.counts.copy()

    numpy_rounds(at, selector, grid[-1], streams, after_round=keep)
    return snapshots
