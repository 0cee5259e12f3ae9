"""The one-realization estimator for users' own loops."""

import numpy as np
import pytest

from eegrad import (
    KLLCB,
    Arms,
    EEGrad,
    FixedArm,
    GaussianOracle,
    GradientEstimator,
    InvalidParameterError,
    NonFiniteGradientError,
    OptimalArm,
    ProtocolError,
    Quadratic,
    ThompsonVariance,
    default_selector,
    estimate_gradient,
)

ARMS = Arms([50.0, 26.0, 16.7])


@pytest.mark.parametrize(
    "make",
    [lambda: EEGrad(beta=50.0, P=1.25, c=1.0), default_selector, KLLCB, lambda: FixedArm(2)],
)
def test_estimator_equals_simulator_r1_path(make):
    """Same seed, same gradients: the estimator picks what the simulator picks for R = 1."""
    oracle = GaussianOracle(Quadratic(2), ARMS)
    w = np.array([[1.0, -0.5]])
    T = 60
    sim = estimate_gradient(oracle, make(), w, T, rng=4, engine="numpy")
    est = GradientEstimator(make(), ARMS, T, dim=2, rng=4)
    at = oracle.at(w)
    for _ in range(T):
        n = est.ask()
        est.tell(at.sample(np.array([n - 1]), est.streams)[0])
    if isinstance(make(), FixedArm):
        assert est.counts.tolist() == [0, T, 0]  # the simulator draws a fixed arm's mean at once
        return
    np.testing.assert_array_equal(est.counts, sim.counts[0])
    np.testing.assert_allclose(est.result(), sim.gradient[0], rtol=1e-12)


def test_result_is_the_mean_and_reset_starts_over():
    est = GradientEstimator(default_selector(), 3, T=7, dim=4)
    told = []
    rng = np.random.default_rng(0)
    while not est.done:
        n = est.ask()
        assert 1 <= n <= 3
        g = rng.standard_normal(4) * n
        told.append(g)
        est.tell(g)
    np.testing.assert_allclose(est.result(), np.mean(told, axis=0))
    assert est.counts.sum() == 7
    V = est.variance_trace()
    assert V.shape == (3,)
    est.reset()
    assert est.t == 0
    assert est.counts.sum() == 0


def test_misuse_errors():
    est = GradientEstimator(default_selector(), 2, T=4, dim=3)
    with pytest.raises(ProtocolError, match="tell\\(\\) without a pending ask"):
        est.tell(np.zeros(3))
    est.ask()
    with pytest.raises(ProtocolError, match="ask\\(\\) called twice"):
        est.ask()
    with pytest.raises(ValueError, match="'gradient'.*length dim = 3.*round 1"):
        est.tell(np.zeros(4))
    with pytest.raises(NonFiniteGradientError, match="round 1 for n = 1"):
        est.tell(np.array([0.0, np.nan, 1.0]))
    est.tell(np.zeros(3))
    with pytest.raises(ProtocolError, match="after 1 of T = 4"):
        est.result()
    for _ in range(3):
        est.ask()
        est.tell(np.ones(3))
    with pytest.raises(ProtocolError, match="all T = 4 rounds are told"):
        est.ask()


def test_constructor_errors():
    with pytest.raises(
        ValueError, match="'T' parameter of GradientEstimator must be an integer >= 6"
    ):
        GradientEstimator(default_selector(), 3, T=5, dim=2)
    with pytest.raises(ValueError, match="'oracle'"):
        GradientEstimator(EEGrad(), 3, T=10, dim=2)  # β, P = "oracle" need a simulator
    with pytest.raises(ValueError, match="truth"):
        GradientEstimator(OptimalArm(), 3, T=10, dim=2)
    with pytest.raises(TypeError, match="'selector'"):
        GradientEstimator("thompson", 3, T=10, dim=2)


def _twin_loops(make, d, engines, rounds_of, tensor=None):
    """Loops on each engine fed the same gradients; yields after each estimate."""
    rng = np.random.default_rng(d)
    scale = np.array([3.0, 1.0, 2.0, 1.5])
    loops = [GradientEstimator(make(), 4, 30, dim=d, rng=5, engine=e) for e in engines]
    for iterate in range(rounds_of):
        if iterate:
            for est in loops:
                est.next_iterate()
        w = rng.standard_normal(d) + 1.0
        while not loops[0].done:
            arms = [est.ask() for est in loops]
            assert len(set(arms)) == 1
            g = w + np.sqrt(scale[arms[0] - 1]) * rng.standard_normal(d)
            for est in loops:
                est.tell(g if tensor is None else tensor(g))
        yield loops


@pytest.mark.parametrize("d", [3, 40, 5000])
@pytest.mark.parametrize("make", [default_selector, ThompsonVariance])
def test_compiled_round_equals_the_numpy_path(make, d):
    """The round's statistics in one compiled pass (engines.loop_kernels.tell_pass: δ, ‖δ‖²,
    the mean update and, for the default rule at d > 16, the Gram row; blocks of 2048
    coordinates, so d = 5000 crosses two block edges) against the NumPy path: the same pulls
    over three iterates and the same estimates. The sums run in another order (SIMD lanes):
    1e-12 relative is a few hundred units of the last place, far below any statistical
    effect, far above the rounding of sums of 5000 terms; the fitted σ² (through the Gram rows
    and the fit's own iterations) to 1e-9."""
    pytest.importorskip("numba")
    for numpy_loop, compiled_loop in _twin_loops(make, d, ("numpy", "numba"), 3):
        assert numpy_loop._backend.compiled is None
        if compiled_loop._mode == "full":
            # the rule's own statistics take each gradient: the backend keeps none
            assert compiled_loop._backend.buf is None
            assert numpy_loop._backend.buf is None
        else:
            assert compiled_loop._backend.compiled is not None
        np.testing.assert_array_equal(compiled_loop.counts, numpy_loop.counts)
        np.testing.assert_allclose(compiled_loop.result(), numpy_loop.result(), rtol=1e-12)
        if hasattr(numpy_loop.selector, "sigma2"):  # the fit, which reads the Gram rows
            np.testing.assert_allclose(compiled_loop.selector.sigma2, numpy_loop.selector.sigma2,
                                       rtol=1e-9)  # fmt: skip


@pytest.mark.parametrize("engine", ["numpy", "auto"])
def test_a_non_finite_gradient_changes_nothing(engine):
    """NaN at a round raises and leaves the statistics as they were: telling the round's real
    gradient afterwards gives exactly the estimate of a twin loop that never saw the NaN (the
    compiled pass writes the new mean to a spare row and commits only a finite round)."""
    d = 40  # the default rule's Gram row (d > 16)
    rng = np.random.default_rng(2)
    twins = [GradientEstimator(default_selector(), 3, 12, dim=d, rng=1, engine=engine)
             for _ in range(2)]  # fmt: skip
    for t in range(12):
        g = rng.standard_normal(d) * (1 + t % 3)
        for i, est in enumerate(twins):
            est.ask()
            if i == 1 and t in (0, 7):
                bad = g.copy()
                bad[d // 2] = np.inf if t else np.nan
                with pytest.raises(NonFiniteGradientError):
                    est.tell(bad)
            est.tell(g)
    np.testing.assert_array_equal(twins[1].counts, twins[0].counts)
    np.testing.assert_array_equal(twins[1].result(), twins[0].result())


def test_ask_at_least_raises_the_rules_choice_and_the_rule_is_told_it():
    """A caller that cannot run fewer than m clients (SecAgg+: two) asks with at_least=m: a
    rule's n below m becomes m, the rule is told the arm that ran, and every later call
    works; at_least outside 1..N is refused by name."""
    est = GradientEstimator(FixedArm(1), 4, T=3, dim=2, rng=0)
    for _ in range(3):
        assert est.ask(at_least=2) == 2
        est.tell(np.ones(2))
    np.testing.assert_allclose(est.result(), np.ones(2))
    est.next_iterate()
    assert est.ask() == 1
    est.tell(np.ones(2))
    for bad in (0, 5, 1.5):
        with pytest.raises(InvalidParameterError, match="'at_least'.*1..N = 4"):
            est.ask(at_least=bad)
