"""The scorecard with each client weighted by its data size instead of the samples it used.

The scorecard's clients (``budgeted_train``, ``budgeted_torch_train``) report as their weight,
``num-examples``, the samples their share bought. Where a share buys less than a client holds,
FedAvg's round mean then weights the clients by what their devices afford, not by their data, as
the training loss does: ``studies/round_progress.py`` measures the round mean's first-order
decrease g·E ū falling with n under those weights and level under the data sizes. This script
runs FedAvg at every fixed n of a card's settings with every reply's ``num-examples`` replaced
by the client's data size, in a store of their own, so that each fixed n's loss can be set
beside the card's own::

    python studies/data_weights.py --seeds 10 --out DIR --settings fedsgd overheads cnn-e1

and prints every fixed n's mean final loss. The default is not run: its noise model reads the
weights as the samples used (τ²/ω), which this replacement falsifies.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def data_weighted(fed: Any) -> Any:
    """``fed`` whose ClientApp replies carry each client's data size as ``num-examples``."""
    from flwr.clientapp import ClientApp

    sizes = fed.data_sizes
    inner_app = fed.client_app

    def client_app() -> Any:
        inner = inner_app()
        app = ClientApp()

        @app.train()
        def train(msg: Any, context: Any) -> Any:
            reply = inner(msg, context)
            pid = int(context.node_config["partition-id"])
            reply.content["metrics"]["num-examples"] = sizes[pid]
            return reply

        return app

    fed.client_app = client_app
    return fed


def main() -> None:
    from eegrad.examples import scorecard

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--settings", nargs="+", required=True)
    args = p.parse_args()
    # the fixed n alone (the default's rows would mean nothing), in a store of their own
    rows, _ = scorecard.run(args.settings, list(range(args.seeds)), jobs=args.jobs,
                            store=args.out / "runs", default=False, adapt=data_weighted)  # fmt: skip
    for setting in args.settings:
        # the card's summary, read at any fixed n: its best and median fixed n, every mean
        s = scorecard.summarise([r for r in rows if r["setting"] == setting], "fedavg-1")
        print(f"{setting} ({args.seeds} seeds, data-size weights): best {s['best']} "
              f"{s['best_loss']:.4f}, median fixed n {s['median_loss']:.4f}")
        fixed = sorted(s["final_loss"], key=lambda m: int(m.removeprefix("fedavg-")))
        print("  " + ", ".join(f"{m.removeprefix('fedavg-')}: {s['final_loss'][m][0]:.4f}"
                               for m in fixed))


if __name__ == "__main__":
    main()
