"""The app's server: FedAvg, or eegrad's choose_clients around the same FedAvg (one line), the
model evaluated every round on the held-out digits and each round written to ``out``."""

import csv

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from label_skew.task import Net, evaluate, test_set

app = ServerApp()


def make_strategy(kind: str, fraction_train: float, **options):
    """FedAvg as the app has it, or eegrad choosing how many clients each round asks
    (``options``: choose_clients's, for a study)."""
    strategy = FedAvg(fraction_train=fraction_train, fraction_evaluate=0.0)
    if kind == "eegrad":
        from eegrad.flower import choose_clients

        strategy = choose_clients(strategy, **options)
    elif kind != "fedavg":
        raise ValueError(f"The 'strategy' of the run config must be 'fedavg' or 'eegrad'; got {kind!r}.")
    return strategy


def evaluator(rows: list):
    """The server's evaluation of each round's model on the held-out digits."""
    X, y = test_set()

    def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        net = Net()
        net.load_state_dict(arrays.to_torch_state_dict())
        loss, accuracy = evaluate(net, X, y)
        rows.append({"round": server_round, "loss": loss, "accuracy": accuracy})
        return MetricRecord({"loss": loss, "accuracy": accuracy})

    return evaluate_fn


def run(grid: Grid, config: dict, **options) -> tuple[list, object]:
    """One run of the app on ``grid``: its rounds' evaluations, and the strategy."""
    torch.manual_seed(int(config.get("seed", 0)))
    strategy = make_strategy(str(config["strategy"]), float(config["fraction-train"]), **options)
    rows: list = []
    strategy.start(grid=grid, initial_arrays=ArrayRecord(Net().state_dict()),
                   train_config=ConfigRecord({"lr": float(config["lr"])}),
                   num_rounds=int(config["num-server-rounds"]), evaluate_fn=evaluator(rows))
    return rows, strategy


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the app; write each round's evaluation to the run config's ``out``."""
    rows, _ = run(grid, context.run_config)
    with open(context.run_config["out"], "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["round", "loss", "accuracy"])
        writer.writeheader()
        writer.writerows(rows)
