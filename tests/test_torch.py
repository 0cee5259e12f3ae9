"""The PyTorch adapter (the 'torch' extra)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch adapter needs the 'torch' extra")

from eegrad import GradientEstimator, MemoryThompson, ProtocolError, default_selector
from eegrad.torch import EEGradOptimizer, assign_flat_grad, flat_grad, num_parameters


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))


def test_flat_grad_equals_autograd():
    model = small_model()
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    loss = ((model(x) - y) ** 2).mean()
    g = flat_grad(model, loss)
    assert g.shape == (num_parameters(model),)
    loss2 = ((model(x) - y) ** 2).mean()
    loss2.backward()
    expected = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    torch.testing.assert_close(g, expected)
    torch.testing.assert_close(flat_grad(model), expected)  # from .grad
    model.zero_grad()
    assign_flat_grad(model, expected * 2)
    torch.testing.assert_close(flat_grad(model), expected * 2)
    with pytest.raises(ValueError, match="'vector' parameter of assign_flat_grad"):
        assign_flat_grad(model, expected[:3])


@pytest.mark.parametrize("make", [default_selector, MemoryThompson])
def test_estimator_with_tensors_matches_numpy(make):
    """Same gradients as tensors or arrays: same choices, same mean (float64 throughout)."""
    rng = np.random.default_rng(1)
    grads = {n: rng.standard_normal((30, 6)) * n for n in (1, 2, 3)}
    results = []
    for to in (np.asarray, lambda a: torch.tensor(a, dtype=torch.float64)):
        est = GradientEstimator(make(), 3, T=30, dim=6, rng=2)
        t = 0
        while not est.done:
            n = est.ask()
            est.tell(to(grads[n][t]))
            t += 1
        results.append((est.counts, np.asarray(est.result())))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-12)


@pytest.mark.parametrize(("dtype", "rtol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_compiled_round_on_cpu_tensors_equals_torch_ops(dtype, rtol):
    """On the CPU the round's statistics run as one compiled pass over the tensors' NumPy
    views (engine 'auto'); against the tensor operations (engine 'numpy'): the same pulls over
    two iterates at d = 3000 (the default rule's Gram rows) and the same estimates, a tensor
    of the gradients' dtype. Tolerances: a few hundred units of the last place of each dtype,
    relative to the largest component (the sums run in another order, and the tensor path
    multiplies by 1/γ where the pass divides by γ)."""
    pytest.importorskip("numba")
    d = 3000
    rng = np.random.default_rng(4)
    loops = [GradientEstimator(default_selector(), 3, 24, dim=d, rng=2, engine=e)
             for e in ("numpy", "auto")]  # fmt: skip
    for iterate in range(2):
        if iterate:
            for est in loops:
                est.next_iterate()
        w = rng.standard_normal(d)
        while not loops[0].done:
            n = {est.ask() for est in loops}
            assert len(n) == 1
            g = torch.tensor(w + n.pop() * rng.standard_normal(d), dtype=dtype)
            for est in loops:
                est.tell(g)
        assert loops[0]._backend.compiled is None
        assert loops[1]._backend.compiled is not None
        np.testing.assert_array_equal(loops[1].counts, loops[0].counts)
        out = [est.result() for est in loops]
        assert out[1].dtype == dtype
        scale = float(out[0].abs().max())  # components near 0 differ in the scale's last bits
        torch.testing.assert_close(out[1], out[0], rtol=rtol, atol=rtol * scale)


def test_float32_with_float64_accumulation_stays_a_tensor():
    est = GradientEstimator(default_selector(), 2, T=4, dim=3, accumulate_dtype=torch.float64)
    while not est.done:
        est.ask()
        est.tell(torch.ones(3, dtype=torch.float32))
    out = est.result()
    assert isinstance(out, torch.Tensor)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.ones(3))
    est.reset()
    est.ask()
    est.tell(torch.ones(3))
    est.ask()
    with pytest.raises(TypeError, match="changed type"):
        est.tell(np.ones(3))


def test_optimizer_wrapper_runs_T_rounds_then_steps():
    model = small_model()
    before = [p.detach().clone() for p in model.parameters()]
    opt = EEGradOptimizer(torch.optim.SGD(model.parameters(), lr=0.5), default_selector(),
                          arms=3, T=9, rng=0)  # fmt: skip
    sizes = []

    def oracle(n):
        sizes.append(n)
        x = torch.randn(n, 4)
        return (model(x) ** 2).mean()

    g = opt.step(oracle)
    assert len(sizes) == 9
    assert sorted(set(sizes)) == [1, 2, 3]
    after = list(model.parameters())
    offset = 0
    for p0, p1 in zip(before, after, strict=True):
        k = p0.numel()
        torch.testing.assert_close(p1.detach(), p0 - 0.5 * g[offset : offset + k].view_as(p0))
        offset += k
    with pytest.raises(ProtocolError):
        opt.estimator.ask()  # all rounds of this step are told until the next step()


@pytest.mark.parametrize("d", [3, 20])  # the rule with memory: whole gradients; Gram rows
def test_estimates_may_change_backend_between_iterates(d):
    """Buffers are kept from estimate to estimate, but a new estimate may come in another
    type: NumPy first, then PyTorch, each giving the plain mean of its own gradients."""
    est = GradientEstimator(default_selector(), 2, T=4, dim=d)
    rng = np.random.default_rng(0)
    for make in (np.asarray, np.asarray, torch.as_tensor, torch.as_tensor, np.asarray):
        told = []
        while not est.done:
            est.ask()
            g = rng.standard_normal(d) + 3.0
            told.append(g)
            est.tell(make(g))
        np.testing.assert_allclose(np.asarray(est.result()), np.mean(told, axis=0), rtol=1e-6)
        est.next_iterate()
