r"""A pull's parts told one at a time, in O(d) memory: what a federated server keeps of a round.

Where the n parts of a pull arrive one by one (the replies of a federated round, the workers of
a data-parallel step), :class:`PullAccumulator` folds each into running sums as it comes, the
way FedAvg's server keeps one weighted sum: no n × d stack, nothing kept past its use. From them
it gives what :mod:`eegrad.spread` computes from the stack:

* the round's output, the weighted mean :math:`\bar u = \sum_i p_i u_i`,
  :math:`p_i = \omega_i/\sum_j \omega_j` (West's running weighted mean);
* the pair sum :math:`y = \sum_{i<j}\|u_i - u_j\|^2 = n \sum_i \|u_i - \tilde u\|^2` over the parts
  of weight > 0, :math:`\tilde u` their unweighted mean (Welford's running sum of squares) —
  what :class:`~eegrad.SpreadThompson` learns from (``spread=True``);
* the weighted spread :math:`\sum_i \omega_i \|u_i - \bar u\|^2`.

A part is one array or tensor, or a sequence of them (a model's arrays, in one order); with a
``reference`` r (the server's model) the parts told are the clients' models :math:`w_i` and the
updates are :math:`u_i = r - w_i`, formed in float64 from the arrays' own values. The running
means keep the arrays' dtype (float32 stays float32; integer arrays are averaged in float64), and
the squared sums are float64. NumPy arrays are folded in one compiled pass per array where Numba
is installed (:mod:`eegrad.engines.parts_kernels`), in a few NumPy passes otherwise; PyTorch
tensors stay on their device, with one float64 scalar to the host per array.

A part with NaN or Inf is detected in the same pass (the squared sums become NaN) and raises
:class:`~eegrad.NonFiniteGradientError`; the accumulator is then unusable, as its means hold the
bad values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ._validation import (
    InvalidParameterError,
    InvalidParameterTypeError,
    NonFiniteGradientError,
    check_real,
    fail,
)
from .engines import check_engine, numba_available
from .statistics import (
    welford_deviation,
    welford_deviation_torch,
    welford_fold,
    welford_fold_torch,
)

__all__ = ["PullAccumulator", "flat_host", "is_torch", "update_norm2"]


def is_torch(x: Any) -> bool:
    """Whether ``x`` is a PyTorch tensor (without importing PyTorch)."""
    return type(x).__module__.split(".")[0] == "torch"


def _segments(value: Any) -> tuple[Iterable[Any], bool]:
    """(the arrays, whether ``value`` was one array rather than a sequence)."""
    if isinstance(value, np.ndarray) or is_torch(value):
        return (value,), True
    if isinstance(value, list | tuple) or hasattr(value, "__next__"):
        return value, False
    return (np.asarray(value),), True


_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class PullAccumulator:
    r"""The running sums of one pull's parts (see the module's notes).

    Parameters
    ----------
    reference : array, tensor or sequence of them, optional
        r, the model the parts were computed from: each part told is then a client's model
        :math:`w_i` and its update is :math:`u_i = r - w_i`. None: the parts told are the
        updates themselves.
    spread : bool
        Keep the unweighted running mean too, for :meth:`pair_sum` (one more d-vector); False
        where the rule learns from the mean alone.
    engine : {"auto", "numpy", "numba"}
        ``"auto"``: the compiled pass for NumPy arrays of float32 or float64 where Numba is
        installed, NumPy otherwise.

    Attributes
    ----------
    count : int
        Parts of weight > 0 told so far.
    total_weight : float
        :math:`W = \sum_i \omega_i`.

    Examples
    --------
    >>> import numpy as np
    >>> from eegrad.parts import PullAccumulator
    >>> pull = PullAccumulator()
    >>> pull.add(np.array([1.0, 0.0]), 1.0)
    >>> pull.add(np.array([3.0, 2.0]), 3.0)
    >>> pull.mean(), pull.pair_sum()
    (array([2.5, 1.5]), 8.0)
    """

    def __init__(self, reference: Any = None, *, spread: bool = True, engine: str = "auto"):
        owner = "PullAccumulator"
        check_engine(engine, owner)
        if reference is None:
            self._ref: list[Any] | None = None
            self._single: bool | None = None
        else:
            segs, self._single = _segments(reference)
            self._ref = list(segs)
        self.spread = bool(spread)
        self._compiled = engine != "numpy" and numba_available()
        self._mean_w: list[Any] | None = None
        self._mean_u: list[Any] | None = None
        self._shapes: list[tuple[int, ...]] | None = None
        self.count = 0
        self.total_weight = 0.0
        self._weights: list[float] = []
        self._q = 0.0  # Σ ω‖u − ū_ω‖²
        self._m2 = 0.0  # Σ ‖u − ũ‖²
        self._broken: str | None = None

    # -- telling -----------------------------------------------------------------------------------
    def add(self, part: Any, weight: float, *, scale: float = 1.0) -> None:
        r"""Fold one part into the sums.

        Parameters
        ----------
        part : array, tensor or sequence (or iterator) of them
            A client's model (with a ``reference``) or its update; a sequence is read one array
            at a time, in the reference's order.
        weight : float
            :math:`\omega_i \ge 0`, the samples it used; 0 leaves the part out.
        scale : float
            A factor s > 0 on the update (e.g. a clipping factor): :math:`u_i \leftarrow s u_i`.

        Raises
        ------
        InvalidParameterError
            For a weight that is negative or not finite, or a part whose arrays do not match
            the reference's (or the first part's) shapes.
        NonFiniteGradientError
            If the part holds NaN or Inf.
        """
        owner = "PullAccumulator.add"
        if self._broken is not None:
            raise InvalidParameterError(f"This PullAccumulator is unusable: {self._broken}.")
        weight = check_real(weight, "weight", owner, ge=0)
        scale = check_real(scale, "scale", owner, gt=0)
        if weight == 0.0:
            return
        k, total = self.count + 1, self.total_weight + weight
        ratio_w = total / weight  # West's update: m_w + (u − m_w)/(W/ω)
        segs, single = _segments(part)
        if self._single is None:
            self._single = single
        q = m2 = 0.0
        seen = 0
        try:
            for i, x in enumerate(segs):
                ref = None if self._ref is None else self._ref[i] if i < len(self._ref) else None
                if self._ref is not None and ref is None:
                    raise fail("part", owner, f"{len(self._ref)} arrays, as the reference",
                               f"more than {len(self._ref)}")  # fmt: skip
                x = self._check_segment(i, x, ref, owner)
                dq, dm2 = self._fold(i, x, ref, scale, ratio_w, float(k))
                q += dq
                m2 += dm2
                seen += 1
            expected = len(self._ref) if self._ref is not None else len(self._shapes or ())
            if seen != expected:
                raise fail("part", owner, f"{expected} arrays, as the first part or reference",
                           f"{seen}")  # fmt: skip
        except InvalidParameterError as err:
            if seen or self.count:
                self._broken = f"a part was refused half-way ({err})"
            raise
        if not (math.isfinite(q) and math.isfinite(m2)):
            self._broken = "a part held NaN or Inf"
            raise NonFiniteGradientError("The part told contains NaN or Inf.")
        self.count, self.total_weight = k, total
        self._weights.append(weight)
        self._q += weight * q
        self._m2 += m2

    def _check_segment(self, i: int, x: Any, ref: Any, owner: str) -> Any:
        if not (isinstance(x, np.ndarray) or is_torch(x)):
            if ref is not None and is_torch(ref):
                raise InvalidParameterTypeError(f"The 'part' parameter of {owner} must hold "
                                                f"tensors, as the reference. Got {type(x)!r}.")  # fmt: skip
            x = np.asarray(x)
        shape = tuple(x.shape)
        if self._shapes is None:
            self._shapes = [tuple(r.shape) for r in self._ref] if self._ref is not None else []
        if i < len(self._shapes):
            if shape != self._shapes[i]:
                raise fail("part", owner, f"array {i} of shape {self._shapes[i]}, as the "
                           f"{'reference' if self._ref is not None else 'first part'}",
                           f"shape {shape}")  # fmt: skip
        elif self.count == 0 and self._ref is None:
            self._shapes.append(shape)
        else:
            raise fail("part", owner, f"{len(self._shapes)} arrays, as the first part",
                       f"more than {len(self._shapes)}")  # fmt: skip
        return x

    def _means(self, i: int, like: Any) -> tuple[Any, Any]:
        """The running means of array i, created (zero) at the first part."""
        if self._mean_w is None:
            self._mean_w, self._mean_u = [], []
        if i == len(self._mean_w):
            if is_torch(like):
                dtype = like.dtype if like.is_floating_point() else None
                zeros = like.new_zeros(like.shape, dtype=dtype or _torch_float64()).reshape(-1)
                self._mean_w.append(zeros)
                self._mean_u.append(zeros.clone() if self.spread else None)
            else:
                dtype = like.dtype if like.dtype.kind == "f" else np.dtype(np.float64)
                self._mean_w.append(np.zeros(like.size, dtype=dtype))
                self._mean_u.append(np.zeros(like.size, dtype=dtype) if self.spread else None)
        return self._mean_w[i], self._mean_u[i]

    def _fold(self, i: int, x: Any, ref: Any, scale: float, ratio_w: float,
              count: float) -> tuple[float, float]:  # fmt: skip
        mean_w, mean_u = self._means(i, ref if ref is not None else x)
        if is_torch(x):
            return _fold_torch(x, ref, scale, ratio_w, count, mean_w, mean_u)
        xf = np.ascontiguousarray(x).reshape(-1)
        rf = None if ref is None else np.ascontiguousarray(ref).reshape(-1)
        if (self._compiled and mean_w.dtype in _KERNEL_DTYPES and xf.dtype == mean_w.dtype
                and (rf is None or rf.dtype == mean_w.dtype)):  # fmt: skip
            from .engines.parts_kernels import add_part

            return add_part(xf, xf if rf is None else rf, rf is not None, scale, mean_w, ratio_w,
                            mean_w if mean_u is None else mean_u, mean_u is not None, count)  # fmt: skip
        return _fold_numpy(xf, rf, scale, ratio_w, count, mean_w, mean_u)

    # -- reading -----------------------------------------------------------------------------------
    def _check_readable(self, what: str) -> None:
        if self._broken is not None:
            raise InvalidParameterError(f"This PullAccumulator is unusable: {self._broken}.")
        if self.count == 0:
            raise InvalidParameterError(f"{what} of a pull with no part of weight > 0.")

    @property
    def weights(self) -> np.ndarray:
        """The weights of the parts told (those > 0), in order, shape (n,)."""
        return np.array(self._weights, dtype=np.float64)

    @property
    def size(self) -> int:
        """d, the number of coordinates of a part (all its arrays)."""
        return int(sum(math.prod(s) for s in (self._shapes or ())))

    def mean(self) -> Any:
        r"""The weighted mean of the updates, :math:`\bar u = \sum_i p_i u_i`: an array (or
        tensor) if the parts were single arrays, else a list in the parts' order and shapes, in
        the running means' dtype."""
        self._check_readable("The mean")
        out = [m.reshape(s) for m, s in zip(self._mean_w, self._shapes, strict=True)]
        return out[0] if self._single else out

    def pair_sum(self) -> float:
        r""":math:`y = \sum_{i<j}\|u_i - u_j\|^2` over the parts of weight > 0 (``spread=True``)."""
        self._check_readable("The pair sum")
        if not self.spread:
            raise InvalidParameterError("pair_sum() of a PullAccumulator made with spread=False.")
        return self.count * self._m2

    def weighted_spread(self) -> float:
        r""":math:`\sum_i \omega_i \|u_i - \bar u\|^2`."""
        self._check_readable("The weighted spread")
        return self._q


def update_norm2(part: Any, reference: Any) -> float:
    r""":math:`\|r - x\|^2` over a part's arrays (NumPy, float64 sums; one compiled pass per
    array where Numba is installed): the squared norm of the update a client's model stands
    for, e.g. to clip it before it is folded in."""
    total = 0.0
    for x, r in zip(_segments(part)[0], _segments(reference)[0], strict=True):
        xf = np.ascontiguousarray(x).reshape(-1)
        rf = np.ascontiguousarray(r).reshape(-1)
        if numba_available() and xf.dtype == rf.dtype and xf.dtype in _KERNEL_DTYPES:
            from .engines.parts_kernels import squared_norm

            total += squared_norm(xf, rf, True)
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                d = np.subtract(rf, xf, dtype=np.float64)
                total += float(np.dot(d, d))
    return total


def flat_host(x: Any) -> np.ndarray:
    """An array, a tensor or a list of them (a model's) as one float64 NumPy vector."""
    parts = x if isinstance(x, list | tuple) else [x]
    return np.concatenate([np.ravel(p.detach().cpu().numpy() if is_torch(p) else p)
                           for p in parts]).astype(np.float64)  # fmt: skip


def norm_and_inner(x: Any, y: Any = None) -> tuple[float, float | None]:
    r"""(:math:`\|x\|^2`, :math:`x \cdot y`) of arrays, tensors or lists of them in the same
    shapes (a model's arrays), summed in float64, ``x`` read once (one compiled pass per array
    where Numba is installed); :math:`x \cdot y` is None where ``y`` is."""
    xx, xy = 0.0, 0.0
    xs = list(_segments(x)[0])
    ys = [None] * len(xs) if y is None else list(_segments(y)[0])
    if len(ys) != len(xs):
        raise fail("y", "eegrad.parts.norm_and_inner", f"{len(xs)} arrays, as x", len(ys))
    for a, b in zip(xs, ys, strict=True):
        if is_torch(a):
            f64 = _torch_float64()
            af = a.detach().to(f64)
            xx += float(af.pow(2).sum())
            if b is not None:
                xy += float((af * b.detach().to(f64)).sum())
            continue
        af = np.ascontiguousarray(a).reshape(-1)
        bf = None if b is None else np.ascontiguousarray(b).reshape(-1)
        if numba_available() and af.dtype in _KERNEL_DTYPES and (bf is None or bf.dtype
                                                                 in _KERNEL_DTYPES):  # fmt: skip
            from .engines.parts_kernels import norm_and_inner as kernel

            a2, ab = kernel(af, af if bf is None else bf, bf is not None)
            xx, xy = xx + a2, xy + ab
        else:
            a64 = af.astype(np.float64, copy=False)
            xx += float(np.dot(a64, a64))
            if bf is not None:
                xy += float(np.dot(a64, bf.astype(np.float64, copy=False)))
    return xx, (None if y is None else xy)


def _torch_float64() -> Any:
    import torch

    return torch.float64


def _fold_numpy(x: np.ndarray, ref: np.ndarray | None, scale: float, ratio_w: float,
                count: float, mean_w: np.ndarray, mean_u: np.ndarray | None,
                ) -> tuple[float, float]:  # fmt: skip
    """The kernel's arithmetic in NumPy passes (float64 temporaries of one array)."""
    u = x.astype(np.float64) if ref is None else np.subtract(ref, x, dtype=np.float64)
    if scale != 1.0:
        u *= scale
    # a non-finite part gives NaN sums, which the caller checks
    dw, q = welford_deviation(u, mean_w, ratio_w)
    m2 = 0.0
    if mean_u is not None:
        du, m2 = welford_deviation(u, mean_u, count)
        welford_fold(mean_u, du, count)
    welford_fold(mean_w, dw, ratio_w)
    return float(q), float(m2)


def _fold_torch(x: Any, ref: Any, scale: float, ratio_w: float, count: float, mean_w: Any,
                mean_u: Any) -> tuple[float, float]:  # fmt: skip
    """The kernel's arithmetic on the tensors' device, in the means' dtype; float64 sums."""
    import torch

    x = x.detach().reshape(-1).to(mean_w.dtype)
    u = x if ref is None else ref.detach().reshape(-1).to(mean_w.dtype) - x
    if scale != 1.0:
        u = u * scale
    dw, q = welford_deviation_torch(u, mean_w, ratio_w)
    m2 = torch.zeros((), dtype=torch.float64, device=q.device)
    if mean_u is not None:
        du, m2 = welford_deviation_torch(u, mean_u, count)
        welford_fold_torch(mean_u, du, count)
    welford_fold_torch(mean_w, dw, ratio_w)
    both = torch.stack([q, m2]).cpu()  # one transfer to the host
    return float(both[0]), float(both[1])
