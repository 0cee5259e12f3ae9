"""PyTorch adapter (the ``torch`` extra): flat gradients of a model and an optimizer-style
wrapper that runs EE-Grad's T rounds before each step.

Install PyTorch first (on machines with a local CPU build: ``pip install torch==2.13.0``), then
``pip install "eegrad[torch]"``. This module imports torch when it is imported; the rest of
eegrad never does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._validation import InvalidParameterTypeError, fail
from .arms import Arms
from .loop import GradientEstimator
from .selectors.base import Selector

__all__ = ["EEGradOptimizer", "assign_flat_grad", "flat_grad", "num_parameters"]


def _params(model_or_params: Any) -> list[torch.nn.Parameter]:
    if isinstance(model_or_params, torch.nn.Module):
        return [p for p in model_or_params.parameters() if p.requires_grad]
    return [p for p in model_or_params if p.requires_grad]


def num_parameters(model_or_params: Any) -> int:
    """Length d of the flat gradient of a model's trainable parameters."""
    return sum(p.numel() for p in _params(model_or_params))


def flat_grad(model_or_params: Any, loss: torch.Tensor | None = None) -> torch.Tensor:
    """The gradient of ``loss`` with respect to the trainable parameters, as one flat tensor
    (on the parameters' device). Without ``loss``, the parameters' current ``.grad``."""
    params = _params(model_or_params)
    if loss is not None:
        grads = torch.autograd.grad(loss, params, allow_unused=True)
    else:
        grads = [p.grad for p in params]
    return torch.cat([
        (torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads,
                                                                             strict=True)
    ])  # fmt: skip


def assign_flat_grad(model_or_params: Any, vector: torch.Tensor) -> None:
    """Write a flat gradient back into the parameters' ``.grad`` (the inverse of
    :func:`flat_grad`)."""
    params = _params(model_or_params)
    d = sum(p.numel() for p in params)
    if vector.shape != (d,):
        raise fail(
            "vector", "assign_flat_grad", f"a flat tensor of length {d}", tuple(vector.shape)
        )
    offset = 0
    for p in params:
        k = p.numel()
        chunk = vector[offset : offset + k].view_as(p).to(dtype=p.dtype, device=p.device)
        if p.grad is None:
            p.grad = chunk.clone()
        else:
            p.grad.copy_(chunk)
        offset += k


class EEGradOptimizer:
    """Wrap a PyTorch optimizer: each :meth:`step` runs T rounds of EE-Grad, then the wrapped
    optimizer's step on the mean gradient.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        The optimizer that applies the gradient (e.g. plain SGD: w ← w − η G).
    selector : Selector
        The rule (e.g. :func:`eegrad.default_selector`).
    arms : Arms or int
        The mini-batch sizes 1..N.
    T : int
        Rounds per step.
    rng : int or numpy.random.Generator
        Randomness of randomised rules.
    accumulate_dtype : torch.dtype, optional
        Dtype of the running statistics (e.g. ``torch.float64``).

    Examples
    --------
    >>> import torch
    >>> from eegrad import default_selector
    >>> model = torch.nn.Linear(3, 1)
    >>> opt = EEGradOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
    ...                       default_selector(), arms=3, T=6)
    >>> def oracle(n):  # the loss of a mini-batch of size n
    ...     x = torch.randn(n, 3)
    ...     return ((model(x) - 1.0) ** 2).mean()
    >>> g = opt.step(oracle)
    >>> tuple(g.shape)
    (4,)
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        selector: Selector,
        arms: Arms | int,
        T: int,
        *,
        rng: Any = 0,
        accumulate_dtype: torch.dtype | None = None,
    ):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise InvalidParameterTypeError(
                "The 'optimizer' parameter of EEGradOptimizer must be a torch.optim.Optimizer. "
                f"Got {optimizer!r} instead."
            )
        self.optimizer = optimizer
        self.params: list[torch.nn.Parameter] = [
            p for group in optimizer.param_groups for p in group["params"] if p.requires_grad
        ]
        self.estimator = GradientEstimator(selector, arms, T, dim=num_parameters(self.params),
                                           rng=rng, accumulate_dtype=accumulate_dtype)  # fmt: skip

    def step(self, oracle: Callable[[int], torch.Tensor]) -> torch.Tensor:
        """Run T rounds — ``oracle(n)`` returns the loss of a mini-batch of size n (a scalar
        tensor) or its flat gradient — then the optimizer's step on the mean gradient, which
        is returned."""
        est = self.estimator
        if est.t > 0:  # a step has run: the next iterate of the same run (memory kept)
            est.next_iterate()
        while not est.done:
            n = est.ask()
            out = oracle(n)
            g = flat_grad(self.params, out) if out.dim() == 0 else out
            est.tell(g)
        mean = est.result()
        self.optimizer.zero_grad(set_to_none=False)
        assign_flat_grad(self.params, mean)
        self.optimizer.step()
        return mean

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the parameters' gradients, as the wrapped optimizer's ``zero_grad``."""
        self.optimizer.zero_grad(set_to_none=set_to_none)
