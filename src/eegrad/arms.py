r"""The mini-batch oracles MBO(n, B, w), n = 1..N, as bandit arms (Section 2 of the paper).

Given a per-round budget B, cost-fidelity function C and aggregation cost D:

.. math::

    N = \max\{n \in \mathbb{Z}_+ : B > n\,c_{\min} + D(n)\}, \quad
    \theta_n = C^{-1}\!\left(\frac{B - D(n)}{n}\right), \quad
    \sigma_n^2 = \frac{1}{n\,\theta_n}, \quad
    n_* = \arg\min_n \sigma_n^2, \quad \Delta_n = \sigma_n^2 - \sigma_*^2 .
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import InvalidParameterTypeError, check_array, check_integer, check_real, fail
from .costs import AggregationCost, CostFidelity, as_aggregation

__all__ = ["Arms", "feasible_arms", "per_client_spend"]


class Arms:
    r"""The N mini-batch oracles of one SGD iterate, described by their noise scales σ_n².

    Parameters
    ----------
    sigma2 : array_like of shape (N,)
        σ_n² = 1/(n θ_n) for n = 1..N, each finite and > 0. Index i of the array is the
        mini-batch size n = i + 1.
    theta : array_like of shape (N,), optional
        Fidelities θ_n; by default 1/(n σ_n²).
    spend : array_like of shape (N,), optional
        Per-gradient spend (B − D(n))/n, known when built from costs.
    budget : float, optional
        The per-round budget B, when built from costs.

    Attributes
    ----------
    N : int
        Number of arms.
    n : ndarray of shape (N,)
        The mini-batch sizes 1..N.
    n_star : int
        The optimal mini-batch size n* (ties: the smallest n).
    sigma2_star : float
        σ*² = σ²_{n*}.
    delta : ndarray of shape (N,)
        Suboptimality gaps Δ_n = σ_n² − σ*².

    Examples
    --------
    >>> arms = Arms(sigma2=[50.0, 26.0, 16.7])
    >>> arms.N, arms.n_star
    (3, 3)
    """

    def __init__(
        self,
        sigma2: Any,
        *,
        theta: Any = None,
        spend: Any = None,
        budget: float | None = None,
    ):
        s2 = check_array(sigma2, "sigma2", "Arms", ndim=1, positive=True)
        self.sigma2 = s2
        self.sigma2.flags.writeable = False
        N = s2.shape[0]
        self.N = N
        self.n = np.arange(1, N + 1)
        if theta is None:
            theta = 1.0 / (self.n * s2)
        self.theta = check_array(theta, "theta", "Arms", shape=(N,), positive=True)
        self.spend = None if spend is None else check_array(spend, "spend", "Arms", shape=(N,))
        self.budget = None if budget is None else float(budget)
        self.n_star = int(np.argmin(s2)) + 1
        self.sigma2_star = float(s2[self.n_star - 1])
        self.delta = s2 - self.sigma2_star

    @classmethod
    def from_costs(
        cls,
        cost: CostFidelity,
        aggregation: AggregationCost | Any,
        budget: float,
        *,
        max_arms: int = 100_000,
    ) -> Arms:
        r"""The arms a budget B admits under cost C and aggregation cost D.

        Parameters
        ----------
        cost : CostFidelity
            C(θ), strictly increasing with C(0⁺) = ``cost.c_min``.
        aggregation : AggregationCost or callable
            D(n), increasing with D(1) >= 0 (a fixed per-round cost D(1) is spent whatever n
            is; the paper's D(1) = 0 is the case without one).
        budget : float
            The per-round budget B > 0.
        max_arms : int
            Largest N considered; a budget admitting more is an error (e.g. c_min = 0 with a
            bounded D).

        Raises
        ------
        InvalidParameterError
            If no arm is feasible (B <= c_min + D(1)), D(1) < 0, D decreases, C is not
            strictly increasing or not finite on the fidelities used, or N > ``max_arms``.

        Examples
        --------
        >>> from eegrad.costs import PowerCost, LinearAggregation
        >>> arms = Arms.from_costs(PowerCost(c_min=0.1, a=1.0, p=2.0),
        ...                        LinearAggregation(b=0.04), budget=1.0)
        >>> arms.N, arms.n_star
        (7, 4)
        """
        owner = "Arms.from_costs"
        if not isinstance(cost, CostFidelity):
            raise InvalidParameterTypeError(
                f"The 'cost' parameter of {owner} must be a CostFidelity (e.g. PowerCost or "
                f"CallableCost). Got {cost!r} instead."
            )
        aggregation = as_aggregation(aggregation, owner)
        B = check_real(budget, "budget", owner, gt=0)
        N, D = feasible_arms(float(cost.c_min), aggregation, B, max_arms=max_arms, owner=owner)
        # The feasible set {n : B > n c_min + D(n)} is then {1..N}.
        n = np.arange(1, N + 1)
        spend = (B - D[:N]) / n
        theta = np.asarray(cost.inverse(spend), dtype=np.float64)
        if not np.all(np.isfinite(theta)) or not np.all(theta > 0):
            raise fail("cost", owner, "invertible to finite θ > 0 on the spends used", theta)
        _check_strictly_increasing(cost, theta, spend, owner)
        return cls(1.0 / (n * theta), theta=theta, spend=spend, budget=B)

    def scaled(self, factor: float) -> Arms:
        """The same arms with every σ_n² multiplied by ``factor`` (the paper's Figure 1 scales
        σ² by T/50 so that σ_n²/T is the same in every panel)."""
        factor = check_real(factor, "factor", "Arms.scaled", gt=0)
        return Arms(self.sigma2 * factor)

    def __repr__(self) -> str:
        return f"Arms(sigma2={np.array2string(self.sigma2, separator=', ')})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Arms) and np.array_equal(self.sigma2, other.sigma2)

    __hash__ = None  # type: ignore[assignment]


def _check_strictly_increasing(
    cost: CostFidelity, theta: np.ndarray, spend: np.ndarray, owner: str
) -> None:
    """C must be finite and strictly increasing on [min θ_n, max θ_n] and invert correctly."""
    lo, hi = float(theta.min()), float(theta.max())
    grid = np.unique(np.concatenate([theta, np.linspace(lo, hi, 257), [lo / 2, lo / 4]]))
    c = np.asarray(cost(grid), dtype=np.float64)
    if not np.all(np.isfinite(c)):
        raise fail("cost", owner, "finite on the fidelities used", c.tolist())
    if np.any(np.diff(c) <= 0):
        i = int(np.argmax(np.diff(c) <= 0))
        raise fail(
            "cost",
            owner,
            "strictly increasing in θ on the fidelities used",
            f"C({grid[i]:.6g}) = {c[i]:.6g} >= C({grid[i + 1]:.6g}) = {c[i + 1]:.6g}",
        )
    if np.any(c < cost.c_min - 1e-12 * max(1.0, abs(cost.c_min))):
        raise fail("cost", owner, f"at least c_min = {cost.c_min:g}", c.min())
    back = np.asarray(cost(theta), dtype=np.float64)
    if not np.allclose(back, spend, rtol=1e-8, atol=1e-12):
        raise fail("cost", owner, "consistent with its inverse (C(C⁻¹(x)) = x)", back.tolist())


def per_client_spend(budget: float, aggregation: AggregationCost, n: Any) -> np.ndarray:
    r"""Each of n clients' share of a round's budget, :math:`(B - D(n))/n` (Section 2), for
    every n given."""
    n = np.asarray(n, dtype=np.float64)
    return (budget - aggregation(n)) / n


def feasible_arms(
    c_min: float,
    aggregation: AggregationCost,
    budget: float,
    *,
    max_arms: int = 100_000,
    owner: str = "feasible_arms",
) -> tuple[int, np.ndarray]:
    r"""N = max{n : B > n c_min + D(n)} and D(1..N+1), with the checks of :meth:`Arms.from_costs`.

    Raises the same errors: no feasible arm, D(1) < 0, D decreasing or not finite, N > max_arms.
    """
    B = check_real(budget, "budget", owner, gt=0)
    max_arms = check_integer(max_arms, "max_arms", owner, ge=1)
    n_all = np.arange(1, max_arms + 2, dtype=np.float64)
    D_all = aggregation(n_all)
    if not np.isfinite(D_all[0]) or D_all[0] < 0.0:
        raise fail("aggregation", owner, "a cost with D(1) >= 0 (a fixed per-round cost, or 0)",
                   f"D(1) = {float(D_all[0])!r}")  # fmt: skip
    feasible = n_all * c_min + D_all < B
    if not feasible[0]:
        raise fail(
            "budget",
            owner,
            f"> c_min + D(1) = {c_min + D_all[0]:g}, so that N = max{{n : B > n c_min + D(n)}} "
            ">= 1",
            B,
        )
    N = int(np.argmin(feasible)) if not feasible.all() else max_arms + 1
    D = D_all[: N + 1]
    if not np.all(np.isfinite(D)) or np.any(np.diff(D) < 0):
        raise fail("aggregation", owner, "increasing and finite on n = 1..N+1", D.tolist())
    if N > max_arms:
        raise fail("budget", owner, f"a budget that admits at most max_arms = {max_arms} arms", B)
    return N, D

