"""eegrad.parts: a pull's parts told one at a time equal the stacked computation to rounding."""

import numpy as np
import pytest

from eegrad import (
    GradientEstimator,
    InvalidParameterError,
    MemoryThompson,
    NonFiniteGradientError,
    ProtocolError,
    SpreadThompson,
)
from eegrad.engines import numba_available
from eegrad.parts import PullAccumulator
from eegrad.spread import pair_sum, weighted_mean

ENGINES = ["numpy", *(["numba"] if numba_available() else [])]


def _parts(seed=0, n=7, d=500):
    rng = np.random.default_rng(seed)
    parts = rng.standard_normal((n, d)) * 0.01 + rng.standard_normal(d)  # close updates
    weights = rng.uniform(1.0, 9.0, n)
    weights[3] = 0.0  # a part left out
    return parts, weights


def _stacked(parts, weights):
    mean = weighted_mean(parts, weights)
    keep = weights > 0
    spread = float(weights[keep] @ ((parts[keep] - mean) ** 2).sum(axis=1))
    return mean, float(pair_sum(parts, weights)), spread


@pytest.mark.parametrize("engine", ENGINES)
def test_streamed_sums_equal_the_stack_in_float64(engine):
    """Float64 parts: mean, pair sum and weighted spread equal the stacked forms to 1e-12
    relative (Welford's and West's updates lose a few ulps per part; the spread is 1e-4 of
    ‖u‖², so cancellation in the naive forms would show at 1e-12)."""
    parts, weights = _parts()
    pull = PullAccumulator(engine=engine)
    for p, w in zip(parts, weights, strict=True):
        pull.add(p, w)
    mean, y, spread = _stacked(parts, weights)
    assert pull.count == 6
    np.testing.assert_array_equal(pull.weights, weights[weights > 0])
    np.testing.assert_allclose(pull.mean(), mean, rtol=1e-12, atol=1e-15)
    assert pull.pair_sum() == pytest.approx(y, rel=1e-12)
    assert pull.weighted_spread() == pytest.approx(spread, rel=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_reference_model_and_several_arrays(engine):
    """Parts told as clients' models w_i in two arrays, with the server's model r: the
    updates r − w_i, in float32 kept float32 (mean to float32 rounding: 1e-6 of its scale; pair
    sum 1e-5, float64 sums of float32 deviations)."""
    parts, weights = _parts(1)
    r = np.random.default_rng(2).standard_normal(500)
    models = r - parts
    ref32 = [r[:200].reshape(10, 20).astype(np.float32), r[200:].astype(np.float32)]
    pull = PullAccumulator(reference=ref32, engine=engine)
    for m, w in zip(models.astype(np.float32), weights, strict=True):
        pull.add(iter([m[:200].reshape(10, 20), m[200:]]), w)
    got = pull.mean()
    assert [g.dtype for g in got] == [np.float32, np.float32]
    assert [g.shape for g in got] == [(10, 20), (300,)]
    exact = r.astype(np.float32).astype(np.float64) - models.astype(np.float32).astype(np.float64)
    mean, y, _ = _stacked(exact, weights)
    np.testing.assert_allclose(np.concatenate([got[0].ravel(), got[1]]), mean, rtol=0,
                               atol=1e-6 * np.abs(mean).max())  # fmt: skip
    assert pull.pair_sum() == pytest.approx(y, rel=1e-5)


def test_torch_parts_stay_tensors():
    torch = pytest.importorskip("torch")
    parts, weights = _parts(3)
    pull = PullAccumulator()
    for p, w in zip(parts, weights, strict=True):
        pull.add(torch.tensor(p), w)
    mean, y, spread = _stacked(parts, weights)
    assert isinstance(pull.mean(), torch.Tensor)
    assert pull.mean().dtype == torch.float64
    np.testing.assert_allclose(pull.mean().numpy(), mean, rtol=1e-12, atol=1e-15)
    assert pull.pair_sum() == pytest.approx(y, rel=1e-12)
    assert pull.weighted_spread() == pytest.approx(spread, rel=1e-12)


def test_integer_arrays_are_averaged_in_float64():
    pull = PullAccumulator(reference=[np.array([10, 20])])
    pull.add([np.array([8, 20])], 1.0)
    pull.add([np.array([6, 18])], 1.0)
    np.testing.assert_array_equal(pull.mean()[0], [3.0, 1.0])
    assert pull.mean()[0].dtype == np.float64


@pytest.mark.parametrize("engine", ENGINES)
def test_bad_parts_are_refused_and_the_pull_is_then_unusable(engine):
    pull = PullAccumulator(engine=engine)
    pull.add(np.ones(4), 1.0)
    with pytest.raises(InvalidParameterError, match="'weight' parameter"):
        pull.add(np.ones(4), -1.0)
    with pytest.raises(InvalidParameterError, match=r"'part'.*shape \(4,\)"):
        pull.add(np.ones(5), 1.0)
    bad = np.ones(4)
    bad[2] = np.inf
    fresh = PullAccumulator(engine=engine)
    fresh.add(np.ones(4), 1.0)
    with pytest.raises(NonFiniteGradientError, match="NaN or Inf"):
        fresh.add(bad, 1.0)
    with pytest.raises(InvalidParameterError, match="unusable"):
        fresh.mean()
    with pytest.raises(InvalidParameterError, match="no part of weight > 0"):
        PullAccumulator().mean()
    one = PullAccumulator(spread=False)
    one.add(np.ones(2), 1.0)
    with pytest.raises(InvalidParameterError, match="spread=False"):
        one.pair_sum()


def _told(make, how, parts_per_round, T=1, torch=False):
    """Choices and estimates of a GradientEstimator told each round's parts all at once
    (tell_parts) or one at a time (tell_part, end_pull)."""
    N, d = 4, 30
    est = GradientEstimator(make(), N, T=T, dim=d, rng=5)
    rng = np.random.default_rng(9)
    picks, estimates = [], []
    for _ in range(parts_per_round):
        while not est.done:
            n = est.ask()
            picks.append(n)
            parts = rng.standard_normal((n, d)) * np.sqrt(n) + 1.0
            weights = rng.uniform(1.0, 3.0, n)
            if torch:
                import torch as th

                parts = th.tensor(parts)
            if how == "stack":
                est.tell_parts(parts, weights)
            else:
                for p, w in zip(parts, weights, strict=True):
                    est.tell_part(p, float(w))
                est.end_pull()
        out = est.result()
        estimates.append(np.asarray(out.numpy() if torch else out))
        est.next_iterate()
    return picks, np.array(estimates)


@pytest.mark.parametrize("torch", [False, True])
@pytest.mark.parametrize(("make", "T"), [(lambda: SpreadThompson(population=40), 1),
                                         (lambda: MemoryThompson(), 12)])  # fmt: skip
def test_parts_told_one_at_a_time_equal_parts_told_at_once(make, T, torch):
    """The same choices and estimates (to 1e-12 relative) whether a pull's parts come as a
    stack or one at a time: SpreadThompson (every round a step) and the default rule (T rounds
    a step), for NumPy arrays and PyTorch tensors."""
    if torch:
        pytest.importorskip("torch")
    a = _told(make, "stack", 15, T, torch)
    b = _told(make, "stream", 15, T, torch)
    assert a[0] == b[0]
    assert len(set(a[0])) > 1
    np.testing.assert_allclose(b[1], a[1], rtol=1e-12, atol=1e-13)


def test_one_round_estimates_keep_no_statistics():
    """With T = 1 an estimate is its one round: the estimator allocates no N × d statistics
    (FedAvg's memory), and its result is the round's output."""
    est = GradientEstimator(SpreadThompson(), 50, T=1, dim=10_000, rng=0)
    n = est.ask()
    parts = np.random.default_rng(0).standard_normal((n, 10_000))
    for p in parts:
        est.tell_part(p, 2.0)
    est.end_pull()
    assert est._backend is None or est._backend.buf is None
    np.testing.assert_allclose(est.result(), parts.mean(axis=0), rtol=1e-12, atol=1e-14)


def test_the_streamed_protocol_is_checked():
    est = GradientEstimator(SpreadThompson(), 4, T=1, dim=3, rng=0)
    with pytest.raises(ProtocolError, match="tell_part"):
        est.tell_part(np.ones(3), 1.0)
    est.ask()
    with pytest.raises(ProtocolError, match="end_pull"):
        est.end_pull()
    with pytest.raises(InvalidParameterError, match="'part'.*dim = 3"):
        est.tell_part(np.ones(4), 1.0)
    bad = np.array([1.0, np.nan, 0.0])
    with pytest.raises(NonFiniteGradientError, match="round 1.*withdraw"):
        est.tell_part(bad, 1.0)
    est.withdraw()
    est.ask()
    est.tell_part(np.ones(3), 1.0)
    est.end_pull()
    assert est.done


def test_norm_and_inner_sums_a_models_arrays_in_float64():
    # (‖x‖², x·y) over a model's arrays of mixed dtypes, against float64 NumPy: equal to a few
    # ulps of the sums (the compiled pass may add in another order), None without y; torch
    # tensors give the same; arrays that do not pair are refused.
    from eegrad.parts import norm_and_inner

    rng = np.random.default_rng(4)
    x = [rng.standard_normal(1000).astype(np.float32), rng.standard_normal((3, 4))]
    y = [rng.standard_normal(1000).astype(np.float32), rng.standard_normal((3, 4))]
    xx = sum(float(np.sum(a.astype(np.float64) ** 2)) for a in x)
    xy = sum(float(np.sum(a.astype(np.float64) * b.astype(np.float64))) for a, b in zip(x, y, strict=True))
    got_xx, got_xy = norm_and_inner(x, y)
    assert got_xx == pytest.approx(xx, rel=1e-12)
    assert got_xy == pytest.approx(xy, rel=1e-12, abs=1e-12 * xx)
    assert norm_and_inner(x) == (pytest.approx(xx, rel=1e-12), None)
    torch = pytest.importorskip("torch")
    t_xx, t_xy = norm_and_inner([torch.as_tensor(a) for a in x], [torch.as_tensor(b) for b in y])
    assert t_xx == pytest.approx(xx, rel=1e-12)
    assert t_xy == pytest.approx(xy, rel=1e-12, abs=1e-12 * xx)
    with pytest.raises(InvalidParameterError, match="'y'"):
        norm_and_inner(x, y[:1])
