"""The compiled engine runs the same rounds as the NumPy engine on the same streams."""

import warnings

import numpy as np
import pytest

from eegrad import (
    KLLCB,
    Arms,
    ChiSquareLCB,
    EEGrad,
    FixedArm,
    GaussianOracle,
    Greedy,
    MemoryKLLCB,
    MemoryThompson,
    OptimalArm,
    Quadratic,
    QuadraticForm,
    RademacherOracle,
    RoundRobin,
    ThompsonVariance,
    estimate_gradient,
    run_sgd,
)
from eegrad import engines as engines_mod
from eegrad._random import RealizationStreams
from eegrad.engines import EngineFallbackWarning
from eegrad.rounds import counts_at_checkpoints, numpy_rounds

numba = pytest.importorskip("numba", reason="the compiled engine needs the 'fast' extra")
from eegrad.engines.numba_engine import run_rounds

ADAPTIVE = [
    lambda T: EEGrad(alpha=2.5, beta="oracle", P="oracle", c=1.0),
    lambda T: EEGrad(alpha=3.0, beta=2.0 * T, P=3.0, c=10.0),
    lambda T: Greedy(),
    lambda T: KLLCB(),
    lambda T: KLLCB(loglog=1.0, dims=1.5),
    lambda T: ThompsonVariance(),
    lambda T: ThompsonVariance(dims=1.0),
    lambda T: ChiSquareLCB(),
    lambda T: ChiSquareLCB(exponent=2.0, dims=1.5),
]
ALL = [*ADAPTIVE, lambda T: FixedArm(2), lambda T: OptimalArm(), lambda T: RoundRobin()]


def cases():
    """The paper's example (σ² scaled to T) and a case with N = 5, d = 3."""
    for T in (50, 300):
        yield T, GaussianOracle(Quadratic(2), Arms(np.array([50.0, 26.0, 16.7]) * T / 50)), 2
    H = np.diag([1.0, 2.0, 0.5])
    yield 40, GaussianOracle(QuadraticForm(H), Arms([3.0, 1.2, 0.8, 1.0, 2.5])), 3


@pytest.mark.parametrize("make", ALL)
@pytest.mark.parametrize("threads", [1, 2])
def test_kernel_equals_numpy_rounds(make, threads):
    """Identical pull counts; gradients equal to 1e-12 relative (here: bit for bit)."""
    for T, oracle, d in cases():
        R = 600  # three blocks, the last one partial
        w = np.random.default_rng(T).standard_normal((R, d)) + 0.1
        at = oracle.at(w)
        totals, counts = [], []
        for engine in ("numpy", "numba"):
            sel = make(T)
            streams = RealizationStreams(np.random.default_rng(7), R)
            sel.init(R, oracle.arms.N, d, truth=at.truth(), streams=streams)
            if engine == "numpy":
                totals.append(numpy_rounds(at, sel, T, streams))
            else:
                totals.append(run_rounds(at, sel, T, streams, threads=threads)[0])
            counts.append(sel.counts.copy())
            if sel.uses_statistics:
                counts.append(sel.stats.count.copy())
        np.testing.assert_array_equal(counts[0], counts[len(counts) // 2])
        np.testing.assert_allclose(totals[1], totals[0], rtol=1e-12, atol=0)


@pytest.mark.parametrize("make", ALL)
def test_estimate_gradient_engines_agree(make):
    for T, oracle, d in cases():
        w = np.random.default_rng(1).standard_normal((300, d))
        a = estimate_gradient(oracle, make(T), w, T, rng=3, engine="numpy")
        b = estimate_gradient(oracle, make(T), w, T, rng=3, engine="numba", threads=2)
        c = estimate_gradient(oracle, make(T), w, T, rng=3, engine="numba", threads=1)
        np.testing.assert_array_equal(a.counts, b.counts)
        np.testing.assert_array_equal(b.counts, c.counts)
        np.testing.assert_allclose(b.gradient, a.gradient, rtol=1e-12, atol=0)
        np.testing.assert_array_equal(b.gradient, c.gradient)


def test_run_sgd_engines_agree(paper_oracle):
    w0 = np.random.default_rng(0).standard_normal((700, 2))
    a = run_sgd(paper_oracle, EEGrad(), w0, K=3, T=50, eta=0.85, rng=4, engine="numpy")
    b = run_sgd(paper_oracle, EEGrad(), w0, K=3, T=50, eta=0.85, rng=4, engine="numba")
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_allclose(b.gaps, a.gaps, rtol=1e-12)


@pytest.mark.parametrize("make", ADAPTIVE)
def test_checkpoint_counts_agree(make):
    oracle = GaussianOracle(Quadratic(2), Arms([3.0, 1.5, 2.0]))
    R, grid = 300, [6, 7, 20, 55]
    w = np.random.default_rng(2).standard_normal((R, 2))
    at = oracle.at(w)
    out = []
    for engine in ("numpy", "numba"):
        sel = make(50)
        streams = RealizationStreams(np.random.default_rng(5), R, rounds=grid[-1])
        sel.init(R, 3, 2, truth=at.truth(), streams=streams)
        out.append(counts_at_checkpoints(at, sel, grid, streams, engine))
    for t in grid:
        np.testing.assert_array_equal(out[0][t], out[1][t])
        assert np.all(out[0][t].sum(axis=1) == t)


def test_a_rule_without_its_own_kernel_falls_back():
    """A subclass inherits its parent's kernel_spec but may change the rule: NumPy runs it,
    with a warning naming it where the compiled engine was asked for."""

    class ShiftedKL(KLLCB):
        def index(self, t):
            return super().index(t) + 1.0

    oracle = GaussianOracle(Quadratic(2), Arms([2.0, 1.0]))
    with pytest.warns(EngineFallbackWarning, match="selector ShiftedKL"):
        estimate_gradient(oracle, ShiftedKL(), np.ones((4, 2)), 8, rng=1, engine="numba")


MEMORY = [
    lambda K, T: MemoryThompson(),
    lambda K, T: MemoryThompson(shape="scalar", discount=0.7),
    lambda K, T: MemoryThompson(window=2),
    lambda K, T: MemoryKLLCB(),
    lambda K, T: MemoryKLLCB(loglog=1.0, shape="diagonal", discount=0.5, window=2),
    lambda K, T: MemoryKLLCB(horizon=K * T),
    lambda K, T: MemoryKLLCB(shape="scalar", horizon=K * T),
]


@pytest.mark.parametrize("make", MEMORY)
@pytest.mark.parametrize("threads", [1, 2])
def test_memory_rules_compiled_equal_numpy(make, threads):
    """The rules with memory on the compiled engine: the same pulls at every iterate and the
    same iterates as the NumPy engine, bit for bit (the kernel repeats the NumPy fit's
    operations in their order); no fallback notice. N = 3, d = 2 (diagonal shape) and N = 5,
    d = 20 (scalar shape under "auto"), 600 realizations (three blocks, the last partial)."""
    import warnings

    setups = [(GaussianOracle(Quadratic(2), Arms([50.0, 26.0, 16.7])), 2, 4, 30),
              (GaussianOracle(Quadratic(20), Arms([3.0, 1.2, 0.8, 1.0, 2.5])), 20, 3, 25)]  # fmt: skip
    for oracle, d, K, T in setups:
        w0 = np.random.default_rng(d).standard_normal((600, d))
        a = run_sgd(oracle, make(K, T), w0, K, T, 0.6, rng=3, engine="numpy")
        with warnings.catch_warnings():
            warnings.simplefilter("error", EngineFallbackWarning)
            b = run_sgd(oracle, make(K, T), w0, K, T, 0.6, rng=3, engine="numba", threads=threads)
        np.testing.assert_array_equal(a.counts, b.counts)
        np.testing.assert_array_equal(a.w, b.w)


def test_memory_rule_horizon_warning_on_the_compiled_engine():
    oracle = GaussianOracle(Quadratic(2), Arms([3.0, 2.0, 1.0]))
    w0 = np.ones((4, 2))
    with pytest.warns(RuntimeWarning, match="told horizon=20 rounds"):
        run_sgd(oracle, MemoryKLLCB(horizon=20), w0, 2, 12, 0.5, rng=1, engine="numba")


def test_unsupported_case_falls_back_with_notice():
    oracle = RademacherOracle(Quadratic(2), Arms([2.0, 1.0]))
    w = np.ones((10, 2))
    with pytest.warns(EngineFallbackWarning, match="noise family 'rademacher'"):
        b = estimate_gradient(oracle, EEGrad(), w, 8, rng=1, engine="numba")
    a = estimate_gradient(oracle, EEGrad(), w, 8, rng=1, engine="numpy")
    np.testing.assert_array_equal(a.gradient, b.gradient)
    # "auto" takes NumPy for it silently: it is what auto means.
    c = estimate_gradient(oracle, EEGrad(), w, 8, rng=1, engine="auto")
    np.testing.assert_array_equal(a.gradient, c.gradient)


def test_numba_requested_but_not_installed(monkeypatch, paper_oracle):
    monkeypatch.setattr(engines_mod, "numba_available", lambda: False)
    with pytest.raises(ValueError, match="'engine'.*Numba installed"):
        estimate_gradient(paper_oracle, EEGrad(), np.ones((2, 2)), 6, rng=0, engine="numba")
    res = estimate_gradient(paper_oracle, EEGrad(), np.ones((2, 2)), 6, rng=0, engine="auto")
    assert res.counts.sum() == 12


def test_bad_engine_and_threads(paper_oracle):
    with pytest.raises(ValueError, match="'engine' parameter of estimate_gradient"):
        estimate_gradient(paper_oracle, EEGrad(), np.ones((2, 2)), 6, rng=0, engine="cuda")
    with pytest.raises(ValueError, match="'threads' parameter"):
        estimate_gradient(paper_oracle, EEGrad(), np.ones((2, 2)), 6, rng=0, threads=0)


TOY_COMPILED_RULE = '''
"""A toy compiled rule: always the largest arm; its kernel is the module beside it."""
import numpy as np

from eegrad.selectors.base import KernelSpec, Selector
from eegrad.selectors.registry import register_rule


@register_rule("toy_largest_compiled", label="largest arm (toy, compiled)")
class ToyLargestCompiled(Selector):
    uses_statistics = False

    def kernel_spec(self, rounds):
        return KernelSpec("toy_largest", "toy_largest_compiled", keep_stats=False)

    def _select(self, t):
        R, N, _ = self._shape
        return np.full(R, N - 1, dtype=np.int64)
'''

TOY_KERNEL = '''
"""The toy rule's kernel: T rounds of one block, the oracle's draws as the NumPy engine's."""
import numba as nb
import numpy as np

from eegrad.engines.numba_engine import register_kernel, run_blocks
from eegrad.engines.numba_kernels import _pull


@nb.njit(nogil=True)
def toy_block(gen, grad, sqrt_m, scale, T, total, count, ckpts, ckpt_counts):
    Rb, d = grad.shape
    N = scale.shape[0]
    z, g = np.empty(d), np.empty(d)
    ci = 0
    for t in range(1, T + 1):
        for r in range(Rb):
            _pull(gen, grad, sqrt_m, scale, r, N - 1, z, g, total)
            count[r, N - 1] += 1
        if ci < ckpts.shape[0] and ckpts[ci] == t:
            ckpt_counts[ci] = count
            ci += 1


@register_kernel("toy_largest")
def run_toy(run, selector, spec, T, streams, threads):
    def block(b, sl, ckpts):
        toy_block(streams.generators[b], run.grad[sl], run.sqrt_m[sl], run.scale, T,
                  run.total[sl], run.count[sl], run.ckpts, ckpts)

    run_blocks(block, run, streams, threads)
    selector.absorb(run.count, T)
'''


def test_a_compiled_rule_is_its_module_plus_its_kernel(tmp_path, monkeypatch, paper_oracle):
    """A compiled rule added as two modules — the rule in the selectors package, its kernel in
    the engines package, each found by discovery — runs on the compiled engine with no edit
    elsewhere, and agrees with its NumPy path: the same pulls, the same estimate to rounding
    (the kernel's sum runs in another order: 1e-12 relative)."""
    pytest.importorskip("numba")
    import sys

    import eegrad.engines
    import eegrad.selectors
    from eegrad.selectors import make_rule, registry, rule_info

    (tmp_path / "rules").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "rules" / "toy_compiled_rule.py").write_text(TOY_COMPILED_RULE)
    (tmp_path / "kernels" / "toy_compiled_kernel.py").write_text(TOY_KERNEL)
    monkeypatch.setattr(eegrad.selectors, "__path__",
                        [*eegrad.selectors.__path__, str(tmp_path / "rules")])  # fmt: skip
    monkeypatch.setattr(eegrad.engines, "__path__",
                        [*eegrad.engines.__path__, str(tmp_path / "kernels")])  # fmt: skip
    try:
        assert rule_info("toy_largest_compiled").compiled
        w = np.array([[1.0, -0.5]] * 6)
        with warnings.catch_warnings():
            warnings.simplefilter("error", EngineFallbackWarning)  # no fallback to NumPy
            a = estimate_gradient(paper_oracle, make_rule("toy_largest_compiled"), w, 20, rng=4,
                                  engine="numba")  # fmt: skip
        b = estimate_gradient(paper_oracle, make_rule("toy_largest_compiled"), w, 20, rng=4,
                              engine="numpy")  # fmt: skip
        np.testing.assert_array_equal(a.counts, b.counts)
        assert np.all(a.counts[:, -1] == 20)
        np.testing.assert_allclose(a.gradient, b.gradient, rtol=1e-12)
    finally:
        registry.unregister_rule("toy_largest_compiled")
        for name in ("eegrad.selectors.toy_compiled_rule", "eegrad.engines.toy_compiled_kernel"):
            sys.modules.pop(name, None)
