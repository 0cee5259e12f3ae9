"""How a client's update depends on the samples it uses, for one and for several local epochs
(run by hand; 12 min of CPU time).

The evidence behind ``SpreadThompson(noise_order=2)`` (:mod:`eegrad.spread`): at a model trained
for 30 rounds by FedAvg (7 clients a round, E = 3) in the setting of ``eegrad example
flower-torch`` (seed 0), every one of the 20 clients runs its local training — E epochs of one
full-batch step (step 0.3) on a random subset of m of its samples — ``DRAWS`` times for each m.
Per m and E it prints

* the clients' mean variance of the update, tr Cov(u | m), against the first-order model's
  τ²/m (the log-log slope between successive m: −1 for τ²/m, −2 for κ²/m²);
* the squared norm of the bias common to the clients, ‖ū(m) − ū(m_max)‖², ū the clients'
  mean of the expected updates (with the noise floor of its estimate, 2·var/(20·DRAWS));
* the least-squares fit of the variance to τ²/m + κ²/m² (weights 1/var², i.e. relative
  errors) and its largest relative error.

Usage: ``python studies/local_epochs_noise.py`` (the ``torch``, ``flower`` and ``examples``
extras).
"""

from __future__ import annotations

import logging
import random

import numpy as np

SIZES = (2, 4, 8, 16, 32, 64)
DRAWS = 100
EPOCHS = (1, 3)


def trained_state(seed: int = 0) -> dict:
    """The model after 30 rounds of FedAvg with 7 clients a round and E = 3."""
    import flwr.app  # noqa: F401 - Flower sets its logger's level when first imported
    from flwr.app import ArrayRecord, ConfigRecord
    from flwr.serverapp.strategy import FedAvg

    from eegrad.arms import per_client_spend
    from eegrad.examples import flower_torch as ft
    from eegrad.flower import LocalGrid

    logging.getLogger("flwr").setLevel(logging.ERROR)
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    kept = {}

    def keep(server_round: int, arrays: ArrayRecord) -> None:
        kept["arrays"] = arrays

    n = 7
    strategy = FedAvg(fraction_train=n / ft.K_CLIENTS, min_train_nodes=n,
                      min_available_nodes=ft.K_CLIENTS, fraction_evaluate=0.0)  # fmt: skip
    share = float(per_client_spend(ft.BUDGET, ft.AGGREGATION, n))
    strategy.start(grid=LocalGrid(ft.client_app(3), ft.K_CLIENTS),
                   initial_arrays=ArrayRecord(ft.cnn().state_dict()), num_rounds=30,
                   train_config=ConfigRecord({"data-seed": seed, "method-id": 1,
                                              "budget-share": share}),
                   evaluate_fn=keep)  # fmt: skip
    return kept["arrays"].to_torch_state_dict()


def updates(state: dict, X, y, m: int, epochs: int, draws: int, gen) -> np.ndarray:
    """``draws`` local trainings from ``state`` on random subsets of m samples: (draws, d)."""
    import torch
    import torch.nn.functional as F

    from eegrad.examples import flower_torch as ft

    net = ft.cnn()
    flat0 = torch.cat([v.flatten() for v in state.values()])
    out = []
    for _ in range(draws):
        net.load_state_dict(state)
        opt = torch.optim.SGD(net.parameters(), lr=ft.LR)
        idx = torch.randperm(len(X), generator=gen)[:m]
        for _ in range(epochs):
            opt.zero_grad()
            F.cross_entropy(net(X[idx]), y[idx]).backward()
            opt.step()
        flat = torch.cat([v.flatten() for v in net.state_dict().values()])
        out.append((flat0 - flat).double().numpy())
    return np.array(out)


def main() -> None:
    import torch

    from eegrad.examples import flower_torch as ft

    torch.set_num_threads(2)
    fed = ft.federation(0)
    state = trained_state(0)
    gen = torch.Generator().manual_seed(0)
    K = len(fed["clients"])
    print(f"m, E: clients' mean tr Cov(u | m) (log-log slope) | common bias ‖ū(m) − "
          f"ū({SIZES[-1]})‖² (noise floor); {DRAWS} draws per client and m, {K} clients")
    for epochs in EPOCHS:
        mean, var = {}, {}
        for m in SIZES:
            per_client = []
            for idx in fed["clients"]:
                u = updates(state, fed["X"][idx], fed["y"][idx], min(m, len(idx)), epochs,
                            DRAWS, gen)  # fmt: skip
                per_client.append((u.mean(axis=0), u.var(axis=0, ddof=1).sum()))
            mean[m] = np.mean([c[0] for c in per_client], axis=0)
            var[m] = float(np.mean([c[1] for c in per_client]))
        sizes = np.array(SIZES, dtype=np.float64)
        v = np.array([var[m] for m in SIZES])
        # Fit v ≈ τ²/m + κ²/m² in relative error (weights 1/v).
        A = np.stack([1.0 / sizes, 1.0 / sizes**2], axis=1) / v[:, None]
        (tau2, kappa2), *_ = np.linalg.lstsq(A, np.ones_like(v), rcond=None)
        fit = tau2 / sizes + kappa2 / sizes**2
        for i, m in enumerate(SIZES):
            slope = "" if i == 0 else f"{np.log(v[i] / v[i - 1]) / np.log(2.0):+.2f}"
            bias = mean[m] - mean[SIZES[-1]]
            floor = 2.0 * var[m] / (K * DRAWS)
            print(f"m = {m:3d}, E = {epochs}: {var[m]:.4g} ({slope:>5}) | {bias @ bias:.3g} "
                  f"({floor:.1g})")  # fmt: skip
        print(f"  E = {epochs}: fit τ²/m + κ²/m²: τ² = {tau2:.3g}, κ² = {kappa2:.3g}; largest "
              f"relative error {np.max(np.abs(fit / v - 1.0)):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
