"""B a round: what one round of n clients does, measured, along a run of fixed n.

For a development federation of :mod:`round_mode_study` (or the bench's
``digits-softmax-20-round``), the model is carried along a run of a fixed n (``--along``, the
bench's clients and the built-in step: the clients' weighted mean). At a few of its rounds
(``--at``), ``--draws`` rounds of every n of ``--n`` are drawn from that model, each of n
clients sampled without replacement, each client training the bench's E epochs of
mini-batches on the samples its share (B − D(n))/n buys. For each n the table gives the mean
change of the training loss that one round makes (± its standard error over the draws), and
the signal and noise of the round's update ū, as the rule's model names them: s_n =
‖E ū‖² (the squared norm of the draws' mean, less its noise's share) and v_n = E‖ū − E ū‖²::

    python studies/round_mode_one_round.py mnist1d-mlp-50-round --lr 1 --along 7

The seed is one of the bench's tuning seeds (or another), never a reported one. What it
measures: whether the n that gains most in one round is the n that a run of fixed n does best
with; where it is not, a round's noise is forgotten by the rounds after it and its longer
update adds up (the progress rules' notes, *The run's end*).
"""

from __future__ import annotations

import argparse

import numpy as np
import round_mode_study


def main() -> None:
    from eegrad.arms import per_client_spend
    from eegrad.bench.runner import client_update, federation

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("setting")
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--along", type=int, default=7, help="the fixed n of the run followed")
    p.add_argument("--at", type=int, nargs="+", default=[0, 5, 15, 30, 50])
    p.add_argument("--n", type=int, nargs="+", default=[2, 4, 7, 14, 28, 50])
    p.add_argument("--draws", type=int, default=12)
    a = p.parse_args()
    round_mode_study._register()
    fed = federation(a.setting, a.seed)
    ns = [n for n in a.n if n <= fed.K]

    def one_round(w: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """The model after one round of n bench clients (:func:`client_update`), each on the
        samples its share buys: their mean, weighted by samples."""
        share = float(per_client_spend(fed.budget, fed.aggregation, n))
        updates = [client_update(fed, pid, w, a.lr, rng, share)
                   for pid in rng.choice(fed.K, n, replace=False)]  # fmt: skip
        p_i = np.array([idx.size for _, _, idx in updates], dtype=np.float64)
        return np.tensordot(p_i / p_i.sum(), np.array([x for x, _, _ in updates]), axes=1)

    print(f"{a.setting}, seed {a.seed}, rate {a.lr:g}, along fixed n = {a.along}; each cell: "
          f"the loss's change in one round (± SE over {a.draws} draws), s_n, v_n\n")
    print("| round | training loss | " + " | ".join(f"n = {n}" for n in ns) + " |")
    print("|---" * (2 + len(ns)) + "|")
    rng = np.random.default_rng([a.seed, 5])
    w = fed.model.initial(a.seed)
    for t in range(max(a.at) + 1):
        if t in a.at:
            before = fed.evaluate(w)[0]
            cells = []
            for n in ns:
                draw = np.random.default_rng([a.seed, t, n])
                after = [one_round(w, n, draw) for _ in range(a.draws)]
                change = np.array([fed.evaluate(x)[0] - before for x in after])
                U = w[None, :] - np.array(after)
                mean = U.mean(axis=0)
                v = float(((U - mean) ** 2).sum(axis=1).sum() / (a.draws - 1))
                s = max(float(mean @ mean) - v / a.draws, 0.0)
                se = change.std(ddof=1) / np.sqrt(a.draws)
                cells.append(f"{change.mean():+.3f} ± {se:.3f}, {s:.3g}, {v:.3g}")
            print(f"| {t} | {before:.4f} | " + " | ".join(cells) + " |", flush=True)
        w = one_round(w, a.along, rng)


if __name__ == "__main__":
    main()
