r"""Selection rules that need none of the paper's unknown constants (β, P, c).

Each arm n's trace statistic V_t(n) estimates s_n = σ_n² S(w). For Gaussian noise with
isotropic M(w), :math:`\nu V_t(n) / s_n \sim \chi^2_\nu` with :math:`\nu = d(\gamma_t(n) - 1)`
degrees of freedom; for a general diagonal M the law is a weighted sum of χ² variables whose
effective degrees of freedom (Satterthwaite) lie between γ − 1 and d(γ − 1). The rules below take
``dims``, the effective dimensions per pull: ``"d"`` (the isotropic value) or a number in
[1, d] — ``dims=1`` is the conservative choice for strongly non-isotropic M(w) (it widens every
interval). Since all arms share S(w) at an iterate, comparing scales s_n compares σ_n².

All three pull every arm twice first (as Algorithm 1) and then the arm of smallest index, ties to
the smallest n, vectorised over realizations and arms.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import InvalidParameterTypeError, check_integer, check_real, fail, renamed
from .base import IndexSelector, KernelSpec
from .registry import register_rule

__all__ = ["KLLCB", "ChiSquareLCB", "ThompsonVariance", "kl_lcb_ratio"]


def _dims(value: Any, owner: str) -> float | str:
    if isinstance(value, str):
        if value != "d":
            raise InvalidParameterTypeError(
                f"The 'dims' parameter of {owner} must be 'd' or a float >= 1. "
                f"Got {value!r} instead."
            )
        return value
    return check_real(value, "dims", owner, ge=1)


class _ScaleRule(IndexSelector):
    """Shared pieces: effective degrees of freedom ν = dims · (γ − 1) and V."""

    def __init__(self, dims: float | str = "d"):
        super().__init__()
        self.dims = _dims(dims, type(self).__name__)

    def init(self, R, N, d, truth=None, streams=None) -> None:
        """As :meth:`Selector.init`; a numeric ``dims`` must be at most d."""
        if self.dims != "d" and self.dims > d:
            raise fail("dims", type(self).__name__, f"'d' or a float in [1, d = {d}]", self.dims)
        super().init(R, N, d, truth, streams)

    def _per_pull(self) -> float:
        """Effective dimensions per pull: d, or the number given."""
        return float(self._shape[2] if self.dims == "d" else self.dims)

    def _nu_and_V(self) -> tuple[np.ndarray, np.ndarray]:
        d = self._shape[2]
        per_pull = d if self.dims == "d" else self.dims
        dof = self.stats.count - 1
        return per_pull * dof, self.stats.variance_trace()


@register_rule("chi2_lcb", label="χ²-LCB")
class ChiSquareLCB(_ScaleRule):
    r"""Lower confidence bound on each arm's scale from the χ² law of the trace statistic.

    .. math::

        \mathrm{index}_t(n) = \frac{\nu\,V_t(n)}{q_{\nu}(1 - t^{-e})}, \qquad
        \nu = \mathrm{dims}\,(\gamma_t(n) - 1),

    :math:`q_\nu(p)` the p-quantile of χ²_ν (SciPy's ``chdtri``), e the ``exponent``: with
    probability at least :math:`1 - t^{-e}` the index is below s_n. Reference: the χ² confidence
    interval for a Gaussian variance (e.g. Casella & Berger, *Statistical Inference*, §9.2), used as a UCB-type
    index as in Auer et al. (2002).

    Parameters
    ----------
    exponent : float
        Confidence exponent e, > 0 (δ_t = t^(−e)). Formerly ``alpha``, which is now EE-Grad's
        α only.
    dims : "d" or float
        Effective dimensions per pull (see the module's notes).
    """

    def __init__(self, exponent: float = 1.0, dims: float | str = "d", *,
                 alpha: float | None = None):  # fmt: skip
        super().__init__(dims)
        exponent = renamed(exponent, alpha, "exponent", "alpha", "ChiSquareLCB", 1.0)
        self.exponent = check_real(exponent, "exponent", "ChiSquareLCB", gt=0)

    def get_params(self) -> dict[str, Any]:
        """``exponent``, ``dims``."""
        return {"exponent": self.exponent, "dims": self.dims}

    def kernel_spec(self, rounds: int) -> KernelSpec:
        """The compiled index: the exponent and the dimensions per pull (the kernel calls the
        same SciPy function, only where the bounds from an arm's last quantile cannot decide
        the round's argmin: :func:`eegrad.engines.index_kernels.lazy_argmin`)."""
        return KernelSpec("index", "chi2_lcb", (self.exponent, self._per_pull()))

    def index(self, t: int) -> np.ndarray:
        """ν V_t(n) / q_ν(1 − t^(−e)) of every arm, shape (R, N)."""
        from scipy.special import chdtri

        nu, V = self._nu_and_V()
        # The quantile depends on ν only (t is shared): evaluate it once per distinct ν.
        distinct, where = np.unique(nu, return_inverse=True)
        q = chdtri(distinct, t ** (-self.exponent))[where].reshape(nu.shape)
        return nu * V / q


def kl_threshold(t: int, loglog: float) -> float:
    r"""The anytime kl-LCB level :math:`\ln t + \text{loglog} \cdot \ln\ln t` (the second term
    only once ln t > 1)."""
    lt = math.log(t)
    return lt + (loglog * math.log(lt) if lt > 1 else 0.0)


def kl_lcb_ratio(level: np.ndarray, iterations: int = 30) -> np.ndarray:
    r"""The root x >= 1 of :math:`x - 1 - \ln x = y` for each y = ``level`` >= 0 (Newton).

    h(x) = x − 1 − ln x is convex and increasing on [1, ∞). Newton's method starts at the
    root's expansion for small y, :math:`x_0 = 1 + s + s^2/3 + s^3/36` with :math:`s = \sqrt{2y}`
    (at least the float after 1): a start below the root is sent above it by the first step,
    from where the steps decrease monotonically to it. Each entry stops at its floating-point
    fixed point (or after ``iterations`` steps); y = 0 gives 1.
    """
    y = np.asarray(level, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # y = inf: unused
        x = kl_newton_start(y)
        for _ in range(iterations):
            step = kl_newton_step(x, y)
            if np.array_equal(step, x, equal_nan=True):  # every entry at its fixed point: done
                break
            x = step
    return np.where(y > 0, x, 1.0)


#: The float after 1: the smallest start of :func:`kl_lcb_ratio`'s Newton steps.
ONE_UP = float(np.nextafter(1.0, 2.0))


def kl_newton_start(y: Any) -> Any:
    """:func:`kl_lcb_ratio`'s start for level y (an array, or one float in the compiled
    index): 1 + s + s²/3 + s³/36 with s = √(2y), at least :data:`ONE_UP`."""
    s = np.sqrt(2.0 * y)
    return np.maximum(1.0 + s + s * s / 3.0 + s * s * s / 36.0, ONE_UP)


def kl_newton_step(x: Any, y: Any) -> Any:
    """One Newton step for x − 1 − ln x = y (arrays, or floats in the compiled index)."""
    return x - (x - 1.0 - np.log(x) - y) / (1.0 - 1.0 / x)


@register_rule("kl_lcb", label="kl-LCB")
class KLLCB(_ScaleRule):
    r"""The kl-LCB for a Gaussian scale: the smallest s with

    .. math::

        \frac{\nu}{2}\left(\frac{V}{s} - 1 - \ln\frac{V}{s}\right) \le
        \ln t + \mathrm{loglog}\,\ln\ln t, \qquad \nu = \mathrm{dims}\,(\gamma_t(n) - 1),

    i.e. s = V / x with x >= 1 the root of x − 1 − ln x = 2(ln t + loglog · ln ln t)/ν (Newton,
    vectorised; see :func:`kl_lcb_ratio`). The left side is ν times the Kullback–Leibler
    divergence between centred Gaussians of variances V and s per degree of freedom. Reference:
    kl-UCB, Garivier & Cappé (2011) and Cappé et al. (2013), here for the scale of a Gaussian.

    Parameters
    ----------
    loglog : float
        Weight of the ln ln t term, >= 0 (0: the plain ln t threshold). Formerly ``c``, which
        is now EE-Grad's Hanson–Wright constant only.
    dims : "d" or float
        Effective dimensions per pull; ``dims=1`` is the one-dimensional variant for
        non-isotropic M(w).
    """

    def __init__(self, loglog: float = 0.0, dims: float | str = "d", *, c: float | None = None):
        super().__init__(dims)
        loglog = renamed(loglog, c, "loglog", "c", "KLLCB", 0.0)
        self.loglog = check_real(loglog, "loglog", "KLLCB", ge=0)

    def get_params(self) -> dict[str, Any]:
        """``loglog``, ``dims``."""
        return {"loglog": self.loglog, "dims": self.dims}

    def kernel_spec(self, rounds: int) -> KernelSpec:
        """The compiled index: loglog and the dimensions per pull."""
        return KernelSpec("index", "kl_lcb", (self.loglog, self._per_pull()))

    def threshold(self, t: int) -> float:
        """The level ln t + loglog · ln ln t at round t."""
        return kl_threshold(t, self.loglog)

    def index(self, t: int) -> np.ndarray:
        """The kl-LCB V / x of every arm, shape (R, N)."""
        nu, V = self._nu_and_V()
        x = kl_lcb_ratio(2.0 * self.threshold(t) / nu)
        return V / x


@register_rule("thompson", label="Thompson (variance)")
class ThompsonVariance(_ScaleRule):
    r"""Posterior sampling of each arm's scale s_n = σ_n² S(w).

    With the Jeffreys prior p(s) ∝ 1/s and the χ²_ν law of ν V / s, the posterior of s is
    inverse-gamma, :math:`s \mid V \sim \mathrm{InvGamma}(\nu/2,\ \nu V / 2)`; each round
    draws :math:`\tilde s_n = \nu V_t(n) / (2 g_n)`, :math:`g_n \sim \mathrm{Gamma}(\nu/2, 1)`,
    and pulls the arm of smallest draw. Approximation: the χ² law is exact for Gaussian noise
    with isotropic M(w) (``dims="d"``); otherwise ν = dims · (γ − 1) is an effective value.
    Reference: Thompson (1933); Kaufmann, Korda & Munos (2012) for its regret.

    Parameters
    ----------
    dims : "d" or float
        Effective dimensions per pull.
    seed : int
        Seed for use without the simulator's streams (e.g. a user's training loop). In the
        simulator each block of realizations draws from its own stream, so results depend
        only on the simulation's seed.
    """

    def __init__(self, dims: float | str = "d", seed: int = 0):
        super().__init__(dims)
        self.seed = check_integer(seed, "seed", "ThompsonVariance", ge=0)
        self._own_rng = np.random.default_rng(self.seed)

    def get_params(self) -> dict[str, Any]:
        """``dims``, ``seed``."""
        return {"dims": self.dims, "seed": self.seed}

    def kernel_spec(self, rounds: int) -> KernelSpec:
        """The compiled index: the dimensions per pull; gamma draws from the selector streams."""
        return KernelSpec("index", "thompson", (self._per_pull(),), selector_stream=True)

    def index(self, t: int) -> np.ndarray:
        """A posterior draw ν V / (2g) of every arm's scale, shape (R, N)."""
        nu, V = self._nu_and_V()
        shape = nu / 2.0
        if self.streams is None:
            g = self._own_rng.standard_gamma(shape)
        else:
            g = self.streams.per_block(lambda gen, sl: gen.standard_gamma(shape[sl]),
                                       np.empty_like(shape))  # fmt: skip
        return nu * V / (2.0 * g)
