"""The true one-round progress of every n at one model of a scorecard federation.

Trains FedAvg at a fixed n0 for R rounds on a setting of ``eegrad example flower-scorecard``,
then, from that model, runs ``--reps`` independent rounds of each n (n clients drawn without
replacement, each spending its share, as the setting's ClientApp does) and reports, per n:

* x = ‖E ū‖, the length of the round mean's expectation (its signal's square root),
* v = E‖ū − E ū‖², the noise of the round mean, and m = E‖ū‖² = x² + v,
* g·E ū, the first-order decrease along the round mean's expectation (∇F(w) · E ū, by a
  central difference of the training loss along E ū): at equal x an expected update that points
  away from −∇F (weights that favour some clients: a bias) decreases the loss less,
* the same along the expectation of the round mean weighted by the clients' data sizes (the
  weights of the training loss F) instead of the samples their shares bought (FedAvg's
  ``num-examples``): where it stays level across n while g·E ū falls, the fall is the weights',
* the share of the round's clients whose share bought all their data (capped),
* the true one-round decrease F(w) − F(w − ū) of the training loss (mean ± SE over the rounds).

It measures what a rule that picks n for the next round's decrease aims at, against the best
fixed n of a whole run (the scorecard). Run by hand, e.g.::

    python studies/round_progress.py minibatch-drift --n0 3 --rounds 80 --ns 1 2 3 5 8 12 20
"""

from __future__ import annotations

import argparse
import logging
import random

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setting", help="a scorecard setting (eegrad.examples.scorecard_settings)")
    parser.add_argument("--n0", type=int, default=3, help="the fixed n that trains the model")
    parser.add_argument("--rounds", type=int, default=80, help="rounds of FedAvg at n0")
    parser.add_argument("--ns", type=int, nargs="+", default=[1, 2, 3, 5, 8, 12, 20])
    parser.add_argument("--reps", type=int, default=40, help="rounds of each n from the model")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import flwr.app  # noqa: F401 - Flower sets its logger's level when first imported
    from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict

    from eegrad.examples.scorecard_settings import SETTINGS, federation
    from eegrad.flower import LocalGrid

    logging.getLogger("flwr").setLevel(logging.ERROR)
    if SETTINGS[args.setting].kind == "torch":
        import torch

        torch.set_num_threads(1)
    fed = federation(args.setting, args.seed, SETTINGS[args.setting].rounds)
    strategy, extra = fed.fixed(args.n0, args.rounds)
    random.seed(args.seed)  # FedAvg samples with Python's random module
    result = strategy.start(grid=LocalGrid(fed.client_app(), fed.K),
                            initial_arrays=fed.initial(), num_rounds=args.rounds,
                            train_config=ConfigRecord({"method-id": 1, **extra}))  # fmt: skip
    model = result.arrays
    keys = list(model.keys())

    def flat(record: ArrayRecord) -> np.ndarray:
        return np.concatenate([record[k].numpy().ravel().astype(np.float64) for k in keys])

    def unflat(v: np.ndarray) -> ArrayRecord:
        out, i = {}, 0
        for k in keys:
            a = model[k].numpy()
            out[k] = Array(v[i : i + a.size].reshape(a.shape).astype(a.dtype))
            i += a.size
        return ArrayRecord(out)

    w0 = flat(model)
    f0, _ = fed.evaluate(model)
    app = fed.client_app()
    contexts = [Context(run_id=1, node_id=i + 1, node_config={"partition-id": i,
                                                              "num-partitions": fed.K},
                        state=RecordDict(), run_config={}) for i in range(fed.K)]  # fmt: skip
    rng = np.random.default_rng([args.seed, 5])
    sizes = np.asarray(fed.data_sizes, dtype=np.float64)  # by partition id
    print(f"{args.setting}, seed {args.seed}: the model of fedavg-{args.n0} after {args.rounds} "
          f"rounds, training loss F = {f0:.4f}; {args.reps} rounds of each n")  # fmt: skip
    print("| n | x = ‖E ū‖ | v (noise) | m = E‖ū‖² | g·E ū | g·E ū, data weights | capped "
          "| F(w) − F(w − ū) |")
    print("|---|---|---|---|---|---|---|---|")

    def first_order(direction: np.ndarray) -> float:
        eps = 1e-3  # a central difference along the direction, a thousandth of the step
        along = (fed.evaluate(unflat(w0 - eps * direction))[0]
                 - fed.evaluate(unflat(w0 + eps * direction))[0])  # fmt: skip
        return float(-along / (2.0 * eps))  # ∇F · direction

    for n in args.ns:
        means, drops, data_means, capped = [], [], [], []
        for r in range(args.reps):
            config = ConfigRecord({"method-id": 99, "server-round": 100_000 + r,
                                   "budget-share": fed.share(n)})  # fmt: skip
            parts, weights, chosen = [], [], rng.choice(fed.K, n, replace=False)
            for p in chosen:
                msg = Message(RecordDict({"arrays": model, "config": config}), int(p) + 1,
                              MessageType.TRAIN)  # fmt: skip
                reply = app(msg, contexts[p])
                parts.append(w0 - flat(reply.content["arrays"]))
                weights.append(float(reply.content["metrics"]["num-examples"]))
            u = np.average(parts, axis=0, weights=weights)
            means.append(u)
            data_means.append(np.average(parts, axis=0, weights=sizes[chosen]))
            capped.append(np.mean(np.asarray(weights) >= sizes[chosen]))
            drops.append(f0 - fed.evaluate(unflat(w0 - u))[0])
        means = np.array(means)
        centre = means.mean(axis=0)
        v = float(((means - centre) ** 2).sum(axis=1).mean())
        m = float((means**2).sum(axis=1).mean())
        x = float(np.sqrt(max(m - v, 0.0)))
        se = float(np.std(drops, ddof=1) / np.sqrt(len(drops)))
        first = first_order(centre)
        first_data = first_order(np.mean(data_means, axis=0))
        print(f"| {n} | {x:.4f} | {v:.4f} | {m:.4f} | {first:+.4f} | {first_data:+.4f} | "
              f"{np.mean(capped):.2f} | {np.mean(drops):+.4f} ± {se:.4f} |")  # fmt: skip


if __name__ == "__main__":
    main()
