r"""The mini-batch oracle MBO(n, B, w) of Section 2: batched noisy gradients.

A gradient of fidelity θ is :math:`g(w, \theta) = \nabla F(w) + U(w, \theta)` (eq. model) with
:math:`\mathrm{Cov}\,U = \theta^{-1} M(w)`, M diagonal. MBO(n) averages n independent such
gradients of fidelity θ_n (eq. minibatch), so its output has covariance σ_n² M(w).

Noise families (unit-variance components, all sub-Gaussian, eq. subGaussian):

- :class:`Gaussian` (default): the average of n Gaussians is Gaussian, so it is drawn directly
  as N(0, σ_n² M(w)) — one d-vector of normals per round and realization.
- :class:`Rademacher` and :class:`Uniform`: the n individual gradients are drawn and averaged
  as eq. (minibatch) says. Each round draws N d-vectors per realization (realization r uses
  the first n_r of them), so their cost grows with N.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._random import RealizationStreams
from ._validation import InvalidParameterTypeError, check_callable
from .arms import Arms
from .objectives import Objective

__all__ = [
    "CallableOracle",
    "Gaussian",
    "GaussianOracle",
    "MiniBatchOracle",
    "NoiseFamily",
    "Rademacher",
    "RademacherOracle",
    "Truth",
    "Uniform",
    "UniformOracle",
]


@dataclass(frozen=True)
class NoiseFamily:
    """A family of unit-variance, zero-mean, sub-Gaussian noise components.

    Attributes
    ----------
    name : str
    kind : str
        What the random streams draw: ``"normal"``, ``"rademacher"`` or ``"uniform"``.
    direct : bool
        Whether the mean of n gradients is drawn directly (only exact for Gaussians).
    """

    name: str
    kind: str
    direct: bool


def Gaussian(direct: bool = True) -> NoiseFamily:
    """Gaussian components; ``direct=False`` draws the n individual gradients instead."""
    return NoiseFamily("gaussian", "normal", bool(direct))


def Rademacher() -> NoiseFamily:
    """Components ±1 with probability ½ each (sub-Gaussian with parameter 1)."""
    return NoiseFamily("rademacher", "rademacher", False)


def Uniform() -> NoiseFamily:
    """Components uniform on [−√3, √3] (unit variance, sub-Gaussian)."""
    return NoiseFamily("uniform", "uniform", False)


NOISE_FAMILIES: dict[str, Callable[[], NoiseFamily]] = {
    "gaussian": Gaussian,
    "rademacher": Rademacher,
    "uniform": Uniform,
}


@dataclass(frozen=True)
class Truth:
    """What a simulator knows and an algorithm does not: the arms' σ_n² and S(w) = Tr M(w).

    Selectors with ``beta="oracle"``, ``P="oracle"`` and :class:`~eegrad.OptimalArm` read it.
    """

    sigma2: np.ndarray  # shape=(N,)
    S: np.ndarray  # shape=(R,)


class IterateOracle:
    """The oracle at fixed iterates w (R, d): ∇F(w) and √M(w) computed once, then sampled."""

    def __init__(self, oracle: MiniBatchOracle, w: np.ndarray):
        self.oracle = oracle
        self.arms = oracle.arms
        self.grad = oracle.objective.grad(w)  # shape=(R, d)
        m_diag = oracle.noise_diag(w, self.grad)
        self.sqrt_m = np.sqrt(m_diag)  # shape=(R, d)
        self.S = m_diag.sum(axis=1)  # shape=(R,)
        self._scale_mean = np.sqrt(self.arms.sigma2)  # std of the mean, per unit of √M
        self._scale_one = np.sqrt(1.0 / self.arms.theta)  # std of one gradient
        self._inv_n = 1.0 / self.arms.n

    def truth(self) -> Truth:
        return Truth(sigma2=self.arms.sigma2, S=self.S)

    def sample_mean(
        self, counts: np.ndarray, T: int, streams: RealizationStreams
    ) -> np.ndarray | None:
        """The mean of T Gaussian outputs with known pulls ``counts`` (N,), drawn at once:
        N(∇F, (Σ_n γ_n σ_n²/T²) M(w)). None where the noise is not Gaussian drawn directly."""
        noise = self.oracle.noise
        if not (noise.direct and noise.kind == "normal"):
            return None
        z = streams.draw(noise.kind, (self.grad.shape[1],))
        scale = np.sqrt(counts @ self.arms.sigma2) / T
        return self.grad + (scale * self.sqrt_m) * z

    def sample(self, arms: np.ndarray, streams: RealizationStreams) -> np.ndarray:
        """One round: G_t(w, n) for each realization's arm index (0-based), shape (R, d)."""
        noise = self.oracle.noise
        d = self.grad.shape[1]
        if noise.direct:
            z = streams.draw(noise.kind, (d,))
            return self.grad + (self._scale_mean[arms][:, None] * self.sqrt_m) * z
        z = streams.draw(noise.kind, (self.arms.N, d))  # shape=(R, N, d)
        csum = np.cumsum(z, axis=1)
        mean = csum[np.arange(arms.shape[0]), arms] * self._inv_n[arms][:, None]
        return self.grad + (self._scale_one[arms][:, None] * self.sqrt_m) * mean


class MiniBatchOracle:
    r"""The mini-batch oracles MBO(n, B, w), n = 1..N, on an objective.

    Parameters
    ----------
    objective : Objective
        F, ∇F and the default noise shape M(w) = diag(∇F(w)²).
    arms : Arms
        σ_n² and θ_n of each mini-batch size.
    noise : NoiseFamily or str
        ``"gaussian"`` (default), ``"rademacher"`` or ``"uniform"``, or a :class:`NoiseFamily`.
    M : callable, optional
        ``M(w, grad) -> diag M(w)`` of shape (R, d), overriding the objective's default.
    """

    def __init__(
        self,
        objective: Objective,
        arms: Arms,
        noise: NoiseFamily | str = "gaussian",
        M: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    ):
        owner = type(self).__name__
        if not isinstance(objective, Objective):
            raise InvalidParameterTypeError(
                f"The 'objective' parameter of {owner} must be an Objective (e.g. Quadratic). "
                f"Got {objective!r} instead."
            )
        if not isinstance(arms, Arms):
            raise InvalidParameterTypeError(
                f"The 'arms' parameter of {owner} must be an Arms. Got {arms!r} instead."
            )
        if isinstance(noise, str):
            if noise not in NOISE_FAMILIES:
                raise InvalidParameterTypeError(
                    f"The 'noise' parameter of {owner} must be one of "
                    f"{sorted(NOISE_FAMILIES)}. Got {noise!r} instead."
                )
            noise = NOISE_FAMILIES[noise]()
        if not isinstance(noise, NoiseFamily):
            raise InvalidParameterTypeError(
                f"The 'noise' parameter of {owner} must be a NoiseFamily or a name. "
                f"Got {noise!r} instead."
            )
        self.objective = objective
        self.arms = arms
        self.noise = noise
        self._M = None if M is None else check_callable(M, "M", owner)

    @property
    def d(self) -> int:
        """Dimension d of the gradients."""
        return self.objective.d

    def noise_diag(self, w: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """Diagonal of M(w), shape (R, d)."""
        if self._M is None:
            return self.objective.noise_diag(w, grad)
        return np.asarray(self._M(w, grad), dtype=np.float64)

    def at(self, w: np.ndarray) -> IterateOracle:
        """The oracle at iterates ``w`` of shape (R, d)."""
        return IterateOracle(self, w)

    def with_arms(self, arms: Arms) -> MiniBatchOracle:
        """The same objective and noise with other arms (e.g. another budget B_k)."""
        return MiniBatchOracle(self.objective, arms, self.noise, self._M)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.objective!r}, {self.arms!r}, noise={self.noise.name!r})"
        )


class GaussianOracle(MiniBatchOracle):
    """:class:`MiniBatchOracle` with Gaussian noise, the setting of the paper's Section 6."""

    def __init__(self, objective: Objective, arms: Arms, M: Any = None):
        super().__init__(objective, arms, Gaussian(), M)


class RademacherOracle(MiniBatchOracle):
    """:class:`MiniBatchOracle` with Rademacher noise (n individual gradients averaged)."""

    def __init__(self, objective: Objective, arms: Arms, M: Any = None):
        super().__init__(objective, arms, Rademacher(), M)


class UniformOracle(MiniBatchOracle):
    """:class:`MiniBatchOracle` with uniform noise (n individual gradients averaged)."""

    def __init__(self, objective: Objective, arms: Arms, M: Any = None):
        super().__init__(objective, arms, Uniform(), M)


class _CallableAtIterate:
    def __init__(self, oracle: CallableOracle, w: np.ndarray):
        self.oracle = oracle
        self.arms = oracle.arms
        self.w = w

    def truth(self) -> None:
        return None

    def sample(self, arms: np.ndarray, streams: RealizationStreams) -> np.ndarray:
        out = self.oracle.func(self.w, arms + 1, streams.shared)
        return np.asarray(out, dtype=np.float64)


class CallableOracle:
    """An oracle given by a function, e.g. a user's own gradient code.

    Parameters
    ----------
    func : callable
        ``func(w, n, rng) -> gradients`` with ``w`` of shape (R, d), ``n`` the mini-batch sizes
        (1..N) of shape (R,), and ``rng`` a ``numpy.random.Generator``; returns shape (R, d).
    arms : Arms
        The arms (only N is used by the algorithm; σ_n² is used by baselines that need it).
    d : int
        Dimension of the gradients.

    Notes
    -----
    The simulator cannot know S(w) for such an oracle, so selectors with ``"oracle"``
    constants raise an error with it.
    """

    def __init__(self, func: Callable[..., Any], arms: Arms, d: int):
        self.func = check_callable(func, "func", "CallableOracle")
        self.arms = arms
        self.d = int(d)

    def at(self, w: np.ndarray) -> _CallableAtIterate:
        """The oracle at iterates w (R, d), whose draws call the user's function."""
        return _CallableAtIterate(self, w)
