"""Objectives: gradients against finite differences, minima, constants, noise shapes."""

import numpy as np
import pytest

from eegrad import InvalidParameterError, LeastSquares, LogisticRegression, Quadratic, QuadraticForm


def data(seed=0, n=60, d=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n)
    return X, y


def objectives():
    X, y = data()
    H = np.array([[2.0, 0.4, 0.0], [0.4, 1.0, 0.2], [0.0, 0.2, 0.5]])
    return [
        Quadratic(d=3),
        QuadraticForm(H, w_star=np.array([1.0, -2.0, 0.5])),
        LeastSquares(X, y),
        LogisticRegression(X, (y > 0).astype(float), lam=0.05),
    ]


@pytest.mark.parametrize("obj", objectives(), ids=lambda o: type(o).__name__)
def test_gradient_matches_central_differences(obj):
    w = np.random.default_rng(1).standard_normal((5, obj.d))
    g = obj.grad(w)
    h = 1e-6
    for j in range(obj.d):
        e = np.zeros(obj.d)
        e[j] = h
        fd = (obj.value(w + e) - obj.value(w - e)) / (2 * h)
        np.testing.assert_allclose(g[:, j], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("obj", objectives(), ids=lambda o: type(o).__name__)
def test_minimum_and_constants(obj):
    w_star = np.asarray(obj.w_star)[None]
    np.testing.assert_allclose(obj.grad(w_star), 0.0, atol=1e-6)
    assert obj.value(w_star)[0] == pytest.approx(obj.f_star, abs=1e-12)
    w = np.random.default_rng(2).standard_normal((50, obj.d))
    gaps = obj.gap(w)
    assert np.all(gaps >= -1e-12)
    # Strong convexity and smoothness: m/2 ‖w − w*‖² <= F − F* <= L/2 ‖w − w*‖².
    dist2 = ((w - w_star) ** 2).sum(axis=1)
    assert np.all(gaps >= obj.m / 2 * dist2 - 1e-9)
    assert np.all(gaps <= obj.L / 2 * dist2 + 1e-9)


def test_noise_shape_is_gradient_squared():
    obj = QuadraticForm(np.diag([1.0, 3.0]))
    w = np.array([[1.0, 2.0]])
    np.testing.assert_allclose(obj.noise_diag(w), [[1.0, 36.0]])


def test_objective_errors():
    with pytest.raises(
        InvalidParameterError, match="'H' parameter of QuadraticForm must be positive"
    ):
        QuadraticForm(np.diag([1.0, -1.0]))
    with pytest.raises(InvalidParameterError, match="'H'.*symmetric"):
        QuadraticForm(np.array([[1.0, 2.0], [0.0, 1.0]]))
    X, _ = data()
    with pytest.raises(InvalidParameterError, match="'y' parameter of LogisticRegression"):
        LogisticRegression(X, np.arange(60.0))
    with pytest.raises(InvalidParameterError, match="'lam'"):
        LogisticRegression(X, np.ones(60), lam=0.0)
    with pytest.raises(InvalidParameterError, match="'d' parameter of Quadratic"):
        Quadratic(d=0)
