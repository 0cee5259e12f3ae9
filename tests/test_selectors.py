import numpy as np
import pytest

from eegrad import (
    KLLCB,
    Arms,
    CallableOracle,
    ChiSquareLCB,
    EEGrad,
    FixedArm,
    GaussianOracle,
    Greedy,
    OptimalArm,
    ProtocolError,
    Quadratic,
    RoundRobin,
    ThompsonVariance,
    estimate_gradient,
)
from eegrad.theory import f

SELECTORS = [
    lambda: EEGrad(alpha=2.5, beta=50.0, P=1.0, c=1.0),
    lambda: EEGrad(alpha=3.0, beta="oracle", P="oracle", c=10.0),
    lambda: FixedArm(2),
    lambda: OptimalArm(),
    lambda: RoundRobin(),
    lambda: Greedy(),
    lambda: KLLCB(),
    lambda: ChiSquareLCB(),
    lambda: ThompsonVariance(),
]


@pytest.mark.parametrize("make", SELECTORS)
def test_counts_sum_to_T_and_seed_reproducible(make, paper_oracle):
    w = np.random.default_rng(0).standard_normal((300, 2))
    a = estimate_gradient(paper_oracle, make(), w, T=40, rng=7)
    b = estimate_gradient(paper_oracle, make(), w, T=40, rng=7)
    assert a.counts.shape == (300, 3)
    assert np.all(a.counts.sum(axis=1) == 40)
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.gradient, b.gradient)
    c = estimate_gradient(paper_oracle, make(), w, T=40, rng=8)
    assert not np.array_equal(a.gradient, c.gradient)


@pytest.mark.parametrize("make", [SELECTORS[i] for i in (0, 1, 5, 6, 7, 8)])
def test_initial_rounds_pull_every_arm_twice_in_order(make, paper_oracle):
    sel = make()
    R, N = 5, 3
    w = np.ones((R, 2))
    at = paper_oracle.at(w)
    sel.init(R, N, 2, truth=at.truth())
    from eegrad._random import RealizationStreams

    streams = RealizationStreams(np.random.default_rng(0), R)
    for t in range(1, 2 * N + 1):
        arms = sel.ask(t)
        assert np.all(arms == (t - 1) % N)  # arms 1..N, then 1..N
        sel.tell(arms, at.sample(arms, streams))
    assert np.all(sel.counts == 2)


def reference_eegrad(history, t, alpha, beta, P, c, d):
    """Slow, obviously-correct eq. (pickOracle) for one realization from its full history."""
    N = len(history)
    if t <= 2 * N:
        return (t - 1) % N
    best, best_val = None, np.inf
    for n in range(N):
        h = np.array(history[n])
        V = np.trace(np.atleast_2d(np.cov(h.T)))
        x = alpha * np.log(t) / (len(h) - 1)
        width = beta * P * np.sqrt(x * d / c) * max(1.0, np.sqrt(x / (c * d)))
        val = V - width
        if val < best_val:  # strict: ties keep the smallest n
            best, best_val = n, val
    return best


def test_vectorised_eegrad_equals_reference_loop():
    """The vectorised rule picks, at every round and realization, what a per-realization loop
    over the stored history picks, given the same outputs."""
    arms = Arms(sigma2=[4.0, 2.0, 2.5, 6.0])
    sig = np.sqrt(arms.sigma2)
    R, d, T = 40, 3, 60
    record = []

    def func(w, n, rng):
        g = w + sig[n - 1][:, None] * rng.standard_normal(w.shape)
        record.append((n - 1, g))
        return g

    oracle = CallableOracle(func, arms, d=d)
    alpha, beta, P, c = 2.5, 6.0, 3.0, 5.0
    sel = EEGrad(alpha=alpha, beta=beta, P=P, c=c)
    w = np.random.default_rng(1).standard_normal((R, d))
    res = estimate_gradient(oracle, sel, w, T=T, rng=2)
    assert len(record) == T
    for r in range(R):
        history = [[] for _ in range(arms.N)]
        for t, (arms_t, g_t) in enumerate(record, start=1):
            assert arms_t[r] == reference_eegrad(history, t, alpha, beta, P, c, d)
            history[arms_t[r]].append(g_t[r])
        np.testing.assert_allclose(res.gradient[r], np.mean([g[r] for _, g in record], axis=0))


def test_ties_go_to_smallest_n():
    # Identical outputs for every arm: V ties exactly, so the smallest index wins.
    arms = Arms(sigma2=[1.0, 1.0, 1.0])
    oracle = CallableOracle(lambda w, n, rng: w + (np.arange(len(n)) % 2)[:, None], arms, d=1)
    res = estimate_gradient(oracle, Greedy(), np.zeros((4, 1)), T=12, rng=0)
    assert np.all(res.counts[:, 0] == 12 - 4)
    # EE-Grad: at t = 2N + 1 every arm has γ = 2 and V = 0, so the indices tie exactly.
    res = estimate_gradient(oracle, EEGrad(beta=1.0, P=1.0), np.zeros((4, 1)), T=7, rng=0)
    assert np.all(res.counts[:, 0] == 3)


def test_optimal_and_fixed_arms_pull_one_arm(paper_oracle):
    w = np.ones((10, 2))
    assert np.all(estimate_gradient(paper_oracle, OptimalArm(), w, 7, 0).counts[:, 2] == 7)
    assert np.all(estimate_gradient(paper_oracle, FixedArm(1), w, 7, 0).counts[:, 0] == 7)


def test_eegrad_oracle_constants_use_truth(paper_oracle):
    """beta='oracle' is max σ_n², P='oracle' is each realization's S(w)."""
    sel = EEGrad(beta="oracle", P="oracle", c=2.0)
    w = np.array([[1.0, 0.0], [0.0, 3.0]])
    estimate_gradient(paper_oracle, sel, w, T=6, rng=0)
    beta, P = sel.constants()
    assert beta == 50.0
    np.testing.assert_allclose(P[:, 0], [1.0, 9.0])
    idx = sel.index(7)
    x = 2.5 * np.log(7) / 1.0
    expected = sel.variance_trace() - f(x, 50.0, np.array([[1.0], [9.0]]), 2.0, 2)
    np.testing.assert_allclose(idx, expected)


def test_protocol_errors():
    sel = Greedy()
    with pytest.raises(ProtocolError, match="before init"):
        sel.ask()
    sel.init(2, 3, 1)
    with pytest.raises(ProtocolError, match="without a pending ask"):
        sel.tell(np.zeros(2, dtype=int), np.zeros((2, 1)))
    arms = sel.ask(1)
    with pytest.raises(ProtocolError, match="twice"):
        sel.ask(2)
    with pytest.raises(ProtocolError, match="other arms"):
        sel.tell(arms + 1, np.zeros((2, 1)))
    with pytest.raises(ValueError, match="'gradients'.*shape"):
        sel.tell(arms, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="'gradients'.*finite"):
        sel.tell(arms, np.full((2, 1), np.nan))
    sel.tell(arms, np.zeros((2, 1)))
    with pytest.raises(ProtocolError, match="next round is t=2"):
        sel.ask(5)
    sel.reset()
    assert sel.t == 0
    assert np.all(sel.counts == 0)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"alpha": 2.0}, ValueError, r"'alpha' parameter of EEGrad must be a finite float > 2"),
        ({"alpha": np.nan}, ValueError, "'alpha'"),
        ({"c": 0.0}, ValueError, r"'c' parameter of EEGrad must be a finite float > 0"),
        ({"c": np.inf}, ValueError, "'c'"),
        ({"beta": -1.0}, ValueError, "'beta'"),
        ({"P": 0.0}, ValueError, "'P'"),
        ({"P": "truth"}, TypeError, "'P' parameter of EEGrad must be a float > 0 or the string"),
        ({"alpha": "3"}, TypeError, "'alpha'"),
    ],
)
def test_eegrad_parameter_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        EEGrad(**kwargs)


def test_fixed_arm_out_of_range(paper_oracle):
    with pytest.raises(ValueError, match=r"'n' parameter of FixedArm must be a mini-batch size"):
        estimate_gradient(paper_oracle, FixedArm(4), np.ones((2, 2)), T=4, rng=0)
    with pytest.raises(ValueError, match="'n' parameter of FixedArm"):
        FixedArm(0)


def test_oracle_constants_without_simulator():
    oracle = CallableOracle(lambda w, n, rng: w, Arms([1.0, 2.0]), d=1)
    with pytest.raises(ValueError, match="'beta' and 'P' parameter of EEGrad is 'oracle'"):
        estimate_gradient(oracle, EEGrad(), np.ones((2, 1)), T=4, rng=0)
    with pytest.raises(ValueError, match="OptimalArm.*truth"):
        estimate_gradient(oracle, OptimalArm(), np.ones((2, 1)), T=4, rng=0)


def test_gaussian_oracle_contract_shapes():
    oracle = GaussianOracle(Quadratic(d=2), Arms(sigma2=[200.0, 104.0, 66.8]))
    res = estimate_gradient(
        oracle,
        EEGrad(alpha=2.5, beta=200.0, P=1.25, c=10.0),
        w=np.tile([1.0, -0.5], (2000, 1)),
        T=200,
        rng=np.random.default_rng(1),
    )
    assert res.gradient.shape == (2000, 2)
    assert res.gradient.dtype == np.float64
    assert res.counts.shape == (2000, 3)
    assert np.issubdtype(res.counts.dtype, np.integer)
    assert np.all(res.counts.sum(axis=1) == 200)


def test_a_rule_is_told_the_release_noise_only_where_its_constructor_takes_it():
    """``with_release_noise``: the spread rule rebuilt with the variances (its other parameters
    kept), a rule given its own variances kept as it is, and a rule that does not model the
    release (FixedArm) returned unchanged."""
    from eegrad import FixedArm, SpreadThompson

    v = np.array([4.0, 1.0, 0.25])
    rule = SpreadThompson(discount=0.8, population=9)
    told = rule.with_release_noise(v)
    assert told is not rule
    np.testing.assert_array_equal(told.release_noise, v)
    assert told.get_params() == {**rule.get_params(), "release_noise": v.tolist()}
    assert told.with_release_noise(2 * v) is told
    fixed = FixedArm(2)
    assert fixed.with_release_noise(v) is fixed
