r"""Cost-fidelity functions C(θ) and aggregation costs D(n) (Section 2 of the paper).

A stochastic gradient of fidelity θ > 0 costs C(θ), strictly increasing with
:math:`\lim_{\theta \to 0} C(\theta) = c_{\min} \ge 0`. Averaging n gradients costs D(n),
increasing with D(1) >= 0: the paper's D(1) = 0 is the case of no fixed cost, and ``fixed``
(e.g. a federated server's broadcast of the model) is spent every round whatever n is. Both are
unknown to EE-Grad; they define the arms through :func:`eegrad.Arms.from_costs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validation import InvalidParameterTypeError, check_callable, check_real, fail

__all__ = [
    "AggregationCost",
    "CallableAggregation",
    "CallableCost",
    "CostFidelity",
    "LinearAggregation",
    "LogAggregation",
    "PowerAggregation",
    "PowerCost",
    "as_aggregation",
    "batch_sizes",
    "fit_power_cost",
]


class CostFidelity:
    r"""Base class of a cost-fidelity function C(θ).

    Subclasses define :meth:`cost`, :attr:`c_min` and, where a closed form exists,
    :meth:`inverse`. The default :meth:`inverse` solves C(θ) = x with SciPy's ``brentq``
    on a bracket that is doubled until it contains the root.
    """

    c_min: float

    def cost(self, theta: np.ndarray) -> np.ndarray:
        """C(θ) for an array of fidelities θ > 0."""
        raise NotImplementedError

    def __call__(self, theta: np.ndarray | float) -> np.ndarray:
        return self.cost(np.asarray(theta, dtype=np.float64))

    def inverse(self, spend: np.ndarray) -> np.ndarray:
        r"""θ = C⁻¹(x) for each spend x > c_min (the fidelity a spend buys)."""
        spend = np.asarray(spend, dtype=np.float64)
        out = np.empty_like(spend)
        for i, x in np.ndenumerate(spend):
            out[i] = self._solve(float(x))
        return out

    def _solve(self, x: float) -> float:
        if not x > self.c_min:
            raise fail("spend", type(self).__name__, f"> c_min = {self.c_min:g}", x)
        hi = 1.0
        for _ in range(2000):
            if float(self.cost(np.array(hi))) >= x:
                break
            hi *= 2.0
        else:  # pragma: no cover - a bounded cost never reaches x
            raise fail("spend", type(self).__name__, "reachable by C(θ) for finite θ", x)
        lo = hi / 2.0
        while float(self.cost(np.array(lo))) > x and lo > 1e-300:
            lo /= 2.0
        from scipy.optimize import brentq  # imported on first use: SciPy is slow to import

        return float(
            brentq(lambda th: float(self.cost(np.array(th))) - x, lo, hi, xtol=1e-15, rtol=1e-14)
        )


@dataclass(frozen=True)
class PowerCost(CostFidelity):
    r"""Power cost-fidelity function :math:`C(\theta) = c_{\min} + a\,\theta^p`.

    Parameters
    ----------
    c_min : float
        Cost of a gradient of vanishing fidelity, ``>= 0``.
    a : float
        Scale, ``> 0``.
    p : float
        Exponent, ``> 0``.

    Examples
    --------
    >>> cost = PowerCost(c_min=0.1, a=1.0, p=2.0)
    >>> float(cost.inverse(0.35))
    0.5
    """

    c_min: float = 0.0
    a: float = 1.0
    p: float = 1.0

    def __post_init__(self) -> None:
        check_real(self.c_min, "c_min", "PowerCost", ge=0)
        check_real(self.a, "a", "PowerCost", gt=0)
        check_real(self.p, "p", "PowerCost", gt=0)

    def cost(self, theta: np.ndarray) -> np.ndarray:
        """C(θ) = c_min + a θ^p, elementwise."""
        return self.c_min + self.a * np.asarray(theta, dtype=np.float64) ** self.p

    def inverse(self, spend: np.ndarray) -> np.ndarray:
        """θ = ((spend − c_min)/a)^(1/p): the fidelity a spend buys (spend > c_min)."""
        spend = np.asarray(spend, dtype=np.float64)
        if not np.all(spend > self.c_min):
            raise fail("spend", "PowerCost.inverse", f"> c_min = {self.c_min:g}", spend)
        return ((spend - self.c_min) / self.a) ** (1.0 / self.p)


class CallableCost(CostFidelity):
    """A user's own cost-fidelity function.

    Parameters
    ----------
    func : callable
        ``func(theta) -> cost``, vectorised or scalar; strictly increasing and finite on the
        region used (checked by :func:`eegrad.Arms.from_costs`).
    c_min : float
        Its limit at θ → 0⁺, ``>= 0``.
    inverse : callable, optional
        Its inverse; when omitted, the inverse is found by a bracketing root finder.
    """

    def __init__(
        self,
        func: Callable[[np.ndarray], np.ndarray],
        c_min: float,
        inverse: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        self.func = check_callable(func, "func", "CallableCost")
        self.c_min = check_real(c_min, "c_min", "CallableCost", ge=0)
        self._inverse = (
            None if inverse is None else check_callable(inverse, "inverse", "CallableCost")
        )

    def cost(self, theta: np.ndarray) -> np.ndarray:
        """C(θ) by the user's function, elementwise."""
        theta = np.asarray(theta, dtype=np.float64)
        return np.asarray(np.vectorize(self.func, otypes=[float])(theta), dtype=np.float64)

    def inverse(self, spend: np.ndarray) -> np.ndarray:
        """θ = C⁻¹(spend): the user's inverse if given, else the base class's bracketing search."""
        if self._inverse is None:
            return super().inverse(spend)
        spend = np.asarray(spend, dtype=np.float64)
        return np.asarray(np.vectorize(self._inverse, otypes=[float])(spend), dtype=np.float64)

    def __repr__(self) -> str:
        return f"CallableCost(func={self.func!r}, c_min={self.c_min!r})"


class AggregationCost:
    """Base class of an aggregation cost D(n): increasing in n, D(1) >= 0 (the paper's
    D(1) = 0 where there is no fixed per-round cost)."""

    def cost(self, n: np.ndarray) -> np.ndarray:
        """D(n) for an array of mini-batch sizes n >= 1."""
        raise NotImplementedError

    def __call__(self, n: np.ndarray | int) -> np.ndarray:
        return self.cost(np.asarray(n, dtype=np.float64))


@dataclass(frozen=True, repr=False)
class LinearAggregation(AggregationCost):
    r"""Linear aggregation cost :math:`D(n) = D_0 + b\,(n - 1)`, ``b >= 0``; ``fixed``
    :math:`D_0 \ge 0` is spent every round whatever n is (0: the paper's D(1) = 0)."""

    b: float = 0.0
    fixed: float = 0.0

    def __post_init__(self) -> None:
        check_real(self.b, "b", "LinearAggregation", ge=0)
        check_real(self.fixed, "fixed", "LinearAggregation", ge=0)

    def cost(self, n: np.ndarray) -> np.ndarray:
        """D(n) = D₀ + b (n − 1)."""
        return self.fixed + self.b * (np.asarray(n, dtype=np.float64) - 1.0)

    def __repr__(self) -> str:
        return _repr_with_fixed(self, "b")


@dataclass(frozen=True, repr=False)
class LogAggregation(AggregationCost):
    r"""Logarithmic aggregation cost :math:`D(n) = D_0 + b \ln n` (e.g. a reduction tree),
    ``b >= 0``, ``fixed`` :math:`D_0 \ge 0`."""

    b: float = 0.0
    fixed: float = 0.0

    def __post_init__(self) -> None:
        check_real(self.b, "b", "LogAggregation", ge=0)
        check_real(self.fixed, "fixed", "LogAggregation", ge=0)

    def cost(self, n: np.ndarray) -> np.ndarray:
        """D(n) = D₀ + b ln n."""
        return self.fixed + self.b * np.log(np.asarray(n, dtype=np.float64))

    def __repr__(self) -> str:
        return _repr_with_fixed(self, "b")


@dataclass(frozen=True, repr=False)
class PowerAggregation(AggregationCost):
    r"""Power aggregation cost :math:`D(n) = D_0 + b\,(n^q - 1)`, ``b >= 0``, ``q > 0``,
    ``fixed`` :math:`D_0 \ge 0`."""

    b: float = 0.0
    q: float = 1.0
    fixed: float = 0.0

    def __post_init__(self) -> None:
        check_real(self.b, "b", "PowerAggregation", ge=0)
        check_real(self.q, "q", "PowerAggregation", gt=0)
        check_real(self.fixed, "fixed", "PowerAggregation", ge=0)

    def cost(self, n: np.ndarray) -> np.ndarray:
        """D(n) = D₀ + b (n^q − 1)."""
        return self.fixed + self.b * (np.asarray(n, dtype=np.float64) ** self.q - 1.0)

    def __repr__(self) -> str:
        return _repr_with_fixed(self, "b", "q")


def _repr_with_fixed(cost: AggregationCost, *names: str) -> str:
    """The dataclass repr, with ``fixed`` only where it is not 0 (the paper's case)."""
    names = (*names, "fixed") if cost.fixed else names  # type: ignore[attr-defined]
    args = ", ".join(f"{k}={getattr(cost, k)!r}" for k in names)
    return f"{type(cost).__name__}({args})"


class CallableAggregation(AggregationCost):
    """A user's own aggregation cost ``func(n)``; D(1) >= 0 and monotonicity are checked
    on the arms used by :func:`eegrad.Arms.from_costs`."""

    def __init__(self, func: Callable[[np.ndarray], np.ndarray]):
        self.func = check_callable(func, "func", "CallableAggregation")

    def cost(self, n: np.ndarray) -> np.ndarray:
        """D(n) by the user's function, elementwise."""
        n = np.asarray(n, dtype=np.float64)
        return np.asarray(np.vectorize(self.func, otypes=[float])(n), dtype=np.float64)

    def __repr__(self) -> str:
        return f"CallableAggregation(func={self.func!r})"


def as_aggregation(value: Any, owner: str) -> AggregationCost:
    """``value`` as an :class:`AggregationCost`: itself, or a callable n -> D(n) wrapped in
    :class:`CallableAggregation`; anything else is a ``TypeError`` naming ``owner``."""
    if isinstance(value, AggregationCost):
        return value
    if callable(value):
        return CallableAggregation(value)
    raise InvalidParameterTypeError(
        f"The 'aggregation' parameter of {owner} must be an AggregationCost or a "
        f"callable n -> D(n). Got {value!r} instead."
    )


def batch_sizes(spend: np.ndarray, c_min: float, cost_per_sample: float) -> np.ndarray:
    r"""Turn each arm's per-gradient spend (B − D(n))/n (``Arms.spend``) into a local batch
    size, the fidelity knob of sample-average gradients: :math:`\lfloor (x - c_{\min}) / s
    \rfloor` for spend x and cost s per sample.

    Raises
    ------
    InvalidParameterError
        If some arm's spend buys no sample (name the arm).

    Examples
    --------
    >>> batch_sizes(np.array([30.0, 14.875]), c_min=2.0, cost_per_sample=0.5)
    array([56, 25])
    """
    spend = np.asarray(spend, dtype=np.float64)
    c_min = check_real(c_min, "c_min", "batch_sizes", ge=0)
    s = check_real(cost_per_sample, "cost_per_sample", "batch_sizes", gt=0)
    b = np.floor((spend - c_min) / s + 1e-9).astype(np.int64)
    if np.any(b < 1):
        n = int(np.argmax(b < 1)) + 1
        raise fail("spend", "batch_sizes", f"enough for one sample (>= c_min + s = {c_min + s:g})",
                   f"{spend[n - 1]:g} for arm n = {n}")  # fmt: skip
    return b


def fit_power_cost(theta: np.ndarray, cost: np.ndarray) -> PowerCost:
    r"""Fit :math:`C(\theta) = c_{\min} + a \theta^p` to measured (fidelity, cost) pairs, e.g.
    batch sizes and the seconds a gradient took, by least squares on the costs (SciPy's
    ``least_squares`` with c_min >= 0, a > 0, p > 0).

    Examples
    --------
    >>> th = np.array([1.0, 2, 4, 8, 16, 32])
    >>> fit = fit_power_cost(th, 0.5 + 0.1 * th**1.5)
    >>> round(fit.c_min, 6), round(fit.a, 6), round(fit.p, 6)
    (0.5, 0.1, 1.5)
    """
    from scipy.optimize import least_squares

    theta = np.asarray(theta, dtype=np.float64)
    cost = np.asarray(cost, dtype=np.float64)
    if theta.shape != cost.shape or theta.ndim != 1 or theta.size < 3:
        raise fail("theta", "fit_power_cost", "a 1-D array of >= 3 fidelities matching 'cost'",
                   theta.shape)  # fmt: skip
    if not (np.all(np.isfinite(theta)) and np.all(theta > 0) and np.all(np.isfinite(cost))):
        raise fail("theta", "fit_power_cost", "finite fidelities > 0 with finite costs", theta)

    def resid(x: np.ndarray) -> np.ndarray:
        return x[0] + np.exp(x[1]) * theta ** np.exp(x[2]) - cost

    spread = max(float(np.ptp(cost)), 1e-12)
    x0 = np.array([max(float(cost.min()) * 0.5, 0.0), np.log(spread / np.ptp(theta)), 0.0])
    res = least_squares(resid, x0, bounds=([0.0, -np.inf, -np.inf], np.inf), xtol=1e-15,
                        ftol=1e-15, gtol=1e-15)  # fmt: skip
    c_min, log_a, log_p = res.x
    return PowerCost(c_min=float(c_min), a=float(np.exp(log_a)), p=float(np.exp(log_p)))
