"""
A federated loop in PyTorch
===========================

The federated loop in PyTorch: a logistic-regression model trained with EEGradOptimizer.

Each round the optimizer asks for a number of clients n; the oracle below returns the loss of
n random clients' local batches (the batch each client's share of the budget buys), and
autograd gives its gradient. After T rounds the optimizer steps on the mean gradient.

Run: ``python examples/federated_torch.py`` (needs the ``torch`` and ``examples`` extras).
"""

from __future__ import annotations

import numpy as np
import torch

from eegrad import default_selector
from eegrad.examples.federated import load_setup
from eegrad.torch import EEGradOptimizer


def train(steps: int = 30, T: int = 40, seed: int = 0) -> tuple[float, float]:
    """Train; returns the final objective gap and test accuracy."""
    setup = load_setup()
    obj = setup.objective
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = torch.nn.Linear(obj.d, 1, bias=False, dtype=torch.float64)
    torch.nn.init.zeros_(model.weight)
    clients = [(torch.from_numpy(X), torch.from_numpy(y)) for X, y in setup.clients]
    lam = obj.lam
    opt = EEGradOptimizer(torch.optim.SGD(model.parameters(), lr=1.0 / obj.L),
                          default_selector(), setup.arms, T, rng=seed)  # fmt: skip

    def oracle(n: int) -> torch.Tensor:
        chosen = rng.choice(len(clients), size=n, replace=False)
        b = int(setup.batch[n - 1])
        losses = []
        for c in chosen:
            X, y = clients[c]
            idx = torch.from_numpy(rng.integers(0, len(y), b))
            margin = y[idx] * model(X[idx]).squeeze(-1)
            losses.append(torch.nn.functional.softplus(-margin).mean())
        reg = 0.5 * lam * (model.weight**2).sum()
        return torch.stack(losses).mean() + reg

    for _ in range(steps):
        opt.step(oracle)
    w = model.weight.detach().numpy().reshape(-1)
    gap = float(obj.value(w[None])[0] - obj.f_star)
    acc = float(np.mean(np.where(setup.X_test @ w >= 0, 1.0, -1.0) == setup.y_test))
    return gap, acc


if __name__ == "__main__":
    gap, acc = train()
    print(f"final objective gap {gap:.3e}, test accuracy {acc:.3f}")
