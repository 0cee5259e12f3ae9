"""Baselines: each fixed oracle MBO(n), the optimal oracle MBO(n*), round-robin and greedy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import check_integer, fail
from .base import IndexSelector, KernelSpec, Selector
from .registry import register_rule

__all__ = ["FixedArm", "Greedy", "OptimalArm", "RoundRobin"]


@register_rule("fixed", label="MBO(n)", example={"n": 1})
class FixedArm(Selector):
    """Always the mini-batch oracle MBO(n) (n is the paper's mini-batch size, 1-based).

    Parameters
    ----------
    n : int
        Mini-batch size, 1 <= n <= N.
    """

    uses_statistics = False

    def __init__(self, n: int):
        super().__init__()
        self.n = check_integer(n, "n", "FixedArm", ge=1)

    def init(self, R, N, d, truth=None, streams=None) -> None:
        """As :meth:`Selector.init`; n must be an arm (n <= N)."""
        if self.n > N:
            raise fail("n", "FixedArm", f"a mini-batch size in 1..N = 1..{N}", self.n)
        super().init(R, N, d, truth, streams)

    def get_params(self) -> dict[str, Any]:
        """``{'n': n}``."""
        return {"n": self.n}


    @classmethod
    def method_name(cls, params: Mapping[str, Any]) -> str:
        """``mbo<n>``: the fixed oracle MBO(n)."""
        return f"mbo{params['n']}"

    @classmethod
    def method_legend(cls, params: Mapping[str, Any], label: str) -> str:
        """``MBO(n)``."""
        return f"MBO({params['n']})"

    def kernel_spec(self, rounds: int) -> KernelSpec:
        """The compiled rule: arm n − 1 every round."""
        return KernelSpec("index", "fixed", (self.n - 1.0,), keep_stats=False)

    def _select(self, t: int) -> np.ndarray:
        return np.full(self._shape[0], self.n - 1, dtype=np.int64)

    def oblivious_counts(self, T: int) -> np.ndarray:
        """All T pulls on arm n."""
        counts = np.zeros(self._shape[1], dtype=np.int64)
        counts[self.n - 1] = T
        return counts


@register_rule("optimal", label="optimal oracle")
class OptimalArm(Selector):
    """The optimal mini-batch oracle MBO(n*), n* = argmin σ_n² (Theorem 1's comparator).

    It reads σ_n² from the simulator, so it exists only where the truth is known.
    """

    uses_statistics = False
    needs_truth = True

    def _select(self, t: int) -> np.ndarray:
        n_star = int(np.argmin(self.truth.sigma2))
        return np.full(self._shape[0], n_star, dtype=np.int64)

    def kernel_spec(self, rounds: int) -> KernelSpec:
        """The compiled rule: arm n* every round."""
        return KernelSpec("index", "optimal", (float(np.argmin(self.truth.sigma2)),),
                          keep_stats=False)  # fmt: skip

    def oblivious_counts(self, T: int) -> np.ndarray:
        """All T pulls on n* = argmin σ_n²."""
        counts = np.zeros(self._shape[1], dtype=np.int64)
        counts[int(np.argmin(self.truth.sigma2))] = T
        return counts


@register_rule("round_robin", label="round-robin")
class RoundRobin(Selector):
    """Arms 1..N in turn, whatever was observed (pure exploration)."""

    uses_statistics = False

    def _select(self, t: int) -> np.ndarray:
        return np.full(self._shape[0], (t - 1) % self._shape[1], dtype=np.int64)

    def kernel_spec(self, rounds: int) -> KernelSpec:
        """The compiled rule: arms 1..N in turn."""
        return KernelSpec("index", "round_robin", keep_stats=False)

    def oblivious_counts(self, T: int) -> np.ndarray:
        """T split as evenly as rounds allow, the first arms first."""
        N = self._shape[1]
        return T // N + (np.arange(N) < T % N).astype(np.int64)


@register_rule("greedy", label="greedy")
class Greedy(IndexSelector):
    """Each arm twice, then the arm of smallest V_t(n) (no confidence term)."""

    def kernel_spec(self, rounds: int) -> KernelSpec:
        """The compiled index: V_t(n)."""
        return KernelSpec("index", "greedy")

    def index(self, t: int) -> np.ndarray:
        """V_t(n) of every arm, no confidence term, shape (R, N)."""
        return self.stats.variance_trace()
