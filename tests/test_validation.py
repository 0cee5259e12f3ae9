"""Bad input at the public boundary: each error names the parameter, the value and the rule."""

import numpy as np
import pytest

from eegrad import (
    Arms,
    CallableOracle,
    EEGrad,
    FixedArm,
    GaussianOracle,
    InvalidParameterError,
    NonFiniteGradientError,
    Quadratic,
    estimate_gradient,
    run_sgd,
)


@pytest.fixture
def oracle():
    return GaussianOracle(Quadratic(d=2), Arms([50.0, 26.0, 16.7]))


W = np.ones((4, 2))


@pytest.mark.parametrize(
    ("T", "exc", "match"),
    [
        (
            5,
            ValueError,
            r"'T' parameter of estimate_gradient must be an integer >= 6 .*T >= 2N.*Got 5",
        ),
        (0, ValueError, r"'T' parameter.*>= 1"),
        (10.0, TypeError, r"'T' parameter.*integer.*Got 10.0"),
        ("10", TypeError, r"'T' parameter"),
    ],
)
def test_bad_T(oracle, T, exc, match):
    with pytest.raises(exc, match=match):
        estimate_gradient(oracle, EEGrad(), W, T=T, rng=0)


@pytest.mark.parametrize(
    ("w", "match"),
    [
        (np.ones((4, 3)), r"'w' parameter of estimate_gradient must be an array of shape \(R, 2\)"),
        (np.ones(2), r"'w'.*shape \(R, 2\)"),
        (np.array([[1.0, np.nan]]), r"'w'.*finite"),
        (np.array([[1.0, np.inf]]), r"'w'.*finite"),
    ],
)
def test_bad_w(oracle, w, match):
    with pytest.raises(ValueError, match=match):
        estimate_gradient(oracle, EEGrad(), w, T=10, rng=0)


def test_rng_must_be_explicit(oracle):
    with pytest.raises(TypeError, match="'rng' parameter of estimate_gradient"):
        estimate_gradient(oracle, EEGrad(), W, T=10, rng=None)


def test_selector_type(oracle):
    with pytest.raises(TypeError, match="'selector' parameter of estimate_gradient"):
        estimate_gradient(oracle, "eegrad", W, T=10, rng=0)


def test_oracle_wrong_shape_names_round():
    bad = CallableOracle(lambda w, n, rng: w[:, :1], Arms([1.0, 2.0]), d=2)
    with pytest.raises(InvalidParameterError, match=r"'oracle'.*shape \(4, 2\).*round t=1"):
        estimate_gradient(bad, FixedArm(1), W, T=3, rng=0)


def test_oracle_non_finite_names_round_and_arm():
    def func(w, n, rng):
        g = w.copy()
        if rng.random() < 1.0 and func.calls == 4:
            g[2, 1] = np.nan
        func.calls += 1
        return g

    func.calls = 0
    bad = CallableOracle(func, Arms([1.0, 2.0]), d=2)
    with pytest.raises(NonFiniteGradientError, match=r"round t=5 for arm n=1 \(realization 2\)"):
        estimate_gradient(bad, EEGrad(beta=1.0, P=1.0), W, T=8, rng=0)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"K": 0}, ValueError, r"'K' parameter of run_sgd must be an integer >= 1"),
        ({"K": 2.5}, TypeError, r"'K' parameter of run_sgd"),
        ({"eta": 0.0}, ValueError, r"'eta' parameter of run_sgd must be a finite float > 0"),
        ({"eta": np.nan}, ValueError, r"'eta'"),
        ({"eta": [0.5, -0.1, 0.5]}, ValueError, r"'eta'.*> 0"),
        ({"eta": [0.5, 0.5]}, ValueError, r"'eta'.*shape \(3\)"),
        ({"eta": lambda k: -1.0}, ValueError, r"'eta'"),
        ({"T": 4}, ValueError, r"'T' parameter of run_sgd"),
        ({"w0": np.ones((3, 5))}, ValueError, r"'w0' parameter of run_sgd"),
    ],
)
def test_run_sgd_errors(oracle, kwargs, exc, match):
    args = {"selector": EEGrad(), "w0": W, "K": 3, "T": 10, "eta": 0.5, "rng": 0}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        run_sgd(oracle, **args)


def test_diverging_steps_are_an_error_not_nan(oracle):
    with pytest.raises(ValueError, match="'eta' parameter of run_sgd must be small enough"):
        run_sgd(oracle, FixedArm(1), np.full((2, 2), 1e150), K=3, T=6, eta=1e200, rng=0)


def test_eta_forms_and_per_iteration_arms(oracle):
    w0 = np.random.default_rng(0).standard_normal((50, 2))
    a = run_sgd(oracle, FixedArm(2), w0, K=3, T=10, eta=0.5, rng=1)
    b = run_sgd(oracle, FixedArm(2), w0, K=3, T=10, eta=[0.5, 0.5, 0.5], rng=1)
    c = run_sgd(oracle, FixedArm(2), w0, K=3, T=10, eta=lambda k: 0.5, rng=1)
    np.testing.assert_array_equal(a.gaps, b.gaps)
    np.testing.assert_array_equal(a.gaps, c.gaps)
    assert a.gaps.shape == (50, 4)
    assert a.w.shape == (50, 4, 2)
    assert a.counts.shape == (50, 3, 3)
    np.testing.assert_allclose(a.gaps[:, 0], 0.5 * (w0**2).sum(axis=1))
    # A budget per iterate: the third iterate has only two arms.
    oracles = [oracle, oracle, oracle.with_arms(Arms([3.0, 1.0]))]
    out = run_sgd(oracles, EEGrad(c=5.0), w0, K=3, T=10, eta=0.5, rng=1)
    assert np.all(out.counts[:, 2, 2] == 0)
    assert np.all(out.counts.sum(axis=2) == 10)
    with pytest.raises(ValueError, match="sequence of K = 3 oracles"):
        run_sgd(oracles[:2], EEGrad(), w0, K=3, T=10, eta=0.5, rng=1)


def test_run_sgd_needs_objective():
    bare = CallableOracle(lambda w, n, rng: w, Arms([1.0]), d=2)
    with pytest.raises(TypeError, match="must have an objective"):
        run_sgd(bare, FixedArm(1), W, K=1, T=2, eta=0.5, rng=0)
