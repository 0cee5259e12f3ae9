r"""Objectives F: value, gradient ∇F, noise shape M(w), and the constants F*, m, L.

Every method is vectorised over a leading realization axis: ``w`` has shape (R, d).
The noise shape defaults to :math:`M(w) = \mathrm{diag}(\nabla F(w)^2)`, the choice of
Section 5 of the paper, so that :math:`S(w) = \mathrm{Tr}\,M(w) = \|\nabla F(w)\|^2`.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from ._validation import InvalidParameterError, check_array, check_integer, check_real, fail

__all__ = ["LeastSquares", "LogisticRegression", "Objective", "Quadratic", "QuadraticForm"]


class Objective:
    """Base class. Subclasses define ``d``, :meth:`value`, :meth:`grad` and ``f_star``."""

    d: int
    #: Strong-convexity constant m, or None where unknown.
    m: float | None = None
    #: Lipschitz constant L of ∇F, or None where unknown.
    L: float | None = None

    def value(self, w: np.ndarray) -> np.ndarray:
        """F(w) for w of shape (R, d); returns shape (R,)."""
        raise NotImplementedError

    def grad(self, w: np.ndarray) -> np.ndarray:
        """∇F(w) for w of shape (R, d); returns shape (R, d)."""
        raise NotImplementedError

    @property
    def f_star(self) -> float:
        """The minimum F* = F(w*)."""
        raise NotImplementedError

    def noise_diag(self, w: np.ndarray, grad: np.ndarray | None = None) -> np.ndarray:
        """Diagonal of M(w), shape (R, d); default ∇F(w)² (Section 5)."""
        g = self.grad(w) if grad is None else grad
        return g * g

    def gap(self, w: np.ndarray) -> np.ndarray:
        """F(w) − F*, shape (R,)."""
        return self.value(w) - self.f_star

    def check_iterate(self, w: Any, owner: str, name: str = "w") -> np.ndarray:
        """``w`` as a finite float array of shape (R, d) with d = ``self.d``."""
        arr = check_array(w, name, owner)
        if arr.ndim != 2 or arr.shape[1] != self.d:
            raise fail(name, owner, f"an array of shape (R, {self.d}) (R realizations)", arr.shape)
        return arr


class Quadratic(Objective):
    r"""The paper's objective (Section 6): :math:`F(w) = \tfrac12 w^\top w`, ∇F(w) = w.

    F* = 0 at w* = 0, m = L = 1.

    Examples
    --------
    >>> import numpy as np
    >>> Quadratic(d=2).value(np.array([[1.0, 2.0]]))
    array([2.5])
    """

    m = 1.0
    L = 1.0

    def __init__(self, d: int = 2):
        self.d = check_integer(d, "d", "Quadratic", ge=1)
        self.w_star = np.zeros(self.d)

    def value(self, w: np.ndarray) -> np.ndarray:
        """F(w) = ½‖w‖² of each row, shape (R,)."""
        return 0.5 * np.einsum("rd,rd->r", w, w)

    def grad(self, w: np.ndarray) -> np.ndarray:
        """∇F(w) = w, shape (R, d)."""
        return np.array(w, dtype=np.float64, copy=True)

    @property
    def f_star(self) -> float:
        """F* = 0."""
        return 0.0

    def __repr__(self) -> str:
        return f"Quadratic(d={self.d})"


class QuadraticForm(Objective):
    r"""A strongly convex quadratic :math:`F(w) = \tfrac12 (w - w_*)^\top H (w - w_*)`.

    Parameters
    ----------
    H : array_like of shape (d, d)
        Symmetric positive definite.
    w_star : array_like of shape (d,), optional
        The minimiser (default 0).
    """

    def __init__(self, H: Any, w_star: Any = None):
        H = check_array(H, "H", "QuadraticForm", ndim=2)
        if H.shape[0] != H.shape[1] or not np.allclose(H, H.T, rtol=1e-12, atol=1e-14):
            raise fail("H", "QuadraticForm", "a symmetric square matrix", H.shape)
        eig = np.linalg.eigvalsh(H)
        if eig[0] <= 0:
            raise fail("H", "QuadraticForm", "positive definite", f"smallest eigenvalue {eig[0]}")
        self.H = H
        self.d = H.shape[0]
        self.w_star = (
            np.zeros(self.d)
            if w_star is None
            else check_array(w_star, "w_star", "QuadraticForm", shape=(self.d,))
        )
        self.m = float(eig[0])
        self.L = float(eig[-1])

    def value(self, w: np.ndarray) -> np.ndarray:
        """F(w) = ½ (w − w*)ᵀH(w − w*) of each row, shape (R,)."""
        z = w - self.w_star
        return 0.5 * np.einsum("rd,de,re->r", z, self.H, z)

    def grad(self, w: np.ndarray) -> np.ndarray:
        """∇F(w) = H(w − w*), shape (R, d)."""
        return (w - self.w_star) @ self.H

    @property
    def f_star(self) -> float:
        """F* = 0, at w*."""
        return 0.0


class LeastSquares(Objective):
    r"""Least squares :math:`F(w) = \frac{1}{2n}\|Xw - y\|^2` on a data matrix X (n, d).

    m and L are the extreme eigenvalues of XᵀX/n; F* comes from ``numpy.linalg.lstsq``.
    """

    def __init__(self, X: Any, y: Any):
        X = check_array(X, "X", "LeastSquares", ndim=2)
        y = check_array(y, "y", "LeastSquares", shape=(X.shape[0],))
        self.X, self.y = X, y
        self.n_samples, self.d = X.shape
        eig = np.linalg.eigvalsh(X.T @ X / self.n_samples)
        self.m = float(eig[0]) if eig[0] > 0 else None
        self.L = float(eig[-1])
        self.w_star = np.linalg.lstsq(X, y, rcond=None)[0]

    def value(self, w: np.ndarray) -> np.ndarray:
        """F(w) = ‖Xw − y‖² / (2 n_samples) of each row, shape (R,)."""
        r = w @ self.X.T - self.y
        return 0.5 * np.einsum("rn,rn->r", r, r) / self.n_samples

    def grad(self, w: np.ndarray) -> np.ndarray:
        """∇F(w) = Xᵀ(Xw − y) / n_samples, shape (R, d)."""
        return (w @ self.X.T - self.y) @ self.X / self.n_samples

    @property
    def f_star(self) -> float:
        """F* = F(w*) at the least-squares solution w*."""
        return float(self.value(self.w_star[None])[0])


class LogisticRegression(Objective):
    r"""ℓ2-regularised logistic regression.

    .. math::

        F(w) = \frac1n \sum_{i=1}^n \ln\!\left(1 + e^{-y_i x_i^\top w}\right)
               + \frac{\lambda}{2}\|w\|^2, \qquad y_i \in \{-1, +1\}.

    Labels given as {0, 1} are mapped to {−1, +1}. m = λ,
    L = λ_max(XᵀX)/(4n) + λ; F* is computed once by L-BFGS to gradient norm 1e-12.

    Parameters
    ----------
    X : array_like of shape (n, d)
    y : array_like of shape (n,)
    lam : float
        Regularisation λ > 0.
    """

    def __init__(self, X: Any, y: Any, lam: float = 1e-2):
        X = check_array(X, "X", "LogisticRegression", ndim=2)
        y = check_array(y, "y", "LogisticRegression", shape=(X.shape[0],))
        labels = set(np.unique(y).tolist())
        if labels <= {0.0, 1.0}:
            y = 2.0 * y - 1.0
        elif not labels <= {-1.0, 1.0}:
            raise fail("y", "LogisticRegression", "labels in {-1, +1} or {0, 1}", sorted(labels))
        self.X, self.y = X, y
        self.lam = check_real(lam, "lam", "LogisticRegression", gt=0)
        self.n_samples, self.d = X.shape
        self.m = self.lam
        self.L = float(np.linalg.eigvalsh(X.T @ X)[-1]) / (4 * self.n_samples) + self.lam

    def value(self, w: np.ndarray) -> np.ndarray:
        """Mean logistic loss + λ‖w‖²/2 of each row, shape (R,)."""
        margin = self.y * (w @ self.X.T)
        loss = np.logaddexp(0.0, -margin).mean(axis=1)
        return loss + 0.5 * self.lam * np.einsum("rd,rd->r", w, w)

    def grad(self, w: np.ndarray) -> np.ndarray:
        """∇F(w), shape (R, d)."""
        from scipy.special import expit

        margin = self.y * (w @ self.X.T)
        weight = -self.y * expit(-margin)
        return weight @ self.X / self.n_samples + self.lam * w

    @cached_property
    def w_star(self) -> np.ndarray:
        """The minimiser w*, by L-BFGS (computed once)."""
        from scipy.optimize import minimize

        res = minimize(
            lambda v: float(self.value(v[None])[0]),
            np.zeros(self.d),
            jac=lambda v: self.grad(v[None])[0],
            method="L-BFGS-B",
            options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000},
        )
        if not np.all(np.isfinite(res.x)):  # pragma: no cover - convex and smooth
            raise InvalidParameterError("LogisticRegression: the minimiser could not be found")
        return res.x

    @property
    def f_star(self) -> float:
        """F* = F(w*)."""
        return float(self.value(self.w_star[None])[0])
