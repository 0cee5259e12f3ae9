r"""SGD driven by T-round gradient estimates: :math:`w_{k+1} = w_k - \eta_k G(w_k)`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._random import as_generator
from ._validation import InvalidParameterTypeError, check_array, check_integer, check_real, fail
from .rounds import (
    check_engine,
    check_selector,
    check_T,
    check_threads,
    check_w,
    estimate_gradient,
)
from .selectors.base import Selector

__all__ = ["SGDResult", "run_sgd"]


@dataclass(frozen=True)
class SGDResult:
    """Result of :func:`run_sgd`.

    Attributes
    ----------
    gaps : ndarray, shape (R, K+1)
        F(w_k) − F* for k = 1..K+1 (column 0 is the initial iterate).
    w : ndarray, shape (R, K+1, d)
        The iterates w_1..w_{K+1}.
    counts : ndarray of int64, shape (R, K, N)
        Pulls of each arm at each iterate (N is the largest number of arms over iterates;
        arms an iterate does not have count 0).
    eta : ndarray, shape (K,)
        The step sizes η_1..η_K used.
    """

    gaps: np.ndarray
    w: np.ndarray
    counts: np.ndarray
    eta: np.ndarray


def resolve_eta(eta: Any, K: int, owner: str = "run_sgd") -> np.ndarray:
    """η as K finite positive step sizes, from a number, a sequence or a callable k -> η_k."""
    if callable(eta):
        values = [eta(k) for k in range(1, K + 1)]
        arr = np.array([check_real(v, "eta", owner, gt=0) for v in values])
    elif isinstance(eta, Sequence | np.ndarray) and not isinstance(eta, str):
        arr = check_array(eta, "eta", owner, shape=(K,))
        if not np.all(arr > 0):
            raise fail("eta", owner, "step sizes > 0", arr.tolist())
    else:
        arr = np.full(K, check_real(eta, "eta", owner, gt=0))
    return arr


def _oracles(oracle: Any, K: int, owner: str) -> list[Any]:
    if isinstance(oracle, Sequence):
        if len(oracle) != K:
            raise fail(
                "oracle",
                owner,
                f"one oracle or a sequence of K = {K} oracles",
                f"a sequence of {len(oracle)}",
            )
        oracles = list(oracle)
    else:
        oracles = [oracle] * K
    for o in oracles:
        if getattr(o, "objective", None) is None:
            raise InvalidParameterTypeError(
                f"The 'oracle' parameter of {owner} must have an objective (F and F* are needed "
                f"for the gaps), e.g. GaussianOracle. Got {o!r} instead."
            )
    return oracles


def run_sgd(
    oracle: Any,
    selector: Selector,
    w0: Any,
    K: int,
    T: int,
    eta: float | Sequence[float] | Callable[[int], float],
    rng: Any,
    *,
    engine: str = "auto",
    threads: int | None = None,
) -> SGDResult:
    r"""K iterations of SGD, each with a T-round estimate (Algorithm 1 at every iterate).

    .. math:: w_{k+1} = w_k - \eta_k\, G(w_k), \qquad k = 1..K

    Parameters
    ----------
    oracle : MiniBatchOracle or sequence of K of them
        The oracles; a sequence gives iterate k its own arms (budget B_k, cost C_k).
    selector : Selector
        The rule. It is told when each new iterate begins (``next_iterate``): the paper's
        EE-Grad and the per-iterate rules forget; rules with memory keep their evidence.
    w0 : array_like, shape (R, d)
        Initial iterates w_1, one per realization.
    K : int
        Number of SGD iterations, >= 1.
    T : int
        Rounds per iterate.
    eta : float, sequence of K floats, or callable k -> η_k
        Step sizes, each finite and > 0.
    rng : numpy.random.Generator or int
    engine : {"auto", "numpy", "numba"}
        See :func:`~eegrad.estimate_gradient`.
    threads : int, optional
        Threads of the compiled engine; results do not depend on it.

    Returns
    -------
    SGDResult
        ``gaps`` (R, K+1), ``w`` (R, K+1, d), ``counts`` (R, K, N), ``eta`` (K,).
    """
    owner = "run_sgd"
    check_engine(engine, owner)
    threads = check_threads(threads, owner)
    selector = check_selector(selector, owner)
    K = check_integer(K, "K", owner, ge=1)
    oracles = _oracles(oracle, K, owner)
    w = check_w(oracles[0], w0, owner, "w0").copy()
    for o in oracles:
        check_T(T, selector, o.arms.N, owner)
    if selector.keeps_memory:
        for k, o in enumerate(oracles[1:], start=2):
            if o.arms.N != oracles[0].arms.N:
                raise fail("oracle", owner, f"a sequence whose oracles have one N for "
                           f"{type(selector).__name__}, which keeps its evidence across iterates "
                           f"(iterate 1 has N = {oracles[0].arms.N})",
                           f"iterate {k} with N = {o.arms.N}")  # fmt: skip
    etas = resolve_eta(eta, K, owner)
    gen = as_generator(rng, owner)
    R, d = w.shape
    N = max(o.arms.N for o in oracles)
    ws = np.empty((R, K + 1, d))
    gaps = np.empty((R, K + 1))
    counts = np.zeros((R, K, N), dtype=np.int64)
    ws[:, 0] = w
    gaps[:, 0] = oracles[0].objective.gap(w)
    for k in range(K):
        est = estimate_gradient(oracles[k], selector, w, T, gen, engine=engine, threads=threads,
                                new_iterate=k > 0)  # fmt: skip
        with np.errstate(over="ignore", invalid="ignore"):
            w = w - etas[k] * est.gradient
        if not np.all(np.isfinite(w)):
            raise fail(
                "eta",
                owner,
                "small enough that the iterates stay finite",
                f"eta_{k + 1} = {etas[k]} (iterate {k + 2} overflowed)",
            )
        counts[:, k, : est.counts.shape[1]] = est.counts
        ws[:, k + 1] = w
        gaps[:, k + 1] = oracles[k].objective.gap(w)
    return SGDResult(gaps=gaps, w=ws, counts=counts, eta=etas)
