"""The running statistics of :class:`~eegrad.GradientEstimator`, kept in the gradient's own
array library: one backend for NumPy arrays and one for PyTorch tensors (on their device), each
with the running-mean-and-variance update (Welford) of its library, and one compiled pass over
the gradient (:mod:`eegrad.engines.loop_kernels`) that both use where Numba runs on their
arrays. The estimator (:mod:`eegrad.loop`) chooses the backend from the first gradient told."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .parts import is_torch as _is_torch
from .spread import pair_sum, weighted_spread
from .statistics import (
    welford_deviation,
    welford_deviation_torch,
    welford_fold,
    welford_fold_torch,
)

__all__ = ["CompiledRound", "NumpyBackend", "TorchBackend"]


class CompiledRound:
    """A round's statistics in one compiled pass (:func:`eegrad.engines.loop_kernels.tell_pass`)
    over NumPy arrays — the backend's own, or the NumPy views of CPU tensors. The arms' means
    are rows of ``buf`` (N + 1, d) through a slot map; a round writes the new mean to the spare
    row and commits by swapping slots, so a non-finite gradient changes nothing. The Gram row
    is a matrix-vector product over the N current means (BLAS, multithreaded where NumPy's
    is)."""

    def __init__(self, buf: np.ndarray):
        from .engines import loop_kernels

        self.kernel = loop_kernels.tell_pass
        self.buf = buf
        self.N = buf.shape[0] - 1
        self.slot = np.arange(self.N + 1)  # arm n's mean in row slot[n]; row slot[N] spare

    def clear(self) -> None:
        self.slot[:] = np.arange(self.N + 1)

    def update(self, arm: int, g: np.ndarray, ref: np.ndarray | None, cnt: int,
               with_row: bool) -> tuple[float, np.ndarray | None]:  # fmt: skip
        """(1 − 1/γ)‖δ‖² and, if ``with_row``, the Gram row; committed only if finite."""
        N, slot = self.N, self.slot
        new = self.buf[slot[N]]
        acc = self.kernel(g, g if ref is None else ref, ref is not None, self.buf[slot[arm]],
                          new, self.buf.dtype.type(cnt))  # fmt: skip
        inc = acc * ((cnt - 1) / cnt)
        if not math.isfinite(inc):
            return inc, None
        slot[arm], slot[N] = slot[N], slot[arm]
        if not with_row:
            return inc, None
        # Every row but the old mean's (now the spare, row slot[N]): two contiguous blocks.
        old, row = slot[N], np.empty(N + 1)
        row[:old] = self.buf[:old] @ new
        row[old + 1 :] = self.buf[old + 1 :] @ new
        return inc, row[slot[:N]]

    def weights(self, counts: np.ndarray) -> np.ndarray:
        """Per row of ``buf``: the count of the arm whose mean it holds (0 for the spare)."""
        w = np.zeros(self.N + 1)
        w[self.slot[: self.N]] = counts
        return w


class Backend:
    """What both backends share: the arms' means as rows of ``buf`` (N + 1, d; ``mean`` is the
    first N, the spare row is the compiled pass's), the reference r of the centred form, and
    the round's update — one compiled pass where :class:`CompiledRound` runs on the backend's
    arrays, else the backend's own increment, commit and Gram row.

    With ``centred`` the means are kept relative to the first gradient of the estimate, r, so
    that the Gram matrix of the means carries their differences without cancellation; the
    estimate is then r + Σ_n γ_n (m_n − r)/T."""

    buf: Any
    compiled: CompiledRound | None

    def __init__(self, N: int, centred: bool):
        # the reference path's means (its slots never move); none where T = 1 (no statistics)
        self.mean = None if self.buf is None else self.buf[:N]
        self.centred = centred
        self.ref: Any = None
        self.ref_host: np.ndarray | None = None  # the compiled pass's view of ref, made once

    def clear(self, centred: bool) -> None:
        if self.buf is not None:
            self.buf[...] = 0
        if self.compiled is not None:
            self.compiled.clear()
        self.centred, self.ref, self.ref_host = centred, None, None

    def update(self, arm: int, g: Any, cnt: int,
               with_row: bool) -> tuple[float, np.ndarray | None]:  # fmt: skip
        """The round told: (1 − 1/γ)‖δ‖² (NaN/Inf exactly when G is not finite, and then the
        state is unchanged) and, if ``with_row``, the pulled arm's Gram row."""
        if self.compiled is None:
            inc = self.increment(arm, g, cnt)
            if not math.isfinite(inc):
                return inc, None
            self.commit(arm, cnt)
            return inc, (self.gram_row(arm) if with_row else None)
        if self.centred and self.ref is None:  # the first gradient becomes r (m stays 0)
            inc = self.squared_norm(g) * 0.0
            if math.isfinite(inc):
                self.ref = self.copy(g)
                self.ref_host = self.host(self.ref)
            return inc, (np.zeros(self.compiled.N) if with_row else None)
        return self.compiled.update(arm, self.host(g), self.ref_host, cnt, with_row)

    def result_terms(self, counts: np.ndarray) -> tuple[np.ndarray, Any]:
        """Weights and rows whose product is Σ_n γ_n m_n: the counts and ``mean``, or, after
        the compiled pass has moved the means between rows, a weight per row of ``buf``."""
        if self.compiled is None:
            return counts, self.mean
        return self.compiled.weights(counts), self.buf


class NumpyBackend(Backend):
    """Statistics in NumPy: per round δ = G − m, ‖δ‖², δ/γ and m += δ/γ, in place, with no
    allocation (:func:`~eegrad.statistics.welford_deviation`, :func:`~eegrad.statistics.welford_fold`) (compiled: in one pass, :class:`CompiledRound`). The estimate
    Σ_t G_t = Σ_n γ_n m_n is formed once, in result()."""

    def __init__(self, N: int, d: int, dtype: Any, centred: bool = False, compiled: bool = False,
                 statistics: bool = True):  # fmt: skip
        self.dtype = np.dtype(np.float64 if dtype is None else dtype)
        self.buf = np.zeros((N + 1, d), dtype=self.dtype) if statistics else None
        self.delta = np.empty(d, dtype=self.dtype) if statistics else None
        kernel_dtype = self.dtype in (np.float32, np.float64)
        self.compiled = (CompiledRound(self.buf) if compiled and kernel_dtype and statistics
                         else None)  # fmt: skip
        super().__init__(N, centred)

    def convert(self, g: Any) -> np.ndarray:
        return np.asarray(g, dtype=self.dtype)

    def fits(self, g: Any) -> bool:
        return not _is_torch(g)

    def host(self, x: np.ndarray) -> np.ndarray:
        return x

    def copy(self, x: np.ndarray) -> np.ndarray:
        return x.copy()

    def squared_norm(self, x: np.ndarray) -> float:
        with np.errstate(invalid="ignore", over="ignore"):
            return float(np.dot(x, x))

    def increment(self, arm: int, g: np.ndarray, cnt: int) -> float:
        """δ = G − m_old into a buffer; returns (1 − 1/γ)‖δ‖² (NaN/Inf if G is not finite)."""
        x = g if self.ref is None else np.subtract(g, self.ref, out=self.delta)
        return float(welford_deviation(x, self.mean[arm], cnt, out=self.delta)[1])

    def commit(self, arm: int, cnt: int) -> None:
        """m ← m + δ/γ, in place."""
        if self.centred and self.ref is None:  # the first gradient (δ = G) becomes r
            self.ref = self.delta.copy()
            self.delta.fill(0.0)
        welford_fold(self.mean[arm], self.delta, cnt)

    def gram_row(self, arm: int) -> np.ndarray:
        """⟨m_n − r, m_arm − r⟩ for every n, shape (N,)."""
        return np.asarray(self.mean @ self.mean[arm], dtype=np.float64)

    def stack(self, parts: Any) -> np.ndarray:
        return np.asarray(np.stack([np.asarray(p) for p in parts]) if isinstance(parts, list | tuple)
                          else parts, dtype=self.dtype)  # fmt: skip

    def combine(self, parts: np.ndarray, weights: np.ndarray,
                spread: bool = False) -> tuple[np.ndarray, float, float | None]:  # fmt: skip
        r"""The weighted mean of the parts, their pair sum :math:`\sum_{i<j}\|g_i - g_j\|^2`
        and, with ``spread``, their weighted spread :math:`\sum_i\omega_i\|g_i - \bar g\|^2`
        (else None); both host floats from one float64 copy of the parts."""
        p = (weights / weights.sum()).astype(self.dtype)
        with np.errstate(invalid="ignore", over="ignore"):  # non-finite parts: y is NaN, checked
            g = np.asarray(parts, dtype=np.float64)
            q = float(weighted_spread(g, weights)) if spread else None
            return p @ parts, float(pair_sum(g, weights)), q

    def from_host(self, x: np.ndarray) -> np.ndarray:
        """A host float64 vector in the backend's dtype."""
        return x.astype(self.dtype)

    def result(self, counts: np.ndarray, T: int) -> np.ndarray:
        weights, rows = self.result_terms(counts)
        out = weights.astype(self.dtype) @ rows / T
        return out if self.ref is None else out + self.ref


class TorchBackend(Backend):
    """Statistics as tensors on the gradients' device; one scalar reaches the host per round
    (on the CPU, with ``compiled``, the round runs as the NumPy backend's compiled pass over
    the tensors' NumPy views)."""

    def __init__(self, N: int, d: int, like: Any, dtype: Any, centred: bool = False,
                 compiled: bool = False, statistics: bool = True):  # fmt: skip
        import torch

        self.torch = torch
        self.dtype = like.dtype if dtype is None else dtype
        self.out_dtype = like.dtype
        self.device = like.device
        self.buf = (torch.zeros((N + 1, d), dtype=self.dtype, device=like.device) if statistics
                    else None)  # fmt: skip
        self.delta = torch.empty(d, dtype=self.dtype, device=like.device) if statistics else None
        on_cpu = like.device.type == "cpu" and self.dtype in (torch.float32, torch.float64)
        self.compiled = (CompiledRound(self.buf.numpy()) if compiled and on_cpu and statistics
                         else None)  # fmt: skip
        super().__init__(N, centred)

    def convert(self, g: Any) -> Any:
        return g.detach().reshape(-1).to(device=self.device, dtype=self.dtype)

    def fits(self, g: Any) -> bool:
        return _is_torch(g) and g.device == self.device and g.dtype == self.out_dtype

    def host(self, x: Any) -> np.ndarray:
        return x.numpy()

    def copy(self, x: Any) -> Any:
        return x.clone()

    def squared_norm(self, x: Any) -> float:
        return float(self.torch.dot(x, x).item())

    def increment(self, arm: int, g: Any, cnt: int) -> float:
        x = g if self.ref is None else self.torch.sub(g, self.ref, out=self.delta)
        return float(welford_deviation_torch(x, self.mean[arm], cnt, out=self.delta)[1].item())

    def commit(self, arm: int, cnt: int) -> None:
        if self.centred and self.ref is None:
            self.ref = self.delta.clone()
            self.delta.zero_()
        welford_fold_torch(self.mean[arm], self.delta, cnt)

    def gram_row(self, arm: int) -> np.ndarray:
        """N numbers to the host: ⟨m_n − r, m_arm − r⟩."""
        row = self.mean @ self.mean[arm]
        return row.detach().cpu().to(self.torch.float64).numpy()

    def stack(self, parts: Any) -> Any:
        t = self.torch.stack(list(parts)) if isinstance(parts, list | tuple) else parts
        return t.detach().to(device=self.device, dtype=self.dtype)

    def combine(self, parts: Any, weights: np.ndarray,
                spread: bool = False) -> tuple[Any, float, float | None]:  # fmt: skip
        """Weighted mean (on the device), the pair sum (one scalar to the host) and, with
        ``spread``, the weighted spread, in float64 on the device (else None)."""
        present = weights > 0
        p = self.torch.as_tensor(weights / weights.sum(), dtype=self.dtype, device=self.device)
        keep = self.torch.as_tensor(present, device=self.device)
        sub = parts[keep]
        dev = sub - sub.mean(dim=0)
        y = float(present.sum()) * float((dev * dev).sum().item())
        q = None
        if spread:
            w = self.torch.as_tensor(weights, dtype=self.torch.float64, device=self.device)
            g = parts.to(self.torch.float64)
            dev64 = g - (w / w.sum()) @ g
            q = float((w @ (dev64 * dev64).sum(dim=1)).item())
        return p @ parts, y, q

    def from_host(self, x: np.ndarray) -> Any:
        """A host float64 vector as a tensor of the gradients' dtype on their device."""
        return self.torch.as_tensor(x, device=self.device).to(self.out_dtype)

    def result(self, counts: np.ndarray, T: int) -> Any:
        weights, rows = self.result_terms(counts)
        weights = self.torch.as_tensor(weights, dtype=self.dtype, device=self.device)
        out = weights @ rows / T
        return (out if self.ref is None else out + self.ref).to(self.out_dtype)
