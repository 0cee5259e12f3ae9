"""The rules with memory across SGD iterates: kl-LCB and Thompson sampling on the pooled
evidence of all iterates (the model and its fit: :mod:`eegrad.selectors.memory`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import check_integer, check_real, renamed
from .base import RUN_ROUNDS
from .memory import MemoryRule
from .registry import register_rule
from .rules import kl_lcb_ratio, kl_threshold

__all__ = ["MemoryKLLCB", "MemoryThompson"]


@register_rule("memory_kl_lcb", label="kl-LCB with memory")
class MemoryKLLCB(MemoryRule):
    r"""kl-LCB on the pooled evidence of all iterates:

    .. math:: \mathrm{index}_t(n) = \hat\sigma_n^2 / x_n, \quad
        x_n - 1 - \ln x_n = \frac{2 (\ln t + \mathrm{loglog}\,\ln\ln t)}{\nu_n}, \quad
        \nu_n = \sum_{k,i} \nu_{k,n},

    with σ̂² the maximum-likelihood fit of the module's model and t counting rounds across
    iterates. Approximation: the iterates' scales m_k are plugged in at their estimates.
    Reference: kl-UCB (Garivier & Cappé, 2011) for a scale.

    By default the rule is not told K (anytime). **Told the horizon** H (``horizon``; the
    rounds of the whole run, K·T in the paper's setting) it replaces ln t + loglog · ln ln t by the
    remaining rounds per arm,

    .. math:: \ln^+\frac{H - t + 1}{N\,p_n},

    p_n the arm's pulls so far over all iterates (discounted like the evidence): exploration
    pays only while rounds remain to use what it finds — the finite-horizon form of
    MOSS / kl-UCB++ (Audibert & Bubeck, 2009; Ménard & Garivier, 2017), with the rounds left in
    place of the whole horizon. The level reaches 0 at the last round, where the index is the
    fitted σ̂²; past H it stays 0 (greedy), so ``horizon`` must not be set below the run's
    length, and a :class:`RuntimeWarning` says when it was.

    Parameters
    ----------
    loglog : float
        Weight of the ln ln t term, >= 0 (anytime form only). Formerly ``c``.
    shape : "auto", "diagonal" or "scalar"
        The model of M(w_k) ("auto": diagonal for d <= 16, scalar above).
    discount : float
        Weight per iterate of age of past evidence, in (0, 1] (1: keep everything).
    horizon : int or None
        The run's total rounds H, >= 1, or None for the anytime rule.
    window : int or None
        Past iterates refitted exactly (see the module's notes); None: all.
    """

    run_rounds_params = ("horizon",)

    def __init__(
        self,
        loglog: float = 0.0,
        shape: str = "auto",
        discount: float = 1.0,
        horizon: int | None = None,
        window: int | None = 64,
        *,
        c: float | None = None,
    ):
        super().__init__(shape, discount, window=window)
        loglog = renamed(loglog, c, "loglog", "c", "MemoryKLLCB", 0.0)
        self.loglog = check_real(loglog, "loglog", "MemoryKLLCB", ge=0)
        self.horizon = None if horizon is None else check_integer(horizon, "horizon",
                                                                  "MemoryKLLCB", ge=1)  # fmt: skip

    def get_params(self) -> dict[str, Any]:
        """``loglog``, ``shape``, ``discount``, ``window``, ``horizon``."""
        return {"loglog": self.loglog, **super().get_params(), "horizon": self.horizon}


    @classmethod
    def method_name(cls, params: Mapping[str, Any]) -> str:
        """``memory_kl_lcb``, or ``memory_kl_lcb-h<horizon>`` where told a horizon (``KT``:
        a study's K·T rounds)."""
        h = params.get("horizon")
        return cls.rule_name if h is None else f"{cls.rule_name}-h{h}"

    @classmethod
    def method_legend(cls, params: Mapping[str, Any], label: str) -> str:
        """The label, with the horizon where told one."""
        h = params.get("horizon")
        return label if h is None else f"{label}, told {'K·T' if h == RUN_ROUNDS else h}"

    def _level(self, t: int) -> float | np.ndarray:
        if self.horizon is None:
            return kl_threshold(t, self.loglog)
        self.check_horizon(t, stacklevel=5)
        N = self._shape[1]
        pulls = np.maximum(self.pulls(), 1.0)
        return np.log(np.maximum(max(self.horizon - t + 1, 0) / (N * pulls), 1.0))

    def init(self, R, N, d, truth=None, streams=None) -> None:
        """As :meth:`MemoryRule.init`; the horizon warning is reset."""
        super().init(R, N, d, truth, streams)
        self._warned = False

    def _kernel_rule(self) -> tuple[str, tuple[float, float], bool]:
        horizon = -1.0 if self.horizon is None else float(self.horizon)
        return "memory_kl_lcb", (self.loglog, horizon), False

    def check_horizon(self, t: int, stacklevel: int = 2) -> None:
        """Warn once (:class:`RuntimeWarning`) when round t is past the horizon told."""
        if self.horizon is not None and t > self.horizon and not self._warned:
            self._warned = True
            warnings.warn(f"MemoryKLLCB was told horizon={self.horizon} rounds and is at round "
                          f"{t}: it chooses greedily from now on.", RuntimeWarning,
                          stacklevel=stacklevel)  # fmt: skip

    def index(self, t: int, sigma2: np.ndarray, nu: np.ndarray) -> np.ndarray:
        """σ̂_n² / x_n, the kl-LCB of each arm's σ² (the class's formula)."""
        level = self._level(t)
        with np.errstate(divide="ignore"):
            x = kl_lcb_ratio(np.where(nu > 0, 2.0 * level / nu, np.inf))
        return np.where(nu > 0, sigma2 / x, -np.inf)


@register_rule("memory_thompson", label="Thompson with memory")
class MemoryThompson(MemoryRule):
    r"""Posterior sampling of σ_n² on the pooled evidence of all iterates:

    .. math:: \tilde\sigma_n^2 = \nu_n \hat\sigma_n^2 / (2 g_n), \qquad
        g_n \sim \mathrm{Gamma}(\nu_n / 2, 1),

    the inverse-gamma posterior under the Jeffreys prior given the sufficient statistic
    ν_n σ̂_n², with the iterates' scales m_k plugged in at their estimates (the approximation).
    Reference: Thompson (1933); Kaufmann, Korda & Munos (2012).

    Parameters
    ----------
    shape, discount, window
        As :class:`MemoryKLLCB`.
    seed : int
        Seed for use without the simulator's streams.
    """

    def __init__(
        self, shape: str = "auto", discount: float = 1.0, seed: int = 0, window: int | None = 64
    ):
        super().__init__(shape, discount, window=window)
        self.seed = check_integer(seed, "seed", "MemoryThompson", ge=0)
        self._own_rng = np.random.default_rng(self.seed)

    def get_params(self) -> dict[str, Any]:
        """``shape``, ``discount``, ``window``, ``seed``."""
        return {**super().get_params(), "seed": self.seed}

    def _kernel_rule(self) -> tuple[str, tuple[float, float], bool]:
        return "memory_thompson", (0.0, -1.0), True

    def _choice_generator(self) -> np.random.Generator:
        return self._own_rng if self.streams is None else self.streams.selector_generators[0]

    def index(self, t: int, sigma2: np.ndarray, nu: np.ndarray) -> np.ndarray:
        """A posterior draw of each arm's σ² (the class's formula)."""
        shape = np.maximum(nu, 1e-12) / 2.0
        if self.streams is None:
            g = self._own_rng.standard_gamma(shape)
        else:
            g = self.streams.per_block(lambda gen, sl: gen.standard_gamma(shape[sl]),
                                       np.empty_like(shape))  # fmt: skip
        # Arms without evidence (ν = 0) come first (−inf); a gamma draw that underflows to 0 at a
        # tiny shape is a draw far in the inverse gamma's tail (+inf), as the law says.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.where(nu > 0, nu * sigma2 / (2.0 * g), -np.inf)
