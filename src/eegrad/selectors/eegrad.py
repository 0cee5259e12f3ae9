"""EE-Grad's selection rule: Algorithm 1 with the index of eq. (pickOracle)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import InvalidParameterError, InvalidParameterTypeError, check_real
from ..theory import funcf_factors, funcf_width
from .base import IndexSelector, KernelSpec
from .registry import register_rule

__all__ = ["EEGrad"]

ORACLE = "oracle"


def _constant(value: Any, name: str) -> float | str:
    if isinstance(value, str):
        if value != ORACLE:
            raise InvalidParameterTypeError(
                f"The {name!r} parameter of EEGrad must be a float > 0 or the string 'oracle'. "
                f"Got {value!r} instead."
            )
        return value
    return check_real(value, name, "EEGrad", gt=0, ref="eq. funcf")


@register_rule("eegrad", label="EE-Grad", example={"beta": 50.0, "P": 1.0})
class EEGrad(IndexSelector):
    r"""The paper's rule (Algorithm 1): each arm twice in rounds 1..2N (n = 1..N, 1..N), then

    .. math::

        n_t \in \arg\min_{n=1..N}\left[V_t(n) - f\!\left(\frac{\alpha \ln t}{\gamma_t(n) - 1}
        \right)\right]  \qquad \text{(eq. pickOracle)}

    with f from eq. (funcf), V_t(n) the trace of arm n's sample covariance and γ_t(n) its
    pulls in rounds 1..t−1. Ties go to the smallest n.

    Parameters
    ----------
    alpha : float
        α > 2 (Lemma 4).
    beta : float or "oracle"
        β ≥ max_n σ_n². ``"oracle"``: the simulator's true max σ_n².
    P : float or "oracle"
        P ≥ S(w) = Tr M(w). ``"oracle"``: the simulator's S(w) of each realization.
    c : float
        The absolute constant of the Hanson–Wright inequality (Lemma 2), c > 0. The paper
        leaves it unspecified; small c explores more.

    Examples
    --------
    >>> import numpy as np
    >>> from eegrad import Arms, Quadratic, GaussianOracle, EEGrad, estimate_gradient
    >>> oracle = GaussianOracle(Quadratic(d=2), Arms(sigma2=[200.0, 104.0, 66.8]))
    >>> res = estimate_gradient(oracle, EEGrad(alpha=2.5, beta=200.0, P=1.25, c=10.0),
    ...                         w=np.tile([1.0, -0.5], (4, 1)), T=200, rng=1)
    >>> res.counts.sum(axis=1)
    array([200, 200, 200, 200])
    """

    def __init__(
        self,
        alpha: float = 2.5,
        beta: float | str = ORACLE,
        P: float | str = ORACLE,
        c: float = 1.0,
    ):
        super().__init__()
        self.alpha = check_real(alpha, "alpha", "EEGrad", gt=2, ref="eq. pickOracle")
        self.beta = _constant(beta, "beta")
        self.P = _constant(P, "P")
        self.c = check_real(c, "c", "EEGrad", gt=0, ref="eq. funcf")
        self.needs_truth = ORACLE in (self.beta, self.P)

    def get_params(self) -> dict[str, Any]:
        """``alpha``, ``beta``, ``P``, ``c``."""
        return {"alpha": self.alpha, "beta": self.beta, "P": self.P, "c": self.c}


    @classmethod
    def method_name(cls, params: Mapping[str, Any]) -> str:
        """``eegrad``, or ``eegrad-c10`` where c differs from its default 1."""
        c = params.get("c")
        return cls.rule_name if c in (None, 1.0) else f"{cls.rule_name}-c{c:g}"

    @classmethod
    def method_legend(cls, params: Mapping[str, Any], label: str) -> str:
        """The label, with c where it differs from its default 1."""
        c = params.get("c")
        return label if c in (None, 1.0) else f"{label}, c = {c:g}"

    def _truth_error(self) -> InvalidParameterError:
        which = [n for n in ("beta", "P") if getattr(self, n) == ORACLE]
        return InvalidParameterError(
            f"The {' and '.join(repr(w) for w in which)} parameter of EEGrad is 'oracle', "
            "which needs a simulated oracle that knows σ_n² and S(w); this oracle does not. "
            "Give numbers instead."
        )

    def constants(self) -> tuple[Any, Any]:
        """(β, P) in force: numbers, or the truth's max σ_n² and S(w) (shape (R, 1))."""
        beta = float(np.max(self.truth.sigma2)) if self.beta == ORACLE else self.beta
        P = self.truth.S[:, None] if self.P == ORACLE else self.P
        return beta, P

    def index(self, t: int) -> np.ndarray:
        r"""V_t(n) − f(α ln t/(γ_t(n) − 1)), shape (R, N).

        f(x) of eq. (funcf) is evaluated in the factorised form
        :math:`\beta P k_1 s g \max(1, k_2 s g)` with :math:`s = \sqrt{\ln t}`,
        :math:`g = (\gamma - 1)^{-1/2}`, :math:`k_1 = \sqrt{\alpha d / c}`,
        :math:`k_2 = \sqrt{\alpha / (c d)}` — equal to :func:`eegrad.theory.f` up to rounding,
        and the exact operations of the compiled engine, so both engines pick the same arms.
        """
        beta, P = self.constants()
        g = 1.0 / np.sqrt(self.stats.count - 1)
        k1, k2, s = self.factors(t)
        return self.stats.variance_trace() - funcf_width(beta, P, k1, k2, s, g)

    def kernel_spec(self, rounds: int) -> KernelSpec:
        """The compiled index: β, k₁, k₂ of eq. (funcf) and P per realization."""
        beta, P_in = self.constants()
        R = self._shape[0]
        P = np.full(R, P_in) if np.ndim(P_in) == 0 else np.asarray(P_in, dtype=float).reshape(R)
        k1, k2, _ = self.factors(1)
        return KernelSpec("index", "eegrad", (float(beta), k1, k2), P=P)

    def factors(self, t: int) -> tuple[float, float, float]:
        """k₁, k₂ of eq. (funcf) (:func:`eegrad.theory.funcf_factors`) and s = √(ln t)."""
        k1, k2 = funcf_factors(self.alpha, self.c, self._shape[2])
        return k1, k2, math.sqrt(math.log(t))
