"""Your rounds, your spend: ``choose_clients(FedAvg(fraction_train=f))`` with no budget against
that FedAvg itself, at the same ``num_rounds``, on a bench federation.

The practitioner's comparison: the same app, the same rounds, the same spend (eegrad's budget is
what the FedAvg spends in those rounds), and the final model's training loss and test accuracy,
paired by seed. Flower's own ``FedAvg.start`` runs the baseline (Python's ``random`` seeded per
seed, as it samples with it); both on the bench's in-process grid and clients
(:mod:`eegrad.bench.runner`), whose clients train E epochs on their own data::

    python studies/your_fedavg.py --setting digits-mlp-20 --rounds 20 --fraction 0.5 \\
        --seeds 6 --lr 0.1

prints one line a seed and the geometric mean of the loss ratio with its 95 % interval (a
t interval on the log ratios over the seeds).
"""

from __future__ import annotations

import argparse
import logging
import math
import random

import numpy as np


def run(setting: str, method: str, seed: int, rounds: int, fraction: float,
        lr: float) -> dict[str, float]:  # fmt: skip
    """One run: the final model's loss and accuracy, the rounds run, the trainings spent and
    the n of every round."""
    from flwr.app import Array, ArrayRecord, ConfigRecord
    from flwr.serverapp.strategy import FedAvg

    from eegrad.bench.runner import _client_app, federation
    from eegrad.flower import LocalGrid, choose_clients

    logging.getLogger("flwr").setLevel(logging.ERROR)
    fed = federation(setting, seed)
    random.seed(seed * 1_000_003 + 7)
    inner = FedAvg(fraction_train=fraction, fraction_evaluate=0.0, min_available_nodes=fed.K)
    asked: list[int] = []
    if method == "fedavg":
        strategy = inner
        original = strategy.configure_train

        def configure_train(server_round, arrays, config, grid):
            out = list(original(server_round, arrays, config, grid))
            asked.append(len(out))
            return out

        strategy.configure_train = configure_train
    else:
        strategy = choose_clients(inner, rng=np.random.SeedSequence([seed, 31]))
    w0 = ArrayRecord({"w": Array(fed.model.initial(seed))})
    result = strategy.start(grid=LocalGrid(_client_app(fed), fed.K), initial_arrays=w0,
                            num_rounds=rounds, train_config=ConfigRecord({"lr": float(lr)}))  # fmt: skip
    if method != "fedavg":
        asked = [r["arm"] for r in strategy.records]
    loss, acc = fed.evaluate(result.arrays["w"].numpy())
    return {"loss": loss, "accuracy": acc, "rounds": len(asked), "spent": sum(asked),
            "arms": asked}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setting", default="digits-mlp-20")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--fraction", type=float, default=0.5)
    p.add_argument("--seeds", type=int, default=6)
    p.add_argument("--lr", type=float, default=0.1)
    a = p.parse_args()
    logs = []
    for seed in range(a.seeds):
        ours = run(a.setting, "eegrad", seed, a.rounds, a.fraction, a.lr)
        theirs = run(a.setting, "fedavg", seed, a.rounds, a.fraction, a.lr)
        ratio = ours["loss"] / theirs["loss"]
        logs.append(math.log(ratio))
        print(f"seed {seed}: eegrad loss {ours['loss']:.4f} acc {ours['accuracy']:.3f} "
              f"rounds {ours['rounds']} spent {ours['spent']}; fedavg loss {theirs['loss']:.4f} "
              f"acc {theirs['accuracy']:.3f} rounds {theirs['rounds']} spent {theirs['spent']}; "
              f"ratio {ratio:.3f}; n {ours['arms']}")  # fmt: skip
    from scipy import stats

    m = float(np.mean(logs))
    half = (float(stats.t.ppf(0.975, len(logs) - 1) * np.std(logs, ddof=1) / math.sqrt(len(logs)))
            if len(logs) > 1 else float("nan"))  # fmt: skip
    print(f"geometric mean of eegrad's loss over FedAvg's: {math.exp(m):.3f} "
          f"(95 % interval {math.exp(m - half):.3f} to {math.exp(m + half):.3f}), "
          f"{len(logs)} seeds")


if __name__ == "__main__":
    main()
