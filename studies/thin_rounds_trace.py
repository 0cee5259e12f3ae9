"""One bench run, round by round: the n asked and the training loss its clients report
(``train_loss``: their mean over the last local epoch's batches, as the clients send it), and
the run's final training loss on the whole federation.

    python studies/thin_rounds_trace.py --setting digits-cnn2d-50-shards --seed 1 \\
        [--method default|guess] [--departure 0.5] [--without-loss-evidence] [--rounds 30]

``--departure`` runs the default's rule at that α; ``--without-loss-evidence`` grants its
departures whatever the clients' loss shows (:class:`eegrad.selectors.anchored.ClientsLoss`'s
bound removed), as the default before the bound ran. The rate is your FedAvg's, read from
``--tuning`` (the bench's ``tuning.json``) or given with ``--lr``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def main() -> None:
    from eegrad.bench import runner
    from eegrad.bench.settings import SETTINGS
    from eegrad.selectors import AnchoredPlan, AnchoredProgress
    from eegrad.selectors.anchored import ClientsLoss

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setting", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--method", default="default", choices=["default", "guess"])
    p.add_argument("--departure", type=float)
    p.add_argument("--without-loss-evidence", action="store_true")
    p.add_argument("--tuning")
    p.add_argument("--lr", type=float)
    p.add_argument("--rounds", type=int, default=30, help="rounds printed")
    args = p.parse_args()
    lr = args.lr
    if lr is None:
        with open(args.tuning) as fh:
            lr = json.load(fh)["your_rate"][args.setting]
    if args.without_loss_evidence:
        ClientsLoss.evidence = lambda self: True
    rule_class = None
    if args.departure is not None:
        base = AnchoredProgress if SETTINGS[args.setting].mode == "round" else AnchoredPlan

        class AtDeparture(base):
            def __init__(self, *a, **kw):
                kw["departure"] = args.departure
                super().__init__(*a, **kw)

        rule_class = AtDeparture
    train = runner.client_update

    record: list[float] = []  # each client's reported loss, in the order they trained

    def client_update(fed, pid, w, lr_, rng, share=None):
        out = train(fed, pid, w, lr_, rng, share)
        record.append(out[1])
        return out

    runner.client_update = client_update
    rows, arms = runner.run_one(args.setting, args.method, args.seed, lr, rule_class=rule_class)
    ns = [a["n"] for a in arms]
    at, cells = 0, []
    for n in ns[: args.rounds]:
        cells.append(f"{n}:{np.mean(record[at:at + n]):.2f}")
        at += n
    print(f"{args.setting} {args.method} seed {args.seed} at rate {lr:g}: final training loss "
          f"{rows[-1]['train_loss']:.3f}")
    print("round n:clients' loss  " + " ".join(cells))


if __name__ == "__main__":
    main()
